package child

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary re-executed with modeEnv set is the child of these
// tests; the mode says how it behaves.
const modeEnv = "CHILD_TEST_MODE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(modeEnv); mode != "" {
		helper(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(mode string) {
	switch mode {
	case "graceful": // exits 0 on SIGINT or SIGTERM
		sigs := make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		<-sigs
		fmt.Println("bye")
	case "stubborn": // ignores SIGINT and SIGTERM
		signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "exit3":
		fmt.Println("to stdout")
		fmt.Fprintln(os.Stderr, "to stderr")
		os.Exit(3)
	case "listen": // listens on $CHILD_TEST_ADDR after 200 ms
		time.Sleep(200 * time.Millisecond)
		l, err := net.Listen("tcp", os.Getenv("CHILD_TEST_ADDR"))
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		defer l.Close()
		time.Sleep(time.Hour)
	case "stdin": // exits 0 at the end of its stdin
		_, _ = io.Copy(io.Discard, os.Stdin)
	case "parent": // starts a stubborn grandchild and prints its PID
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), modeEnv+"=stubborn")
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Printf("grandchild %d\n", cmd.Process.Pid)
		time.Sleep(time.Hour)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		os.Exit(2)
	}
}

// start starts the test binary in mode with its output in a log file.
func start(t *testing.T, mode string, s Spec) *Process {
	t.Helper()
	s.Argv = []string{os.Args[0]}
	s.Env = append(os.Environ(), append([]string{modeEnv + "=" + mode}, s.Env...)...)
	if s.Log == "" && s.Stdout == nil {
		s.Log = filepath.Join(t.TempDir(), "child.log")
	}
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

// waitOutput waits until the child's output holds want.
func waitOutput(t *testing.T, p *Process, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := p.Output()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the child's output after 10s:\n%s", want, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestStopEndsChildThatHandlesTheSignal(t *testing.T) {
	p := start(t, "graceful", Spec{})
	waitOutput(t, p, "ready")
	if !p.Running() {
		t.Fatal("Running is false for a running child")
	}
	if err := p.Stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait after a clean exit: %v", err)
	}
	waitOutput(t, p, "bye")
	if p.Running() {
		t.Fatal("Running is true after the reap")
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, ErrExited) {
		t.Fatalf("Signal after the exit: %v, want ErrExited", err)
	}
	if err := p.Stop(syscall.SIGTERM, time.Second); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill after the exit: %v", err)
	}
}

func TestStopKillsChildThatIgnoresTheSignal(t *testing.T) {
	p := start(t, "stubborn", Spec{})
	waitOutput(t, p, "ready")
	const grace = 300 * time.Millisecond
	began := time.Now()
	err := p.Stop(syscall.SIGTERM, grace)
	if !errors.Is(err, ErrKilled) {
		t.Fatalf("Stop: %v, want ErrKilled", err)
	}
	if d := time.Since(began); d < grace {
		t.Fatalf("Stop killed after %v, before the grace of %v", d, grace)
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("Done not closed when Stop returned")
	}
	var ee *exec.ExitError
	if err := p.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("Wait: %v, want death by SIGKILL", err)
	}
}

func TestStopContinuesStoppedChild(t *testing.T) {
	p := start(t, "graceful", Spec{})
	waitOutput(t, p, "ready")
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(syscall.SIGINT, 10*time.Second); err != nil {
		t.Fatalf("Stop of a stopped child: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v, want a clean exit", err)
	}
}

func TestLogHoldsEachRunsOutput(t *testing.T) {
	log := filepath.Join(t.TempDir(), "runs.log")
	var outs []string
	for run := 1; run <= 2; run++ {
		p := start(t, "exit3", Spec{Log: log, Header: fmt.Sprintf("=== run %d", run)})
		var ee *exec.ExitError
		if err := p.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("run %d: Wait: %v, want exit status 3", run, err)
		}
		b, err := p.Output()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, string(b))
		if tail := p.Tail(2); tail != "to stdout\nto stderr" && tail != "to stderr\nto stdout" {
			t.Fatalf("run %d: Tail(2) = %q", run, tail)
		}
	}
	for i, out := range outs {
		if !strings.HasPrefix(out, fmt.Sprintf("=== run %d\n", i+1)) || strings.Count(out, "===") != 1 ||
			!strings.Contains(out, "to stdout\n") || !strings.Contains(out, "to stderr\n") {
			t.Fatalf("run %d's output: %q", i+1, out)
		}
	}
	all, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if string(all) != outs[0]+outs[1] {
		t.Fatalf("log %q is not the runs' outputs in turn", all)
	}
}

func TestOutputToWriters(t *testing.T) {
	var out, errOut bytes.Buffer
	p := start(t, "exit3", Spec{Stdout: &out, Stderr: &errOut})
	_ = p.Wait()
	if out.String() != "to stdout\n" || errOut.String() != "to stderr\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
	}
	if _, err := p.Output(); err == nil {
		t.Fatal("Output without a log file succeeded")
	}
	if _, err := Start(Spec{Argv: []string{"true"}, Log: filepath.Join(t.TempDir(), "l"), Stdout: &out}); err == nil {
		t.Fatal("Start with both a log and a writer succeeded")
	}
}

func TestStopWithoutSignalAfterStdinCloses(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, "stdin", Spec{Stdin: r})
	r.Close()
	time.Sleep(50 * time.Millisecond)
	if !p.Running() {
		t.Fatal("child exited with its stdin open")
	}
	w.Close()
	if err := p.Stop(0, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v, want a clean exit", err)
	}
}

func TestWaitTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	p := start(t, "listen", Spec{Env: []string{"CHILD_TEST_ADDR=" + addr}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.WaitTCP(ctx, addr); err != nil {
		t.Fatalf("WaitTCP: %v", err)
	}

	// A child that exits first: ErrExited.
	q := start(t, "exit3", Spec{})
	if err := q.WaitTCP(ctx, "127.0.0.1:1"); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitTCP on an exiting child: %v, want ErrExited", err)
	}

	// ctx ends first: ctx's error.
	r := start(t, "stubborn", Spec{})
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := r.WaitTCP(short, "127.0.0.1:1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitTCP past the deadline: %v, want DeadlineExceeded", err)
	}
}

// grandchild returns the PID the "parent" helper printed.
func grandchild(t *testing.T, p *Process) int {
	t.Helper()
	out := waitOutput(t, p, "\n")
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "grandchild" {
		t.Fatalf("parent helper said %q", out)
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

func TestKillWithSignalGroupReachesGrandchildren(t *testing.T) {
	p := start(t, "parent", Spec{SignalGroup: true})
	gc := grandchild(t, p)
	if !alive(gc) {
		t.Fatalf("grandchild %d not running", gc)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); alive(gc); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still running 10s after its group was killed", gc)
		}
	}
}

func TestKillWithoutSignalGroupReachesOnlyTheChild(t *testing.T) {
	p := start(t, "parent", Spec{Group: true})
	gc := grandchild(t, p)
	t.Cleanup(func() { _ = syscall.Kill(gc, syscall.SIGKILL) })
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if !alive(gc) {
		t.Fatalf("grandchild %d died with the child though only the child's PID was signalled", gc)
	}
	pgid, err := syscall.Getpgid(gc)
	if err != nil || pgid != p.PID() {
		t.Fatalf("grandchild's process group %d (%v), want the child's own group %d", pgid, err, p.PID())
	}
}

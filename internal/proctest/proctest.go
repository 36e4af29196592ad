// Package proctest runs the tebis binary as real child processes in tests:
// it builds cmd/tebis once per test binary, starts servers, waits until
// they listen, and stops them by PID (SIGINT, or SIGKILL for a crash). It
// is for tests only.
package proctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/tebis (once) and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tebis-bin-")
		if err != nil {
			buildErr = err
			return
		}
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		binPath = filepath.Join(dir, "tebis")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/tebis")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Proc is a running tebis process.
type Proc struct {
	Cmd  *exec.Cmd
	log  string // the file holding its output
	done chan struct{}
	err  error
}

// Output returns what the process printed so far.
func (p *Proc) Output(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Start runs `tebis ARGS...` with its output in the test log's files.
func Start(t testing.TB, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	logf, err := os.CreateTemp(t.TempDir(), "proc-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Proc{Cmd: cmd, log: logf.Name(), done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("output of %v:\n%s", args, b)
		}
	})
	return p
}

// Stop sends SIGINT and waits for a clean exit.
func (p *Proc) Stop(t testing.TB) {
	t.Helper()
	_ = p.Cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("process exited with %v", p.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("process did not stop within 30s of SIGINT")
	}
}

// Kill sends SIGKILL (a crash) and waits.
func (p *Proc) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.done
}

// Signal sends sig.
func (p *Proc) Signal(sig os.Signal) { _ = p.Cmd.Process.Signal(sig) }

// WaitTCP waits until addr accepts connections.
func WaitTCP(t testing.TB, p *Proc, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-p.done:
			t.Fatalf("process exited before listening on %s: %v", addr, p.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 30s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FreePort returns a loopback address with a port free right now.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

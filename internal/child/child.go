// Package child starts and stops the child processes of tebis's tools and
// tests: the tebis binary as a server, master or peer, a ZooKeeper JVM.
//
// Start runs a command with its output appended to a log file (or passed
// to writers), optionally in a process group of its own, and reaps it in
// the background. The child gets SIGKILL if this process dies (Pdeathsig),
// so none outlives a crashed parent. Signal, Stop and Kill reach the
// child's PID (or its whole process group, with Spec.SignalGroup) only
// while it has not been reaped, so they never reach a process that reused
// the PID. Stop asks the child to exit and kills it after a grace period;
// Kill waits a bounded time for the reap. WaitTCP waits until the child
// listens on an address, or exits.
//
// A Process's methods are safe for concurrent use. The package is
// Linux-only, like the rest of tebis.
package child

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrExited reports a child that has exited (signalled after its exit, or
// gone before it listened).
var ErrExited = errors.New("process has exited")

// ErrKilled reports a child that Stop had to kill: it was still running
// when the grace period ended.
var ErrKilled = errors.New("process killed")

// killWait bounds the wait for the reap after SIGKILL (a process in
// uninterruptible sleep can take a while to die).
const killWait = 10 * time.Second

// Spec describes a child process.
type Spec struct {
	// Argv is the whole command: binary (looked up in PATH when it has no
	// slash) and arguments, with any wrapper prefix (`ip netns exec NS`).
	Argv []string
	// Dir is the working directory ("": this process's).
	Dir string
	// Env is the whole environment (nil: this process's).
	Env []string
	// Stdin is the child's standard input (nil: the null device).
	Stdin io.Reader
	// Log, if set, is a file that receives the child's stdout and stderr,
	// appended; it is created if needed. Stdout and Stderr must be nil.
	Log string
	// Header is a line written to Log before the child starts (a newline
	// is added), to tell runs apart.
	Header string
	// Stdout and Stderr receive the child's output when Log is not set
	// (nil: the null device), as in os/exec.
	Stdout, Stderr io.Writer
	// Group puts the child in a process group of its own, so a terminal's
	// Ctrl-C (sent to the foreground group) reaches only this process,
	// which stops the child its own way.
	Group bool
	// SignalGroup sends every signal (Signal, Stop, Kill) to the child's
	// whole process group rather than its PID, so they also reach what the
	// child started. It implies Group.
	SignalGroup bool
}

// Process is a started child.
type Process struct {
	cmd      *exec.Cmd
	pid      int
	group    bool   // signals go to the process group -pid
	log      string // Spec.Log
	logStart int64  // where this run's output starts in log

	mu     sync.Mutex
	exited bool // the child has exited: signal it no more

	done    chan struct{} // closed once the child is reaped
	waitErr error         // cmd.Wait's result, set before done closes
}

// Start starts the child described by s. It does not wait for the child
// to be ready (see WaitTCP).
func Start(s Spec) (*Process, error) {
	if len(s.Argv) == 0 {
		return nil, errors.New("child: empty command")
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	cmd.Dir, cmd.Env, cmd.Stdin = s.Dir, s.Env, s.Stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: s.Group || s.SignalGroup, Pdeathsig: syscall.SIGKILL}
	p := &Process{cmd: cmd, group: s.SignalGroup, log: s.Log, done: make(chan struct{})}
	if s.Log != "" {
		if s.Stdout != nil || s.Stderr != nil {
			return nil, errors.New("child: both a log file and output writers")
		}
		f, err := os.OpenFile(s.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("child: %w", err)
		}
		defer f.Close() // the child has its own descriptor
		fi, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("child: %w", err)
		}
		p.logStart = fi.Size()
		if s.Header != "" {
			if _, err := io.WriteString(f, strings.TrimSuffix(s.Header, "\n")+"\n"); err != nil {
				return nil, fmt.Errorf("child: %w", err)
			}
		}
		cmd.Stdout, cmd.Stderr = f, f
	} else {
		cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("child: start %s: %w", s.Argv[0], err)
	}
	p.pid = cmd.Process.Pid
	go p.reap()
	return p, nil
}

// reap waits for the child to exit. It first waits without reaping
// (WNOWAIT), so exited is set while the zombie still holds the PID: a
// signal sent while exited is clear cannot reach a process (or group)
// that reused the PID.
func (p *Process) reap() {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	p.mu.Lock()
	p.exited = true
	p.mu.Unlock()
	p.waitErr = p.cmd.Wait()
	close(p.done)
}

// PID is the child's process ID (with Spec.Group, also its process-group
// ID). It stays valid as a number after the child exits.
func (p *Process) PID() int { return p.pid }

// Done is closed once the child has exited and been reaped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits until the child is reaped and returns how it exited: nil for
// status 0, an *exec.ExitError otherwise (as exec.Cmd.Wait).
func (p *Process) Wait() error {
	<-p.done
	return p.waitErr
}

// Running reports whether the child has not exited yet (a stopped child
// is running).
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.exited
}

// Signal sends sig to the child (or its process group, with
// Spec.SignalGroup). It returns an error wrapping ErrExited if the child
// has exited.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return fmt.Errorf("child: signal %v to pid %d: %w", sig, p.pid, ErrExited)
	}
	target := p.pid
	if p.group {
		target = -p.pid
	}
	if err := syscall.Kill(target, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("child: signal %v to pid %d: %w", sig, p.pid, err)
	}
	return nil
}

// Stop asks the child to exit and waits for it: SIGCONT (a stopped child
// cannot act on sig), then sig (0: none, the caller has asked some other
// way, say by closing the child's stdin); after grace, Kill. It returns
// once the child is reaped: nil if it exited within grace, however it
// exited (see Wait), or had exited already; an error wrapping ErrKilled
// if it had to be killed; Kill's error if it could not be reaped.
func (p *Process) Stop(sig syscall.Signal, grace time.Duration) error {
	if sig != 0 {
		_ = p.Signal(syscall.SIGCONT)
		_ = p.Signal(sig)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	sent, err := p.kill()
	if err != nil || !sent {
		return err
	}
	asked := sig.String()
	if sig == 0 {
		asked = "the request to exit"
	}
	return fmt.Errorf("child: pid %d still running %v after %s: %w", p.pid, grace, asked, ErrKilled)
}

// Kill sends SIGKILL (if the child has not exited) and waits at most 10 s
// for the reap. It returns nil once the child is reaped.
func (p *Process) Kill() error {
	_, err := p.kill()
	return err
}

// kill is Kill; sent reports that SIGKILL was sent.
func (p *Process) kill() (sent bool, err error) {
	if err := p.Signal(syscall.SIGKILL); err == nil {
		sent = true
	} else if !errors.Is(err, ErrExited) {
		return false, err
	}
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-p.done:
		return sent, nil
	case <-t.C:
		return sent, fmt.Errorf("child: pid %d not reaped %v after SIGKILL", p.pid, killWait)
	}
}

// WaitTCP waits until addr accepts TCP connections. It fails with an
// error wrapping ErrExited if the child exits first, or ctx's error if ctx
// ends first.
func (p *Process) WaitTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("child: pid %d exited (%v) before listening on %s: %w", p.pid, exitText(p.waitErr), addr, ErrExited)
		case <-ctx.Done():
			return fmt.Errorf("child: pid %d not listening on %s: %w", p.pid, addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Output returns what this run of the child has written to Spec.Log so
// far, the header included.
func (p *Process) Output() ([]byte, error) {
	if p.log == "" {
		return nil, errors.New("child: no log file")
	}
	f, err := os.Open(p.log)
	if err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, p.logStart, 1<<40))
	if err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	return b, nil
}

// Tail returns the last lines (at most 8 KiB) of Output, or a note in
// parentheses saying why it cannot be read: for error messages.
func (p *Process) Tail(lines int) string {
	if p.log == "" {
		return "(no log file)"
	}
	const maxBytes = 8 << 10
	f, err := os.Open(p.log)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.log, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.log, err)
	}
	from := max(p.logStart, fi.Size()-maxBytes)
	b, err := io.ReadAll(io.NewSectionReader(f, from, fi.Size()-from))
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.log, err)
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

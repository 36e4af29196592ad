package torture

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// errProcExited: the process is not running.
var errProcExited = errors.New("torture: process not running")

// proc is one cluster process (a region server or a master), started
// again on the same arguments after a kill. Every run's output is appended
// to one log file. Signals go to its PID only while it has not been
// reaped, so they never reach a process that reused the PID. Its methods
// are safe for concurrent use.
type proc struct {
	name string
	argv []string // the whole command: wrap prefix, binary, arguments
	log  string   // its output, every run appended

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited bool          // the current run has exited (or none started)
	paused bool          // SIGSTOPped and not yet continued
	done   chan struct{} // closed when the current run is reaped
	runs   int
}

func newProc(name, log string, argv []string) *proc {
	return &proc{name: name, argv: argv, log: log, exited: true}
}

// start runs the process again (it must not be running).
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		return fmt.Errorf("torture: %s is already running", p.name)
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	defer f.Close()
	p.runs++
	fmt.Fprintf(f, "=== torture: run %d of %s at %s\n", p.runs, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	// Killed with the tool: no process outlives a crashed run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("torture: start %s: %w", p.name, err)
	}
	p.cmd, p.exited, p.paused, p.done = cmd, false, false, make(chan struct{})
	go p.reap(cmd, p.done)
	return nil
}

// reap waits for the run to exit; it marks it exited before reaping (the
// zombie holds the PID until then).
func (p *proc) reap(cmd *exec.Cmd, done chan struct{}) {
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	p.mu.Lock()
	if p.cmd == cmd {
		p.exited = true
	}
	p.mu.Unlock()
	_ = cmd.Wait()
	close(done)
}

// signal sends sig to the running process.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return fmt.Errorf("%w: %s", errProcExited, p.name)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL:
		p.paused = false
	}
	if err := syscall.Kill(p.cmd.Process.Pid, sig); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("torture: signal %v to %s (pid %d): %w", sig, p.name, p.cmd.Process.Pid, err)
	}
	return nil
}

// running reports whether a run is alive (paused counts).
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.exited
}

// isPaused reports whether the process is SIGSTOPped.
func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.exited && p.paused
}

// pid is the current run's PID, 0 if none.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return 0
	}
	return p.cmd.Process.Pid
}

// kill SIGKILLs the process and waits (at most 10 s) until it is reaped.
func (p *proc) kill() error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if err := p.signal(syscall.SIGKILL); err != nil {
		if errors.Is(err, errProcExited) {
			return nil
		}
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("torture: %s not reaped 10 s after SIGKILL", p.name)
	}
}

// stop ends the process gracefully (SIGCONT, SIGINT), SIGKILL after
// grace.
func (p *proc) stop(grace time.Duration) error {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	_ = p.signal(syscall.SIGCONT)
	if err := p.signal(syscall.SIGINT); err != nil {
		return nil // not running
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
		return p.kill()
	}
}

// waitListen waits (at most d) until addr accepts TCP connections, or the
// process exits.
func (p *proc) waitListen(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !p.running() {
			return fmt.Errorf("%w: %s exited before listening on %s (see %s)", errProcExited, p.name, addr, p.log)
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("torture: %s not listening on %s after %v (see %s)", p.name, addr, d, p.log)
}

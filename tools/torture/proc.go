package torture

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/internal/child"
)

// proc is one cluster process (a region server or a master), started
// again on the same arguments after a kill. Every run's output is appended
// to one log file. Signals go to its PID only while it has not been
// reaped (internal/child), so they never reach a process that reused the
// PID. Its methods are safe for concurrent use.
type proc struct {
	name string
	argv []string // the whole command: wrap prefix, binary, arguments
	log  string   // its output, every run appended

	mu     sync.Mutex
	cur    *child.Process // the current run; nil before the first
	paused bool           // SIGSTOPped and not yet continued
	runs   int
}

func newProc(name, log string, argv []string) *proc {
	return &proc{name: name, argv: argv, log: log}
}

// start runs the process again (it must not be running).
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && p.cur.Running() {
		return fmt.Errorf("torture: %s is already running", p.name)
	}
	// Its own process group, so a Ctrl-C reaches only the tool; killed
	// with the tool, so no process outlives a crashed run.
	c, err := child.Start(child.Spec{
		Argv: p.argv, Log: p.log, Group: true,
		Header: fmt.Sprintf("=== torture: run %d of %s at %s", p.runs+1, p.name, time.Now().Format(time.RFC3339Nano)),
	})
	if err != nil {
		return fmt.Errorf("torture: %s: %w", p.name, err)
	}
	p.runs++
	p.cur, p.paused = c, false
	return nil
}

// current is the current run, nil if none was started.
func (p *proc) current() *child.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

// signal sends sig to the running process; an error wrapping
// child.ErrExited if it is not running.
func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil {
		return fmt.Errorf("torture: %s never started: %w", p.name, child.ErrExited)
	}
	if err := p.cur.Signal(sig); err != nil {
		return fmt.Errorf("torture: %s: %w", p.name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT, syscall.SIGKILL:
		p.paused = false
	}
	return nil
}

// running reports whether a run is alive (paused counts).
func (p *proc) running() bool {
	c := p.current()
	return c != nil && c.Running()
}

// isPaused reports whether the process is SIGSTOPped.
func (p *proc) isPaused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur != nil && p.cur.Running() && p.paused
}

// kill SIGKILLs the process and waits (at most 10 s) until it is reaped.
func (p *proc) kill() error {
	c := p.current()
	if c == nil {
		return nil
	}
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	if err := c.Kill(); err != nil {
		return fmt.Errorf("torture: %s: %w", p.name, err)
	}
	return nil
}

// stop ends the process gracefully (SIGCONT, SIGINT), SIGKILL after
// grace.
func (p *proc) stop(grace time.Duration) error {
	c := p.current()
	if c == nil || !c.Running() {
		return nil
	}
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	if err := c.Stop(syscall.SIGINT, grace); err != nil && !errors.Is(err, child.ErrKilled) {
		return fmt.Errorf("torture: %s: %w", p.name, err)
	}
	return nil
}

// waitListen waits (at most d) until addr accepts TCP connections, or the
// process exits.
func (p *proc) waitListen(addr string, d time.Duration) error {
	c := p.current()
	if c == nil {
		return fmt.Errorf("torture: %s never started: %w", p.name, child.ErrExited)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := c.WaitTCP(ctx, addr); err != nil {
		return fmt.Errorf("torture: %s: %w (see %s)", p.name, err, p.log)
	}
	return nil
}

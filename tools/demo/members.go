package demo

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/internal/child"
)

// member is one child process of the local cluster (the master or a
// region server): the tebis binary in its own process group, its output
// in a log file.
type member struct {
	name    string
	proc    *child.Process
	logPath string
}

// startMember runs `binary args...` with stdout and stderr appended to
// logPath. The child gets its own process group, so a Ctrl-C on the
// terminal reaches only the demo, which then stops its members in order;
// and SIGKILL if the demo dies, so none outlives it.
func startMember(name, binary string, args []string, logPath string) (*member, error) {
	p, err := child.Start(child.Spec{
		Argv: append([]string{binary}, args...), Log: logPath, Group: true,
		Header: fmt.Sprintf("=== demo: %s %s", binary, strings.Join(args, " ")),
	})
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &member{name: name, proc: p, logPath: logPath}, nil
}

// pid is the member's process ID.
func (m *member) pid() int { return m.proc.PID() }

// done is closed once the member is reaped.
func (m *member) done() <-chan struct{} { return m.proc.Done() }

// exited reports whether the process has exited, and how.
func (m *member) exited() (bool, error) {
	select {
	case <-m.proc.Done():
		return true, m.proc.Wait()
	default:
		return false, nil
	}
}

// stop sends SIGINT and waits up to grace for the process to exit, then
// (or as soon as force closes) sends SIGKILL. It returns the exit error
// of a process that did not exit cleanly (nil for one that had exited
// already: the caller reports those). Only the member's own PID is
// signalled, never a process group or a name.
func (m *member) stop(grace time.Duration, force <-chan struct{}) error {
	if done, _ := m.exited(); done {
		return nil
	}
	_ = m.proc.Signal(syscall.SIGINT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-m.proc.Done():
		if err := m.proc.Wait(); err != nil && !diedOf(err, syscall.SIGINT) {
			return fmt.Errorf("%s (pid %d) exited with %v after SIGINT; see %s", m.name, m.pid(), err, m.logPath)
		}
		return nil
	case <-force:
		m.kill()
		return fmt.Errorf("%s (pid %d) killed", m.name, m.pid())
	case <-timer.C:
		m.kill()
		return fmt.Errorf("%s (pid %d) still running %v after SIGINT, killed; see %s", m.name, m.pid(), grace, m.logPath)
	}
}

// diedOf reports a process ended by sig (one stopped before it installed
// its handlers dies of SIGINT: a clean stop all the same).
func diedOf(err error, sig syscall.Signal) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// kill sends SIGKILL (if the process still runs) and waits for the reap.
func (m *member) kill() { _ = m.proc.Kill() }

// exitErr describes a member that exited while it should be running.
func (m *member) exitErr() error {
	return fmt.Errorf("%w: %s (pid %d) exited: %v; last lines of %s:\n%s", ErrMemberExited, m.name, m.pid(), m.proc.Wait(), m.logPath, m.proc.Tail(20))
}

// ErrMemberExited reports a cluster process that exited during start-up.
var ErrMemberExited = errors.New("demo: cluster process exited")

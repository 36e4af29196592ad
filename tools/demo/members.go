package demo

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// member is one child process of the local cluster (the master or a
// region server): the tebis binary in its own process group, its output
// in a log file.
type member struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed once the process is reaped
	err     error         // cmd.Wait's result, set before done closes
}

// startMember runs `binary args...` with stdout and stderr appended to
// logPath. The child gets its own process group, so a Ctrl-C on the
// terminal reaches only the demo, which then stops its members in order;
// and SIGKILL if the demo dies (Pdeathsig), so none outlives it.
func startMember(name, binary string, args []string, logPath string) (*member, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "=== demo: %s %s\n", binary, strings.Join(args, " "))
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	m := &member{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		m.err = cmd.Wait()
		close(m.done)
	}()
	return m, nil
}

// pid is the member's process ID.
func (m *member) pid() int { return m.cmd.Process.Pid }

// exited reports whether the process has exited, and how.
func (m *member) exited() (bool, error) {
	select {
	case <-m.done:
		return true, m.err
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
	_ = m.cmd.Process.Signal(syscall.SIGINT)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-m.done:
		if m.err != nil && !diedOf(m.err, syscall.SIGINT) {
			return fmt.Errorf("%s (pid %d) exited with %v after SIGINT; see %s", m.name, m.pid(), m.err, m.logPath)
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
func (m *member) kill() {
	if done, _ := m.exited(); !done {
		_ = m.cmd.Process.Kill() // os.Process: never a reused PID once reaped
	}
	<-m.done
}

// logTail returns the last lines of the member's log.
func logTail(path string, lines int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	const maxBytes = 8 << 10
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	from := max(0, fi.Size()-maxBytes)
	b, err := io.ReadAll(io.NewSectionReader(f, from, fi.Size()-from))
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

// exitErr describes a member that exited while it should be running.
func (m *member) exitErr() error {
	return fmt.Errorf("%w: %s (pid %d) exited: %v; last lines of %s:\n%s", ErrMemberExited, m.name, m.pid(), m.err, m.logPath, logTail(m.logPath, 20))
}

// ErrMemberExited reports a cluster process that exited during start-up.
var ErrMemberExited = errors.New("demo: cluster process exited")

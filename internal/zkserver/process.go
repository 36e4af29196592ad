package zkserver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// ErrExited reports that the server's JVM has exited (before it was ready,
// or before Pause or Resume).
var ErrExited = errors.New("zookeeper process has exited")

const (
	stopGrace = 5 * time.Second  // SIGTERM to SIGKILL
	killWait  = 10 * time.Second // SIGKILL to giving up on the reap
	logName   = "zk.log"
)

// Server is one running ZooKeeper JVM. Its methods are safe for
// concurrent use.
type Server struct {
	dir       string
	host      string
	port      int
	log       *zap.Logger
	cmd       *exec.Cmd
	logPath   string
	logOffset int64 // where this run's output starts in zk.log

	mu      sync.Mutex
	exited  bool          // the JVM has exited: signal its group no more
	done    chan struct{} // closed once the JVM is reaped
	waitErr error         // cmd.Wait's result, set before done closes
}

// spawn writes the configuration and starts the JVM (under l.wrap, if
// set); it does not wait for the server to be ready.
func spawn(l launch) (*Server, error) {
	java, classpath, err := command()
	if err != nil {
		return nil, err
	}
	if l.dir, err = filepath.Abs(l.dir); err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	cfgPath, err := writeConfig(l)
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(l.dir, logName)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	fi, err := logf.Stat()
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	addr := net.JoinHostPort(l.host, strconv.Itoa(l.port))
	under := ""
	if len(l.wrap) > 0 {
		under = fmt.Sprintf(" under %q", l.wrap)
	}
	fmt.Fprintf(logf, "=== zkserver: starting on %s%s at %s\n", addr, under, time.Now().Format(time.RFC3339Nano))

	argv := append(append([]string{}, l.wrap...), java)
	argv = append(append(argv, jvmFlags...), "-cp", classpath, mainClass, cfgPath)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = l.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so Stop and Kill reach everything it runs;
	// SIGKILL if this process dies, so no JVM outlives a crashed test.
	// A wrap that execs (ip netns exec) keeps both, and the PID.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("zkserver: start %s: %w", argv[0], err)
	}
	s := &Server{
		dir: l.dir, host: l.host, port: l.port, log: l.log, cmd: cmd,
		logPath: logPath, logOffset: fi.Size(),
		done: make(chan struct{}),
	}
	go s.reap()
	l.log.Debug("zookeeper started", zap.Int("pid", cmd.Process.Pid), zap.String("addr", s.Addr()), zap.String("dir", l.dir))
	return s, nil
}

// reap waits for the JVM to exit. It first waits without reaping
// (WNOWAIT), so the exited flag is set while the zombie still holds the
// PID: a group signal sent while the flag is clear can never reach a
// process that reused the PID.
func (s *Server) reap() {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, s.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	s.mu.Lock()
	s.exited = true
	s.mu.Unlock()
	s.waitErr = s.cmd.Wait()
	close(s.done)
}

// signal sends sig to the JVM's process group; false if it has exited.
func (s *Server) signal(sig syscall.Signal) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited {
		return false, nil
	}
	if err := syscall.Kill(-s.cmd.Process.Pid, sig); err != nil && err != syscall.ESRCH {
		return true, fmt.Errorf("zkserver: signal %v to pid %d: %w", sig, s.PID(), err)
	}
	return true, nil
}

// PID is the JVM's process ID (and process-group ID).
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Addr is the client address, "host:port": 127.0.0.1 for Start's
// servers, the member's Host for an ensemble's.
func (s *Server) Addr() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

// Port is the client port.
func (s *Server) Port() int { return s.port }

// Dir is the server's directory (zoo.cfg, data/, zk.log), absolute.
func (s *Server) Dir() string { return s.dir }

// LogPath is the file holding the JVM's stdout and stderr.
func (s *Server) LogPath() string { return s.logPath }

// Done is closed once the JVM has exited and been reaped, for whatever
// reason.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop shuts the server down: SIGTERM to its process group (and SIGCONT,
// in case it is paused), SIGKILL if it is still running after 5 s, and
// the JVM is always reaped. It returns nil once the JVM is gone, however
// it exited, and is idempotent.
func (s *Server) Stop() error {
	sent, err := s.signal(syscall.SIGTERM)
	if err != nil {
		return err
	}
	if sent {
		_, _ = s.signal(syscall.SIGCONT)
		select {
		case <-s.done:
			s.log.Debug("zookeeper stopped", zap.Int("pid", s.PID()), zap.String("addr", s.Addr()))
			return nil
		case <-time.After(stopGrace):
			s.log.Warn("zookeeper ignored SIGTERM, killing it", zap.Int("pid", s.PID()))
		}
	}
	return s.Kill()
}

// Kill crashes the server: SIGKILL to its process group, then reaps the
// JVM. It returns nil once the JVM is gone and is idempotent.
func (s *Server) Kill() error {
	if _, err := s.signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("zkserver: pid %d still running %v after SIGKILL", s.PID(), killWait)
	}
}

// logTail returns the last lines this run wrote to zk.log.
func (s *Server) logTail() string {
	const maxBytes, maxLines = 8 << 10, 40
	f, err := os.Open(s.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", s.logPath, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", s.logPath, err)
	}
	from := max(s.logOffset, fi.Size()-maxBytes)
	b, err := io.ReadAll(io.NewSectionReader(f, from, fi.Size()-from))
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", s.logPath, err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	return strings.Join(lines, "\n")
}

// bindFailed reports whether this run's log shows a port already in use
// (a free port picked, then taken by someone else before the JVM bound it).
func (s *Server) bindFailed() bool {
	f, err := os.Open(s.logPath)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, s.logOffset, 1<<30))
	return err == nil && strings.Contains(string(b), "Address already in use")
}

package zkserver

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/internal/child"
	"go.uber.org/zap"
)

// ErrExited reports that the server's JVM has exited (before it was ready,
// or before Pause or Resume).
var ErrExited = errors.New("zookeeper process has exited")

const (
	stopGrace = 5 * time.Second // SIGTERM to SIGKILL
	logName   = "zk.log"
)

// Server is one running ZooKeeper JVM. Its methods are safe for
// concurrent use.
type Server struct {
	dir     string
	host    string
	port    int
	log     *zap.Logger
	proc    *child.Process
	logPath string
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
	addr := net.JoinHostPort(l.host, strconv.Itoa(l.port))
	under := ""
	if len(l.wrap) > 0 {
		under = fmt.Sprintf(" under %q", l.wrap)
	}
	argv := append(append([]string{}, l.wrap...), java)
	argv = append(append(argv, jvmFlags...), "-cp", classpath, mainClass, cfgPath)
	// Its own process group, which Stop and Kill signal, so they reach
	// everything it runs. A wrap that execs (ip netns exec) keeps the
	// group, and the PID.
	p, err := child.Start(child.Spec{
		Argv: argv, Dir: l.dir, Log: logPath, SignalGroup: true,
		Header: fmt.Sprintf("=== zkserver: starting on %s%s at %s", addr, under, time.Now().Format(time.RFC3339Nano)),
	})
	if err != nil {
		return nil, fmt.Errorf("zkserver: %w", err)
	}
	s := &Server{dir: l.dir, host: l.host, port: l.port, log: l.log, proc: p, logPath: logPath}
	l.log.Debug("zookeeper started", zap.Int("pid", p.PID()), zap.String("addr", s.Addr()), zap.String("dir", l.dir))
	return s, nil
}

// PID is the JVM's process ID (and process-group ID).
func (s *Server) PID() int { return s.proc.PID() }

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
func (s *Server) Done() <-chan struct{} { return s.proc.Done() }

// Stop shuts the server down: SIGTERM to its process group (and SIGCONT,
// in case it is paused), SIGKILL if it is still running after 5 s, and
// the JVM is always reaped. It returns nil once the JVM is gone, however
// it exited, and is idempotent.
func (s *Server) Stop() error {
	err := s.proc.Stop(syscall.SIGTERM, stopGrace)
	switch {
	case errors.Is(err, child.ErrKilled):
		s.log.Warn("zookeeper ignored SIGTERM, killed it", zap.Int("pid", s.PID()))
		return nil
	case err != nil:
		return fmt.Errorf("zkserver: %w", err)
	}
	s.log.Debug("zookeeper stopped", zap.Int("pid", s.PID()), zap.String("addr", s.Addr()))
	return nil
}

// Kill crashes the server: SIGKILL to its process group, then reaps the
// JVM. It returns nil once the JVM is gone and is idempotent.
func (s *Server) Kill() error {
	if err := s.proc.Kill(); err != nil {
		return fmt.Errorf("zkserver: %w", err)
	}
	return nil
}

// signal sends sig to the JVM's process group; false if it has exited.
func (s *Server) signal(sig syscall.Signal) (bool, error) {
	err := s.proc.Signal(sig)
	if errors.Is(err, child.ErrExited) {
		return false, nil
	}
	if err != nil {
		return true, fmt.Errorf("zkserver: %w", err)
	}
	return true, nil
}

// logTail returns the last lines this run wrote to zk.log.
func (s *Server) logTail() string { return s.proc.Tail(40) }

// bindFailed reports whether this run's log shows a port already in use
// (a free port picked, then taken by someone else before the JVM bound it).
func (s *Server) bindFailed() bool {
	b, err := s.proc.Output()
	return err == nil && strings.Contains(string(b), "Address already in use")
}

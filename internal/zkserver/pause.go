package zkserver

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

const pauseWait = 5 * time.Second

// Pause freezes the server (SIGSTOP) and returns once every JVM thread
// has stopped: its sessions time out and, in an ensemble, its peers see
// it fail, while its sockets stay open (connections still complete in
// the kernel, but nothing answers).
func (s *Server) Pause() error {
	if err := s.mustSignal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(pauseWait)
	for !s.allStopped() {
		select {
		case <-s.Done():
			return fmt.Errorf("zkserver: pause pid %d: %w", s.PID(), ErrExited)
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("zkserver: pid %d not stopped %v after SIGSTOP", s.PID(), pauseWait)
		}
	}
	return nil
}

// Resume continues a paused server (SIGCONT).
func (s *Server) Resume() error { return s.mustSignal(syscall.SIGCONT) }

func (s *Server) mustSignal(sig syscall.Signal) error {
	sent, err := s.signal(sig)
	if err == nil && !sent {
		err = fmt.Errorf("zkserver: signal %v to pid %d: %w", sig, s.PID(), ErrExited)
	}
	return err
}

// allStopped reports whether every thread of the JVM is in state T
// (stopped), per /proc/PID/task/*/stat. SIGSTOP is delivered
// asynchronously: a thread may run on briefly after kill returns.
func (s *Server) allStopped() bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", s.PID()))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread has just exited
		}
		// "tid (comm) S ...": comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

package zkserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

const (
	defaultStartTimeout = 30 * time.Second
	maxStartAttempts    = 3 // when a picked port is taken before the JVM binds it
	pollInterval        = 50 * time.Millisecond
	probeTimeout        = time.Second
)

// errBindFailed marks a start that failed because a port was in use.
var errBindFailed = errors.New("port already in use")

// Start runs a standalone server and waits until it serves (srvr reports
// Mode: standalone). Without a deadline on ctx it waits at most 30 s. If
// the JVM exits or the wait ends first, the JVM is killed and the error
// (wrapping ErrExited or ctx's error) quotes the last lines of zk.log. The
// caller must Stop (or Kill) the returned server.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := withDefaultTimeout(ctx)
	defer cancel()
	for attempt := 1; ; attempt++ {
		port := cfg.Port
		if port == 0 {
			ports, err := freePorts(1)
			if err != nil {
				return nil, err
			}
			port = ports[0]
		}
		s, err := spawn(launch{dir: cfg.Dir, host: loopback, port: port, maxSession: cfg.maxSession(), log: cfg.logger()})
		if err != nil {
			return nil, err
		}
		err = s.waitReady(ctx, func(mode string) bool { return mode == "standalone" })
		if err == nil {
			cfg.logger().Info("zookeeper ready", zap.String("addr", s.Addr()), zap.Int("pid", s.PID()), zap.String("dir", s.dir))
			return s, nil
		}
		_ = s.Kill()
		if cfg.Port == 0 && attempt < maxStartAttempts && errors.Is(err, errBindFailed) {
			cfg.logger().Info("zookeeper port taken, retrying", zap.Int("port", port))
			continue
		}
		return nil, err
	}
}

// withDefaultTimeout bounds ctx by defaultStartTimeout unless it already
// has a deadline.
func withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, defaultStartTimeout)
}

// waitReady polls srvr until ready(mode), the JVM exits, a port turns out
// to be taken, or ctx ends. Errors quote the end of this run's log.
func (s *Server) waitReady(ctx context.Context, ready func(mode string) bool) error {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	var last error
	for i := 0; ; i++ {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		mode, err := s.Mode(pctx)
		cancel()
		if err == nil && ready(mode) {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("mode %s", mode)
		}
		// The JVM survives a taken quorum port (it retries forever), so
		// look for one now and then rather than waiting for the deadline.
		if i%10 == 9 && s.bindFailed() {
			return s.startErr(fmt.Errorf("%w: %v", errBindFailed, last))
		}
		select {
		case <-s.Done():
			err := fmt.Errorf("%w before it was ready (%v)", ErrExited, s.proc.Wait())
			if s.bindFailed() {
				err = fmt.Errorf("%w: %w", errBindFailed, err)
			}
			return s.startErr(err)
		case <-ctx.Done():
			return s.startErr(fmt.Errorf("not ready: %w (last probe: %v)", ctx.Err(), last))
		case <-tick.C:
		}
	}
}

func (s *Server) startErr(err error) error {
	return fmt.Errorf("zkserver: start %s (pid %d): %w; last lines of %s:\n%s", s.Addr(), s.PID(), err, s.logPath, s.logTail())
}

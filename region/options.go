package region

import (
	"context"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jonboulle/clockwork"

	"github.com/tebis-go/tebis/rdma"
)

// Option gives Start what a server reaches outside its configuration in
// place of the real thing: its coordinator, its file system, its
// transports, its clock. Without options a server uses ZooKeeper
// (Config.Zookeeper), the operating system's file system, the shm and tcp
// transports and the system clock.
type Option func(*deps)

// deps are the options given to Start; nil fields: the real thing.
type deps struct {
	coord  Coordinator
	fs     vfs.FS
	listen rdma.Transport
	dial   rdma.Transport
	clock  clockwork.Clock
}

// WithCoordinator makes c the managed server's session in place of one
// dialed to the ensemble Config.Zookeeper names (which must still be set:
// it marks the server managed, and is only logged). The server owns c from
// Start on: it closes c when it closes, or when Start fails.
func WithCoordinator(c Coordinator) Option { return func(d *deps) { d.coord = c } }

// WithFS makes fs the volume's file system (Config.DataDir is a path in
// it; Config.FaultFS wraps it). The caller keeps fs; the server closes the
// files it opened in it when it closes.
func WithFS(fs vfs.FS) Option { return func(d *deps) { d.fs = fs } }

// WithListenTransport makes the server listen on tr, at Config.Shm and at
// Config.TCP (each if set), in place of the shm and tcp transports.
func WithListenTransport(tr rdma.Transport) Option { return func(d *deps) { d.listen = tr } }

// WithDialTransport makes the server reach its backups on tr, at the
// address Config.ReplicationTransport picks from the map (shm or tcp), in
// place of the shm and tcp transports.
func WithDialTransport(tr rdma.Transport) Option { return func(d *deps) { d.dial = tr } }

// WithClock makes c the server's clock (default clockwork.NewRealClock()):
// its timing decisions wait and measure on it: the re-attach tick, the
// health monitor's poll and space probes, a step-down's registration
// deadline and retries, the log position reports' retry, a joining
// backup's pre-seed deadline and retries, the pause between dials of a
// backup, the session expiry check, and the read lease of the ZooKeeper
// session it dials (a coordinator given by WithCoordinator brings its own
// lease, on its own clock). Timeouts that bound one call (a dial attempt,
// a ZooKeeper request, ReplicationConnect's bound on an attach's dials)
// stay on the system clock, as do the run identities it registers
// (ServerInfo.Started).
func WithClock(c clockwork.Clock) Option { return func(d *deps) { d.clock = c } }

// realClock is the clock of a server given none.
var realClock = clockwork.NewRealClock()

// clock is the server's clock (WithClock).
func (s *Server) clock() clockwork.Clock {
	if c := s.deps.clock; c != nil {
		return c
	}
	return realClock
}

// pause waits d on the server's clock, or until ctx ends (false). Its
// timer is stopped either way: a fake clock keeps no waiter of a pause
// that is over.
func (s *Server) pause(ctx context.Context, d time.Duration) bool {
	t := s.clock().NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

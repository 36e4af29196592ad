package coord

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A read lease derived from the ZooKeeper session. ZooKeeper expires a
// session only after hearing nothing from its client for the session
// timeout; a request the server answered, sent at time S, was received
// after S, so the session cannot expire before S + timeout. Whoever acts
// on the session's expiry (the master promoting a new primary of the
// server's regions once its ephemeral registration is gone) therefore
// acts after S + timeout. A renewal request sent at S that proves the
// session alive (its answer shows the server's registration still owned
// by the session) grants the lease until S + LeaseFraction x timeout, on
// the local monotonic clock. While the lease holds, no other server has
// taken over this server's regions: a primary may answer reads and accept
// writes.
//
// The lease runs from the send, not from the answer: an answer that was
// buffered while the process was paused must not extend it. It ends early
// at an expiry (Revoke). The fraction leaves a margin for clock rates
// (the lease is measured on this host, the expiry on the ZooKeeper
// server's: with 0.5, this clock may run up to twice as slow) and for
// ZooKeeper's own granularity (sessions expire on tick boundaries;
// followers forward session touches to the leader every half tick).

// LeaseFraction is the part of the session timeout a renewal's lease
// lasts, counted from the moment its request was sent.
const LeaseFraction = 0.5

// leaseRenewals is how many renewals are sent per session timeout: at
// 1/8, a lease of 1/2 timeout survives a renewal answered up to 3/8
// timeout late.
const leaseRenewals = 8

// Clock reads the time. Readings must carry Go's monotonic component
// (time.Now's do): the lease compares durations between them only.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Lease is a session's read lease. It is safe for concurrent use; Holds
// is lock-free (one clock reading and an atomic load).
type Lease struct {
	clock Clock
	base  time.Time    // clock reading at creation: ends are kept as offsets from it
	end   atomic.Int64 // offset (ns) from base at which the lease ends; 0: none

	mu      sync.Mutex
	gen     uint64        // +1 at every Revoke: renewals begun before do not count
	timeout time.Duration // the session timeout in force (0: unknown, no lease)
}

// NewLease returns a lease that does not hold, read on clock (nil: the
// system clock).
func NewLease(clock Clock) *Lease {
	if clock == nil {
		clock = systemClock{}
	}
	return &Lease{clock: clock, base: clock.Now()}
}

// Renewal is one renewal in progress: Begin it right before its request
// is sent, Confirm it once the answer proved the session alive.
type Renewal struct {
	sent time.Time
	gen  uint64
}

// Begin starts a renewal: its lease will run from now.
func (l *Lease) Begin() Renewal {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Renewal{sent: l.clock.Now(), gen: l.gen}
}

// Confirm extends the lease to r's send time + LeaseFraction x the
// session timeout, unless the session expired since r began or the
// session timeout is unknown. It reports whether the lease now holds.
func (l *Lease) Confirm(r Renewal) bool {
	l.mu.Lock()
	if r.gen == l.gen && l.timeout > 0 {
		end := int64(r.sent.Sub(l.base) + l.duration())
		if end > l.end.Load() {
			l.end.Store(end)
		}
	}
	l.mu.Unlock()
	return l.Holds()
}

// duration is how long a renewal's lease lasts. Called with mu held.
func (l *Lease) duration() time.Duration {
	return time.Duration(float64(l.timeout) * LeaseFraction)
}

// Revoke ends the lease at once (the session expired); renewals begun
// before do not count.
func (l *Lease) Revoke() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	l.end.Store(0)
}

// SetSessionTimeout sets the session timeout leases are derived from:
// the one ZooKeeper granted, or the one asked for if smaller. Until it is
// set, no renewal grants a lease.
func (l *Lease) SetSessionTimeout(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timeout = d
}

// SessionTimeout is the session timeout leases are derived from (0:
// unknown yet).
func (l *Lease) SessionTimeout() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.timeout
}

// Holds reports whether the lease holds now.
func (l *Lease) Holds() bool {
	end := l.end.Load()
	return end != 0 && int64(l.clock.Now().Sub(l.base)) < end
}

// Remaining is how long the lease still holds (0 if it does not).
func (l *Lease) Remaining() time.Duration {
	end := l.end.Load()
	if end == 0 {
		return 0
	}
	return max(0, time.Duration(end)-l.clock.Now().Sub(l.base))
}

// Lease is the session's read lease; it holds only while KeepLease runs.
func (s *Session) Lease() *Lease { return s.lease }

// KeepLease renews the session's lease until ctx ends or the session
// closes: leaseRenewals times per session timeout it asks ZooKeeper for
// the registration of server name (Register) and confirms the renewal if
// the znode is owned by the session the request was sent in. A renewal
// that fails (no connection, no registration, another session's) just
// does not extend the lease. Run it on its own goroutine.
func (s *Session) KeepLease(ctx context.Context, name string) {
	p := s.path("servers", name)
	for ctx.Err() == nil && !s.closed() {
		r := s.lease.Begin()
		sid := s.conn.SessionID()
		ok, st, err := s.conn.Exists(p)
		if err == nil && ok && sid != 0 && st.EphemeralOwner == sid && s.conn.SessionID() == sid {
			s.lease.Confirm(r)
		}
		timeout := s.lease.SessionTimeout()
		if timeout == 0 {
			timeout = s.timeout
		}
		select {
		case <-ctx.Done():
		case <-s.done:
		case <-s.after(timeout / leaseRenewals):
		}
	}
}

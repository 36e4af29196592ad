package coordtest

import (
	"context"
	"fmt"
	"sync"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// Session is one region server's session with a Coordinator: what the
// server uses of a coord.Session (region.Coordinator). Its registrations
// and health reports are ephemeral: Close and Expire delete them. Its
// watches deliver asynchronously and end with their ctx or at Close.
type Session struct {
	c     *Coordinator
	lease *coord.Lease
	done  chan struct{} // closed by Close

	mu      sync.Mutex
	expired chan struct{} // closed at the next Expire, then replaced
	gen     uint64        // Expire calls so far
	closed  bool
}

// NewSession opens a session.
func (c *Coordinator) NewSession() *Session {
	s := &Session{c: c, lease: coord.NewLease(c.clock), done: make(chan struct{}), expired: make(chan struct{})}
	s.lease.SetSessionTimeout(c.timeout)
	return s
}

// alive reports coord.ErrNoSession once the session is closed.
func (s *Session) alive() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: the session is closed", coord.ErrNoSession)
	}
	return nil
}

// Close ends the session: its ephemeral entries go at once, its lease is
// revoked, its watches end and later calls fail with coord.ErrNoSession.
// Idempotent.
func (s *Session) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.lease.Revoke()
	s.c.dropEphemerals(s)
}

// Expire expires the session as ZooKeeper would: its ephemeral entries
// go, its lease is revoked, Expired's channel closes and Generation
// grows; the session then goes on as the next one (it may register
// again). No-op on a closed session.
func (s *Session) Expire() {
	if s.alive() != nil {
		return
	}
	s.c.dropEphemerals(s)
	s.lease.Revoke()
	s.mu.Lock()
	close(s.expired)
	s.expired = make(chan struct{})
	s.gen++
	s.mu.Unlock()
}

// Expired returns a channel closed at the next Expire.
func (s *Session) Expired() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expired
}

// Generation counts the session's expiries so far.
func (s *Session) Generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// Root is the Coordinator's root (WithRoot).
func (s *Session) Root() string { return s.c.root }

// Register publishes srv as live, owned by this session. A registration
// of the name owned by another session (or the test) is waited out,
// bounded by ctx; this session's own is replaced.
func (s *Session) Register(ctx context.Context, srv coord.ServerInfo) error {
	c := s.c
	for {
		if err := s.alive(); err != nil {
			return err
		}
		c.dmu.Lock()
		c.mu.Lock()
		cur, held := c.servers[srv.Name]
		wait := c.changed
		if !held || cur.owner == s {
			c.servers[srv.Name] = registration{info: srv, owner: s}
			c.signal()
		}
		c.mu.Unlock()
		if !held || cur.owner == s {
			notify(c, &c.serverW, c.serversSnap)
			c.dmu.Unlock()
			return nil
		}
		c.dmu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("coordtest: server %s is still registered by another session: %w", srv.Name, ctx.Err())
		case <-s.done:
		case <-wait:
		}
	}
}

// Deregister deletes server name's registration if this session owns it.
func (s *Session) Deregister(ctx context.Context, name string) error {
	if err := s.alive(); err != nil {
		return err
	}
	s.c.changeServers(func() {
		if r, ok := s.c.servers[name]; ok && r.owner == s {
			delete(s.c.servers, name)
		}
	})
	return nil
}

// SetHealth publishes h as server name's health report, owned by this
// session; nil deletes the report, whoever owns it.
func (s *Session) SetHealth(ctx context.Context, name string, h *coord.Health) error {
	if err := s.alive(); err != nil {
		return err
	}
	s.c.changeHealth(func() {
		if h == nil {
			delete(s.c.health, name)
		} else {
			s.c.health[name] = healthReport{h: *h, owner: s}
		}
	})
	return nil
}

// Report records r (idempotent).
func (s *Session) Report(ctx context.Context, r coord.Report) error {
	if err := s.alive(); err != nil {
		return err
	}
	s.c.AddReport(r)
	return nil
}

// ReadMap returns the map and its znode version; coord.ErrNoMap if there
// is none. It is not counted in Counters.
func (s *Session) ReadMap(ctx context.Context) (*regionmap.Map, int32, error) {
	if err := s.alive(); err != nil {
		return nil, 0, err
	}
	m, ver := s.c.Map()
	if m == nil {
		return nil, 0, coord.ErrNoMap
	}
	return m, ver, nil
}

// WatchMap calls fn with the map now (if there is one) and after every
// change, on the caller's goroutine, until ctx ends or the session
// closes; bad is never called.
func (s *Session) WatchMap(ctx context.Context, fn func(*regionmap.Map), bad func(error)) {
	if s.alive() != nil {
		return
	}
	watch(ctx, s.c, &s.c.mapW, skipNil(fn), true, s.done, s.c.mapSnap)
}

// WatchServers calls fn with the live servers now and after every change,
// on the caller's goroutine, until ctx ends or the session closes.
func (s *Session) WatchServers(ctx context.Context, fn func(map[string]coord.ServerInfo)) {
	if s.alive() != nil {
		return
	}
	watch(ctx, s.c, &s.c.serverW, fn, true, s.done, s.c.serversSnap)
}

// Lease is the session's read lease; it holds only while KeepLease runs.
func (s *Session) Lease() *coord.Lease { return s.lease }

// KeepLease renews the lease, as coord.Session.KeepLease does, until ctx
// ends or the session closes: every eighth of the session timeout, a
// renewal is confirmed if server name's registration is this session's
// and the session did not expire meanwhile.
func (s *Session) KeepLease(ctx context.Context, name string) {
	every := s.c.timeout / 8
	for {
		r := s.lease.Begin()
		gen := s.Generation()
		s.c.mu.Lock()
		mine := s.c.servers[name].owner == s
		s.c.mu.Unlock()
		if mine && s.alive() == nil && s.Generation() == gen {
			s.lease.Confirm(r)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.done:
			return
		case <-s.c.clock.After(every):
		}
	}
}

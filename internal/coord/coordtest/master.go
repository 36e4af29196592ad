package coordtest

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// The master's side (master.Coordinator). Its watches are synchronous and
// end with their ctx.

// Campaign waits until no other candidate leads (Depose, Yield) and ctx
// has not ended, then leads as name.
func (c *Coordinator) Campaign(ctx context.Context, name string) (coord.Term, error) {
	c.mu.Lock()
	c.counters.Campaigns++
	c.counters.Waiting++
	for c.leader != nil || c.other {
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			c.mu.Lock()
			c.counters.Waiting--
			c.mu.Unlock()
			return nil, ctx.Err()
		case <-ch:
		}
		c.mu.Lock()
	}
	c.counters.Waiting--
	c.counters.Terms++
	l := &term{c: c, name: name, lost: make(chan struct{})}
	c.leader = l
	c.mu.Unlock()
	return l, nil
}

// WatchServers calls fn with the live servers now and after every change.
func (c *Coordinator) WatchServers(ctx context.Context, fn func(map[string]coord.ServerInfo)) {
	watch(ctx, c, &c.serverW, fn, false, nil, c.serversSnap)
}

// WatchHealth calls fn with the health reports now and after every change.
func (c *Coordinator) WatchHealth(ctx context.Context, fn func(map[string]coord.Health)) {
	watch(ctx, c, &c.healthW, fn, false, nil, c.healthSnap)
}

// WatchReports calls fn with the reports (coord.SortReports order) now
// and after every change.
func (c *Coordinator) WatchReports(ctx context.Context, fn func([]coord.Report)) {
	watch(ctx, c, &c.reportW, fn, false, nil, c.reportsSnap)
}

// WatchRequests calls fn with the operators' requests now and after
// every change.
func (c *Coordinator) WatchRequests(ctx context.Context, fn func(coord.Requests)) {
	watch(ctx, c, &c.reqW, fn, false, nil, c.requestsSnap)
}

// FinishMove deletes the request to move region to server, if it is the
// one kept.
func (c *Coordinator) FinishMove(ctx context.Context, region uint64, server string) error {
	c.changeRequests(func() {
		if c.reqs.Moves[region] == server {
			delete(c.reqs.Moves, region)
		}
	})
	return nil
}

// FinishRebalance deletes the rebalance request.
func (c *Coordinator) FinishRebalance(ctx context.Context) error {
	c.changeRequests(func() { c.reqs.Rebalance = false })
	return nil
}

// WatchMap calls fn with the map now (if there is one) and after every
// change; bad is never called (maps are validated when written).
func (c *Coordinator) WatchMap(ctx context.Context, fn func(*regionmap.Map), bad func(error)) {
	watch(ctx, c, &c.mapW, skipNil(fn), false, nil, c.mapSnap)
}

func skipNil(fn func(*regionmap.Map)) func(*regionmap.Map) {
	return func(m *regionmap.Map) {
		if m != nil {
			fn(m)
		}
	}
}

// ReadMap returns the map and its znode version; coord.ErrNoMap if there
// is none.
func (c *Coordinator) ReadMap(ctx context.Context) (*regionmap.Map, int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counters.Reads++
	if c.m == nil {
		return nil, 0, coord.ErrNoMap
	}
	return c.m.Clone(), c.ver, nil
}

// ForgetReports deletes the reports coord.Stale says ForgetReports(keep)
// deletes.
func (c *Coordinator) ForgetReports(ctx context.Context, keep map[uint64]uint64) error {
	c.changeReports(func() {
		c.counters.Forgets++
		maps.DeleteFunc(c.reports, func(r coord.Report, _ bool) bool { return coord.Stale(r, keep) })
	})
	return nil
}

// term is a won election.
type term struct {
	c    *Coordinator
	name string
	lost chan struct{}
	once sync.Once
}

func (l *term) end() { l.once.Do(func() { close(l.lost) }) }

// Lost implements coord.Term.
func (l *term) Lost() <-chan struct{} { return l.lost }

// Resign implements coord.Term.
func (l *term) Resign() {
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counters.Resigns++
	if c.leader == l {
		c.leader = nil
		l.end()
		c.signal()
	}
}

// WriteMap implements coord.Term: a compare-and-set of the map fenced by
// the leadership.
func (l *term) WriteMap(ctx context.Context, m *regionmap.Map, version int32) error {
	c := l.c
	c.mu.Lock()
	hook := c.beforeWrite
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err := m.Validate(); err != nil {
		return err
	}
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.mu.Lock()
	c.counters.Writes++
	switch {
	case c.leader != l:
		c.counters.Rejected++
		c.mu.Unlock()
		return coord.ErrNotLeader
	case c.m == nil:
		c.mu.Unlock()
		return coord.ErrNoMap
	case version != c.ver:
		c.counters.Conflicts++
		c.mu.Unlock()
		return fmt.Errorf("%w (expected znode version %d)", coord.ErrConflict, version)
	}
	c.publish(m)
	c.mu.Unlock()
	notify(c, &c.mapW, c.mapSnap)
	return nil
}

// Announce publishes info until ctx ends, as coord.Session.Announce does.
func (c *Coordinator) Announce(ctx context.Context, info coord.MasterInfo) {
	c.mu.Lock()
	c.masters[info.Name] = info
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	delete(c.masters, info.Name)
	c.mu.Unlock()
}

// Masters returns the announced masters by name.
func (c *Coordinator) Masters(context.Context) (map[string]coord.MasterInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.masters), nil
}

// Connected reports true: the in-memory coordinator never disconnects.
func (c *Coordinator) Connected() bool { return true }

// Leader returns the leading candidate's name ("" if none, or another
// candidate the test set leads).
func (c *Coordinator) Leader(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == nil {
		return "", nil
	}
	return c.leader.name, nil
}

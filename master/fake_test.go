package master

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// fakeZK is an in-memory, deterministic Coordinator: live servers, the
// map with a version and compare-and-set, join reports, and one election
// the test controls. Watches deliver synchronously: when a mutating call
// returns, every watcher has been called with the new state. Deliveries
// are serialized (dmu) and a watcher registered by a Watch call gets the
// state then and every later change, exactly until its ctx ends.
type fakeZK struct {
	dmu sync.Mutex // held while delivering to watchers; taken before mu
	mu  sync.Mutex

	servers map[string]coord.ServerInfo
	health  map[string]coord.Health
	joins   map[coord.Joined]bool
	m       *regionmap.Map
	ver     int32 // the map's znode version

	leader  *fakeLead     // the leadership held, if any
	other   bool          // another candidate leads: Campaign waits
	changed chan struct{} // closed and replaced when the election changes

	nextID   int
	serverW  map[int]func(map[string]coord.ServerInfo)
	joinW    map[int]func(map[coord.Joined]bool)
	healthW  map[int]func(map[string]coord.Health)
	mapW     map[int]func(*regionmap.Map)
	history  []*regionmap.Map // every map published, the first included
	counters counters
	// beforeWrite, if set, runs (without locks) at the start of every
	// WriteMap: a test's hook to change the world under the writer.
	beforeWrite func()
}

func newFake(m *regionmap.Map, live ...string) *fakeZK {
	f := &fakeZK{
		servers: map[string]coord.ServerInfo{}, joins: map[coord.Joined]bool{},
		changed: make(chan struct{}),
		serverW: map[int]func(map[string]coord.ServerInfo){}, joinW: map[int]func(map[coord.Joined]bool){},
		mapW: map[int]func(*regionmap.Map){}, health: map[string]coord.Health{}, healthW: map[int]func(map[string]coord.Health){},
	}
	if m != nil {
		f.m = m.Clone()
		f.history = append(f.history, m.Clone())
	}
	for _, n := range live {
		f.servers[n] = coord.ServerInfo{Server: srv(n), Started: 1}
	}
	return f
}

// --- the test's side ---

// AddServer registers a server; RemoveServer unregisters it.
func (f *fakeZK) AddServer(name string) {
	f.setServers(func(s map[string]coord.ServerInfo) { s[name] = coord.ServerInfo{Server: srv(name), Started: 1} })
}

func (f *fakeZK) RemoveServer(name string) {
	f.setServers(func(s map[string]coord.ServerInfo) { delete(s, name) })
}

func (f *fakeZK) setServers(change func(map[string]coord.ServerInfo)) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	change(f.servers)
	snap, ws := maps.Clone(f.servers), valuesOf(f.serverW)
	f.mu.Unlock()
	for _, fn := range ws {
		fn(maps.Clone(snap))
	}
}

// SetServer registers (or replaces) a server as run started.
func (f *fakeZK) SetServer(name string, started int64) {
	f.setServers(func(s map[string]coord.ServerInfo) {
		s[name] = coord.ServerInfo{Server: srv(name), Started: started}
	})
}

// SetHealth publishes (nil: deletes) a server's health report.
func (f *fakeZK) SetHealth(name string, h *coord.Health) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	if h == nil {
		delete(f.health, name)
	} else {
		f.health[name] = *h
	}
	snap, ws := maps.Clone(f.health), valuesOf(f.healthW)
	f.mu.Unlock()
	for _, fn := range ws {
		fn(maps.Clone(snap))
	}
}

// ReportJoined records a join report, as a region server does.
func (f *fakeZK) ReportJoined(j coord.Joined) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	f.joins[j] = true
	snap, ws := maps.Clone(f.joins), valuesOf(f.joinW)
	f.mu.Unlock()
	for _, fn := range ws {
		fn(maps.Clone(snap))
	}
}

// Joins returns the join reports kept.
func (f *fakeZK) Joins() map[coord.Joined]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.joins)
}

// PutMap replaces the map unconditionally (another writer).
func (f *fakeZK) PutMap(m *regionmap.Map) {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	f.publish(m)
	snap, ws := m.Clone(), valuesOf(f.mapW)
	f.mu.Unlock()
	for _, fn := range ws {
		fn(snap.Clone())
	}
}

// publish stores m; mu held.
func (f *fakeZK) publish(m *regionmap.Map) {
	f.m = m.Clone()
	f.ver++
	f.history = append(f.history, m.Clone())
}

// Map returns the current map and its version.
func (f *fakeZK) Map() (*regionmap.Map, int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m.Clone(), f.ver
}

// Depose ends the current leadership (its Lost closes, its writes are
// refused) and lets another candidate lead until Yield.
func (f *fakeZK) Depose() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.leader; l != nil {
		f.leader = nil
		l.once.Do(func() { close(l.lost) })
	}
	f.other = true
	f.signal()
}

// Yield ends the other candidate's leadership: a waiting Campaign wins.
func (f *fakeZK) Yield() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.other = false
	f.signal()
}

func (f *fakeZK) signal() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// counters count the fake's calls: map reads, writes (refused as not
// leader, or as conflicts), Campaign calls (waiting now, won), Resign and
// ForgetJoined calls.
type counters struct {
	reads, writes, rejected, conflicts int
	campaigns, waiting, terms, resigns int
	forgets                            int
}

// Counters returns a snapshot of the call counters.
func (f *fakeZK) Counters() counters {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counters
}

func (f *fakeZK) SetBeforeWrite(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beforeWrite = fn
}

// --- the Coordinator ---

func (f *fakeZK) Campaign(ctx context.Context, name string) (Leadership, error) {
	f.mu.Lock()
	f.counters.campaigns++
	f.counters.waiting++
	for f.leader != nil || f.other {
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			f.mu.Lock()
			f.counters.waiting--
			f.mu.Unlock()
			return nil, ctx.Err()
		case <-ch:
		}
		f.mu.Lock()
	}
	f.counters.waiting--
	f.counters.terms++
	l := &fakeLead{f: f, name: name, lost: make(chan struct{})}
	f.leader = l
	f.mu.Unlock()
	return l, nil
}

// watch registers fn in ws and runs first (which gives fn the current
// state) under dmu, then unregisters fn once ctx ends and no delivery to
// it is under way: fn is never called after the Watch call returns.
func watch[F any](ctx context.Context, f *fakeZK, ws map[int]F, fn F, first func()) {
	f.dmu.Lock()
	f.mu.Lock()
	id := f.nextID
	f.nextID++
	ws[id] = fn
	f.mu.Unlock()
	first()
	f.dmu.Unlock()
	<-ctx.Done()
	f.dmu.Lock()
	f.mu.Lock()
	delete(ws, id)
	f.mu.Unlock()
	f.dmu.Unlock()
}

func (f *fakeZK) WatchServers(ctx context.Context, fn func(map[string]coord.ServerInfo)) {
	watch(ctx, f, f.serverW, fn, func() {
		f.mu.Lock()
		snap := maps.Clone(f.servers)
		f.mu.Unlock()
		fn(snap)
	})
}

func (f *fakeZK) WatchHealth(ctx context.Context, fn func(map[string]coord.Health)) {
	watch(ctx, f, f.healthW, fn, func() {
		f.mu.Lock()
		snap := maps.Clone(f.health)
		f.mu.Unlock()
		fn(snap)
	})
}

func (f *fakeZK) WatchJoined(ctx context.Context, fn func(map[coord.Joined]bool)) {
	watch(ctx, f, f.joinW, fn, func() {
		f.mu.Lock()
		snap := maps.Clone(f.joins)
		f.mu.Unlock()
		fn(snap)
	})
}

func (f *fakeZK) WatchMap(ctx context.Context, fn func(*regionmap.Map), bad func(error)) {
	watch(ctx, f, f.mapW, fn, func() {
		f.mu.Lock()
		var snap *regionmap.Map
		if f.m != nil {
			snap = f.m.Clone()
		}
		f.mu.Unlock()
		if snap != nil {
			fn(snap)
		}
	})
}

func (f *fakeZK) ReadMap(ctx context.Context) (*regionmap.Map, int32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counters.reads++
	if f.m == nil {
		return nil, 0, coord.ErrNoMap
	}
	return f.m.Clone(), f.ver, nil
}

func (f *fakeZK) ForgetJoined(ctx context.Context, keep map[uint64]uint64) error {
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	f.counters.forgets++
	for j := range f.joins {
		if j.Epoch < keep[j.Region] {
			delete(f.joins, j)
		}
	}
	snap, ws := maps.Clone(f.joins), valuesOf(f.joinW)
	f.mu.Unlock()
	for _, fn := range ws {
		fn(maps.Clone(snap))
	}
	return nil
}

type fakeLead struct {
	f    *fakeZK
	name string
	lost chan struct{}
	once sync.Once
}

func (l *fakeLead) Lost() <-chan struct{} { return l.lost }

func (l *fakeLead) Resign() {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counters.resigns++
	if f.leader == l {
		f.leader = nil
		l.once.Do(func() { close(l.lost) })
		f.signal()
	}
}

func (l *fakeLead) WriteMap(ctx context.Context, m *regionmap.Map, version int32) error {
	f := l.f
	f.mu.Lock()
	hook := f.beforeWrite
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err := m.Validate(); err != nil {
		return err
	}
	f.dmu.Lock()
	defer f.dmu.Unlock()
	f.mu.Lock()
	f.counters.writes++
	switch {
	case f.leader != l:
		f.counters.rejected++
		f.mu.Unlock()
		return coord.ErrNotLeader
	case f.m == nil:
		f.mu.Unlock()
		return coord.ErrNoMap
	case version != f.ver:
		f.counters.conflicts++
		f.mu.Unlock()
		return fmt.Errorf("%w (expected znode version %d)", coord.ErrConflict, version)
	}
	f.publish(m)
	snap, ws := m.Clone(), valuesOf(f.mapW)
	f.mu.Unlock()
	for _, fn := range ws {
		fn(snap.Clone())
	}
	return nil
}

func valuesOf[F any](m map[int]F) []F {
	var out []F
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// clock is a fake clock for Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var _ Coordinator = (*fakeZK)(nil)

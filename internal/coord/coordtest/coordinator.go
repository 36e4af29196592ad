package coordtest

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// Coordinator is the in-memory cluster state (see the package
// documentation). Create it with New.
type Coordinator struct {
	// dmu is held while a change is delivered to watchers (deliveries are
	// serialized); taken before mu.
	dmu sync.Mutex
	mu  sync.Mutex

	root    string
	timeout time.Duration // the sessions' timeout (their leases')
	clock   clockwork.Clock

	servers map[string]registration
	health  map[string]healthReport
	masters map[string]coord.MasterInfo // announced masters (Announce)
	reports map[coord.Report]bool
	reqs    coord.Requests
	m       *regionmap.Map
	ver     int32            // the map's znode version
	history []*regionmap.Map // every map published, the first included

	leader  *term         // the leadership held, if any
	other   bool          // another candidate leads: Campaign waits
	changed chan struct{} // closed and replaced when the election or the servers change

	serverW watchers[map[string]coord.ServerInfo]
	reportW watchers[[]coord.Report]
	reqW    watchers[coord.Requests]
	healthW watchers[map[string]coord.Health]
	mapW    watchers[*regionmap.Map]

	counters Counters
	// beforeWrite, if set, runs (without locks) at the start of every
	// WriteMap.
	beforeWrite func()
}

// registration is a live server's entry; owner is the Session that made
// it (nil: the test, by SetServer).
type registration struct {
	info  coord.ServerInfo
	owner *Session
}

// healthReport is a server's health entry; owner as for registration.
type healthReport struct {
	h     coord.Health
	owner *Session
}

// Counters count the master side's calls: map reads (ReadMap), map writes
// (those refused as not the leader's, those refused as conflicts),
// Campaign calls (those waiting now, those won), Resign and ForgetReports
// calls.
type Counters struct {
	Reads, Writes, Rejected, Conflicts int
	Campaigns, Waiting, Terms, Resigns int
	Forgets                            int
}

// Option configures a Coordinator.
type Option func(*Coordinator)

// WithRoot sets what Session.Root returns (default "/tebis").
func WithRoot(root string) Option { return func(c *Coordinator) { c.root = root } }

// WithSessionTimeout sets the timeout the Sessions' leases derive from
// (default 2 s): a lease lasts coord.LeaseFraction of it after a renewal.
func WithSessionTimeout(d time.Duration) Option { return func(c *Coordinator) { c.timeout = d } }

// WithClock sets the clock the Sessions' leases are measured on and their
// renewals (KeepLease) paced on (default: the system clock).
func WithClock(clk clockwork.Clock) Option { return func(c *Coordinator) { c.clock = clk } }

// New returns a Coordinator whose map is m (nil: none yet; m is copied)
// and whose live servers are live (registered by the test).
func New(m *regionmap.Map, live []coord.ServerInfo, opts ...Option) *Coordinator {
	c := &Coordinator{root: "/tebis", timeout: 2 * time.Second, clock: clockwork.NewRealClock(), servers: map[string]registration{}, health: map[string]healthReport{},
		masters: map[string]coord.MasterInfo{}, reports: map[coord.Report]bool{}, reqs: coord.Requests{Moves: map[uint64]string{}, Drained: map[string]bool{}},
		changed: make(chan struct{})}
	for _, o := range opts {
		o(c)
	}
	if m != nil {
		c.m = m.Clone()
		c.history = append(c.history, m.Clone())
	}
	for _, si := range live {
		c.servers[si.Name] = registration{info: si}
	}
	return c
}

// --- snapshots, called with mu held ---

func (c *Coordinator) serversSnap() map[string]coord.ServerInfo {
	out := make(map[string]coord.ServerInfo, len(c.servers))
	for n, r := range c.servers {
		out[n] = r.info
	}
	return out
}

func (c *Coordinator) healthSnap() map[string]coord.Health {
	out := make(map[string]coord.Health, len(c.health))
	for n, h := range c.health {
		out[n] = h.h
	}
	return out
}

func (c *Coordinator) reportsSnap() []coord.Report {
	out := slices.Collect(maps.Keys(c.reports))
	coord.SortReports(out)
	if out == nil {
		out = []coord.Report{}
	}
	return out
}

func (c *Coordinator) requestsSnap() coord.Requests {
	return coord.Requests{Moves: maps.Clone(c.reqs.Moves), Drained: maps.Clone(c.reqs.Drained), Rebalance: c.reqs.Rebalance}
}

func (c *Coordinator) mapSnap() *regionmap.Map {
	if c.m == nil {
		return nil
	}
	return c.m.Clone()
}

// signal wakes Campaign and Register calls waiting for a change. Called
// with mu held.
func (c *Coordinator) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// --- changes: each applies its change under mu, then delivers it with
// dmu held (taken first) ---

func (c *Coordinator) changeServers(change func()) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.mu.Lock()
	change()
	c.signal()
	c.mu.Unlock()
	notify(c, &c.serverW, c.serversSnap)
}

// changeOne applies change, then delivers the state snap reads to ws.
func changeOne[T any](c *Coordinator, ws *watchers[T], snap func() T, change func()) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.mu.Lock()
	change()
	c.mu.Unlock()
	notify(c, ws, snap)
}

func (c *Coordinator) changeHealth(change func()) { changeOne(c, &c.healthW, c.healthSnap, change) }

func (c *Coordinator) changeRequests(change func()) { changeOne(c, &c.reqW, c.requestsSnap, change) }

// SetRequests replaces the operators' requests (coord.Requests; nil maps
// are empty).
func (c *Coordinator) SetRequests(rq coord.Requests) {
	c.changeRequests(func() {
		c.reqs = coord.Requests{Moves: map[uint64]string{}, Drained: map[string]bool{}, Rebalance: rq.Rebalance}
		maps.Copy(c.reqs.Moves, rq.Moves)
		maps.Copy(c.reqs.Drained, rq.Drained)
	})
}

// Requests returns the operators' requests kept.
func (c *Coordinator) Requests() coord.Requests {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requestsSnap()
}

func (c *Coordinator) changeReports(change func()) { changeOne(c, &c.reportW, c.reportsSnap, change) }

// dropEphemerals deletes the registrations and health reports s owns.
func (c *Coordinator) dropEphemerals(s *Session) {
	c.changeServers(func() {
		maps.DeleteFunc(c.servers, func(_ string, r registration) bool { return r.owner == s })
	})
	c.changeHealth(func() {
		maps.DeleteFunc(c.health, func(_ string, h healthReport) bool { return h.owner == s })
	})
}

// --- the test's side ---

// SetServer registers (or replaces) a server, owned by no session.
func (c *Coordinator) SetServer(si coord.ServerInfo) {
	c.changeServers(func() { c.servers[si.Name] = registration{info: si} })
}

// RemoveServer deletes a server's registration, whoever owns it (as its
// session's expiry would).
func (c *Coordinator) RemoveServer(name string) {
	c.changeServers(func() { delete(c.servers, name) })
}

// Servers returns the live servers by name.
func (c *Coordinator) Servers() map[string]coord.ServerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.serversSnap()
}

// SetHealth publishes (nil: deletes) a server's health report, owned by
// no session.
func (c *Coordinator) SetHealth(name string, h *coord.Health) {
	c.changeHealth(func() {
		if h == nil {
			delete(c.health, name)
		} else {
			c.health[name] = healthReport{h: *h}
		}
	})
}

// HealthReports returns the health reports by server name.
func (c *Coordinator) HealthReports() map[string]coord.Health {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.healthSnap()
}

// AddReport records a report, as a region server does.
func (c *Coordinator) AddReport(r coord.Report) {
	c.changeReports(func() { c.reports[r] = true })
}

// Reports returns the reports kept, in coord.SortReports order.
func (c *Coordinator) Reports() []coord.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reportsSnap()
}

// PutMap replaces the map unconditionally (another writer; m is copied).
func (c *Coordinator) PutMap(m *regionmap.Map) {
	c.dmu.Lock()
	defer c.dmu.Unlock()
	c.mu.Lock()
	c.publish(m)
	c.mu.Unlock()
	notify(c, &c.mapW, c.mapSnap)
}

// publish stores m as the next version of the map. Called with mu held.
func (c *Coordinator) publish(m *regionmap.Map) {
	c.m = m.Clone()
	c.ver++
	c.history = append(c.history, m.Clone())
}

// Map returns (a copy of) the current map, nil if none, and its znode
// version.
func (c *Coordinator) Map() (*regionmap.Map, int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mapSnap(), c.ver
}

// History returns (copies of) every map published, the first included.
func (c *Coordinator) History() []*regionmap.Map {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*regionmap.Map, len(c.history))
	for i, m := range c.history {
		out[i] = m.Clone()
	}
	return out
}

// Depose ends the current leadership (its Lost closes, its writes are
// refused) and lets another candidate lead until Yield.
func (c *Coordinator) Depose() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.leader; l != nil {
		c.leader = nil
		l.end()
	}
	c.other = true
	c.signal()
}

// Yield ends the other candidate's leadership: a waiting Campaign wins.
func (c *Coordinator) Yield() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.other = false
	c.signal()
}

// Counters returns a snapshot of the call counters.
func (c *Coordinator) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counters
}

// SetBeforeWrite sets a hook run (without locks) at the start of every
// WriteMap: a test's way to change the world under the writer. nil
// removes it.
func (c *Coordinator) SetBeforeWrite(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beforeWrite = fn
}

package region

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// Full or failing disks (docs/failover.md, docs/operations.md). The
// server watches its volume's health (engine.Volume.Health): once the
// volume cannot store writes (no space, or a failed write or sync) it
//
//   - refuses every write with StatusStorage, naming itself and the
//     disk's error (nothing it refuses was acknowledged; a write the
//     engine failed was not acknowledged either), and goes on serving
//     reads;
//   - reports the state in its stats (health, health_error);
//   - managed, primary of a region (the installed map gives its run the
//     role): steps down, as its session's expiry would make it, at most
//     once an episode: it stops serving every region as primary (refuse
//     first, detach after), publishes its health znode (coord.Health) for
//     a new run and registers as that run. The master fails its regions
//     over as for a restarted server (a backup that reported a complete
//     copy is promoted, a healthy one first; the other regions are given
//     back to the new run, which serves their reads) and gives it no new
//     role while the znode is there. The restart rule takes the server
//     out of every group, its backup roles too: the master cannot tell a
//     step-down's run from a restart's;
//   - managed, primary of nothing: publishes its health znode for the run
//     registered, without registering again: its backup copies stay in
//     their groups (a complete one may still be promoted when no healthy
//     backup holds one) and it is given no new role. A backup's memory
//     buffer takes its primary's WRITEs as before; the first command it
//     cannot store (a flush, a compaction's segment) fails, which makes
//     its copy incomplete (never promoted) and has the primary drop it
//     (no write is acknowledged until the master publishes the group
//     without it, with a healthy replacement joining). Made primary later
//     in the episode (promoted: no healthy backup had a complete copy, or
//     a decision that predates its znode), it steps down then. A run
//     registered while unhealthy (a restart, a session expiry) counts as
//     the episode's step-down: the master saw it unhealthy from the start;
//   - out of space, probes for space every probeEvery (ProbeSpace: the
//     segment file's growth is tried again); once there is room it
//     accepts writes again and deletes its health znode. A failed volume
//     stays failed until the server restarts (the restart recovers from
//     the disk: in sync mode every acknowledged write).

const (
	healthPoll = 200 * time.Millisecond // how often the volume's health is read
	probeEvery = time.Second            // how often a server out of space probes for it
)

// diskHealth is an unhealthy volume's state.
type diskHealth struct {
	state string // coord.HealthNoSpace or coord.HealthFailed
	err   error
	since time.Time
}

// healthMon is the server's view of its volume's health.
type healthMon struct {
	cur  atomic.Pointer[diskHealth] // nil: healthy
	kick chan struct{}              // buffered 1: read the health now
	wg   sync.WaitGroup

	// Used by the monitor goroutine only, and by register (under the
	// cluster link's regMu): what the health znode says.
	mu       sync.Mutex
	pubRun   int64  // the run the published znode names (0: none published)
	pubGen   uint64 // the session generation it was published in
	pubState string
	// steppedAt is the run this episode's step-down registered, or a run
	// registered while unhealthy (0: none yet): the episode steps down no
	// more.
	steppedAt int64
	// pending is the run a step-down could not register (it deregistered
	// the server instead: escalate), until registered; pendingTry is when
	// registerPending last tried.
	pending    int64
	pendingTry time.Time
}

// poke asks the monitor to read the volume's health now.
func (h *healthMon) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// stateOf classifies a volume health error.
func stateOf(err error) string {
	if errors.Is(err, engine.ErrVolumeFailed) || errors.Is(err, engine.ErrMetadataFailed) {
		return coord.HealthFailed
	}
	return coord.HealthNoSpace
}

// isStorageErr reports an engine error that says the disk cannot store.
func isStorageErr(err error) bool {
	return errors.Is(err, engine.ErrNoSpace) || errors.Is(err, engine.ErrVolumeFailed) || errors.Is(err, engine.ErrMetadataFailed)
}

// Healthy reports whether the server's volume stores writes, and if not
// the disk's error.
func (s *Server) Healthy() (bool, error) {
	if h := s.health.cur.Load(); h != nil {
		return false, h.err
	}
	return true, nil
}

// refuseWrite is the reply to a write while the volume cannot store
// writes (nil: accept it).
func (s *Server) refuseWrite() *ring.Reply {
	h := s.health.cur.Load()
	if h == nil {
		return nil
	}
	what := "until space returns"
	if h.state == coord.HealthFailed {
		what = "until the server restarts"
	}
	r := errorReply(wire.StatusStorage, "server %s: disk %s: writes refused %s: %v", s.cfg.Name, h.state, what, h.err)
	return &r
}

// engineErr is engineReply for this server: a storage error names the
// server and has the health monitor look at once.
func (s *Server) engineErr(err error) ring.Reply {
	if isStorageErr(err) {
		s.health.poke()
		return errorReply(wire.StatusStorage, "server %s: storage: %v", s.cfg.Name, err)
	}
	return engineReply(err)
}

// watchHealth runs the health monitor until ctx ends.
func (s *Server) watchHealth(ctx context.Context) {
	defer s.health.wg.Done()
	t := s.clock().NewTicker(healthPoll)
	defer t.Stop()
	var lastProbe time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-s.health.kick:
		}
		s.checkHealth(ctx, &lastProbe)
	}
}

// checkHealth reads the volume's health, probes for space when out of
// it, and (managed) steps down and keeps the health znode true.
func (s *Server) checkHealth(ctx context.Context, lastProbe *time.Time) {
	err := s.vol.Health()
	cur := s.health.cur.Load()
	switch {
	case err != nil && (cur == nil || stateOf(err) != cur.state):
		h := &diskHealth{state: stateOf(err), err: err, since: s.clock().Now()}
		if cur != nil {
			h.since = cur.since
		}
		s.health.cur.Store(h)
		s.log.Error("the volume cannot store writes: refusing writes, serving reads", zap.String("state", h.state), zap.Error(err))
		cur = h
	case err == nil && cur != nil:
		s.health.cur.Store(nil)
		s.log.Info("the volume stores writes again", zap.Duration("after", s.clock().Since(cur.since)))
		cur = nil
	}
	if cur != nil && cur.state == coord.HealthNoSpace && s.clock().Since(*lastProbe) >= probeEvery {
		*lastProbe = s.clock().Now()
		if perr := s.vol.ProbeSpace(); perr == nil {
			s.health.cur.Store(nil)
			s.log.Info("space returned: accepting writes again", zap.Duration("after", s.clock().Since(cur.since)))
			cur = nil
		}
	}
	if c := s.cluster; c != nil {
		s.syncHealth(ctx, c, cur)
	}
}

// syncHealth makes the cluster see cur: a step-down when the server is
// primary of a region and has not stepped down this episode, and the
// health znode (for the run registered: re-published after a session
// expiry or re-registration, deleted once healthy).
func (s *Server) syncHealth(ctx context.Context, c *clusterLink, cur *diskHealth) {
	if c.detached.Load() || s.registerPending(ctx, c) {
		return // out of the cluster, or not registered again yet
	}
	if cur == nil {
		s.health.mu.Lock()
		published := s.health.pubRun != 0
		s.health.steppedAt = 0
		s.health.mu.Unlock()
		if published {
			if err := s.publishHealth(ctx, c, nil); err != nil {
				s.log.Warn("deleting the health znode failed; retrying", zap.Error(err))
			}
		}
		return
	}
	s.health.mu.Lock()
	stepped := s.health.steppedAt != 0
	s.health.mu.Unlock()
	if !stepped && s.primaryOfAny(c) {
		s.stepDown(ctx, c)
		return
	}
	if err := s.publishHealth(ctx, c, cur); err != nil {
		s.log.Warn("publishing the health znode failed; retrying", zap.Error(err))
	}
}

// primaryOfAny reports whether the installed map makes this run of the
// server primary of a region (hosted, attaching or not installed yet).
func (s *Server) primaryOfAny(c *clusterLink) bool {
	st := s.state.Load()
	if st == nil {
		return false
	}
	if len(st.hostedIDs()) > 0 {
		return true
	}
	return st.m != nil && c.knows(st.m, s.cfg.Name) &&
		slices.ContainsFunc(st.m.Regions, func(r regionmap.Assignment) bool { return r.Serving(s.cfg.Name) })
}

// publishHealth brings the health znode to h (nil: none) for the run
// registered now, unless it says so already in this session.
func (s *Server) publishHealth(ctx context.Context, c *clusterLink, h *diskHealth) error {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return s.publishHealthLocked(ctx, c, h, c.started.Load())
}

// publishHealthLocked is publishHealth for run. Called with c.regMu held.
func (s *Server) publishHealthLocked(ctx context.Context, c *clusterLink, h *diskHealth, run int64) error {
	gen := c.sess.Generation()
	s.health.mu.Lock()
	same := (h == nil && s.health.pubRun == 0) ||
		(h != nil && s.health.pubRun == run && s.health.pubGen == gen && s.health.pubState == h.state)
	s.health.mu.Unlock()
	if same {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var info *coord.Health
	if h != nil {
		info = &coord.Health{Name: s.cfg.Name, Started: run, State: h.state, Error: h.err.Error(), Since: h.since.UnixNano()}
	}
	if err := c.sess.SetHealth(rctx, s.cfg.Name, info); err != nil {
		return err
	}
	s.health.mu.Lock()
	defer s.health.mu.Unlock()
	if h == nil {
		s.health.pubRun, s.health.pubState = 0, ""
		s.log.Info("health znode deleted: the master may give this server roles again")
		return nil
	}
	s.health.pubRun, s.health.pubGen, s.health.pubState = run, gen, h.state
	s.log.Warn("health znode published", zap.String("state", h.state))
	return nil
}

// stepDown hands this server's roles back to the master, as a session
// expiry would: from here no map of the current run gives it a role, it
// stops serving every region as primary (refuse first, detach after),
// publishes its health znode for a new run and registers as that run,
// then installs the map it finds (the master publishes the new run once
// it failed the old one's regions over). The master's decision
// (master.Next) therefore never promotes a backup of a region this server
// may still serve.
//
// The registration is retried for stepDownWithin. A server that cannot
// register its new run (ZooKeeper refuses the health znode or the
// registration) serves nothing, and while its old run stays registered
// the master moves none of its regions: escalate makes the master fail it
// over.
func (s *Server) stepDown(ctx context.Context, c *clusterLink) {
	c.regMu.Lock()
	run := time.Now().UnixNano()
	c.started.Store(run) // no map of the registered run gives a role from here
	s.log.Warn("stepping down: every region this server is primary of is handed to the master to move", zap.Int64("run", run))
	s.fence()
	s.health.mu.Lock()
	s.health.steppedAt = run
	s.health.mu.Unlock()
	err := s.registerWithin(ctx, c, run)
	if err != nil && ctx.Err() == nil {
		s.escalate(ctx, c, run, err)
	}
	c.regMu.Unlock()
	if err == nil {
		s.installFresh(ctx, c)
	}
}

// stepDownWithin bounds a step-down's registration of its new run, and
// its escalation's deregistration: twice the ZooKeeper session timeout
// (a server that died would be failed over after one), at least 2 s.
func (c *Config) stepDownWithin() time.Duration {
	return max(2*time.Duration(c.ZKSessionTimeout), 2*time.Second)
}

// registerWithin registers run in place of the registered one, retried
// until it succeeds, ctx ends or stepDownWithin passed; it returns the
// last error. Called with c.regMu held.
func (s *Server) registerWithin(ctx context.Context, c *clusterLink, run int64) error {
	deadline := s.clock().Now().Add(s.cfg.stepDownWithin())
	for {
		rctx, cancel := context.WithTimeout(ctx, s.clock().Until(deadline)) // the deadline on the server's clock
		err := s.registerRun(rctx, c, run, true)
		cancel()
		left := s.clock().Until(deadline)
		if err == nil || ctx.Err() != nil || left <= 0 {
			return err
		}
		s.log.Warn("registering as a new run after stepping down failed; retrying", zap.Error(err), zap.Duration("left", left))
		if !s.pause(ctx, min(time.Second, left)) {
			return err
		}
		if s.clock().Until(deadline) <= 0 {
			return err
		}
	}
}

// escalate makes the master fail this server over when its step-down
// could not register the new run (cause): the server serves nothing, but
// its old run's registration would keep the master from moving its
// regions. It deletes that registration (the master fails the server
// over as a dead one; checkHealth registers run later: registerPending),
// or, if that fails too, closes the ZooKeeper session, whose ephemeral
// znodes go with it (the server is then out of the cluster until it
// restarts). Called with c.regMu held.
func (s *Server) escalate(ctx context.Context, c *clusterLink, run int64, cause error) {
	dctx, cancel := context.WithTimeout(ctx, s.cfg.stepDownWithin())
	err := c.sess.Deregister(dctx, s.cfg.Name)
	cancel()
	if err == nil {
		s.health.mu.Lock()
		s.health.pending = run
		s.health.mu.Unlock()
		s.log.Error("stepping down: registering as a new run failed, deregistered instead: the master fails this server over as a dead one; registering is retried",
			zap.Int64("run", run), zap.Error(cause))
		return
	}
	s.log.Error("stepping down: neither registering as a new run nor deregistering worked: closing the zookeeper session, so that the master fails this server over; restart the server to rejoin the cluster",
		zap.NamedError("register", cause), zap.NamedError("deregister", err))
	c.detached.Store(true)
	c.sess.Close()
}

// registerPending registers the run a step-down could not (escalate
// deregistered the server instead), tried every probeEvery, then installs
// the map. It reports whether the server is still unregistered.
func (s *Server) registerPending(ctx context.Context, c *clusterLink) bool {
	s.health.mu.Lock()
	run, last := s.health.pending, s.health.pendingTry
	s.health.mu.Unlock()
	if run == 0 {
		return false
	}
	if s.clock().Since(last) < probeEvery {
		return true
	}
	c.regMu.Lock()
	s.health.mu.Lock()
	run, s.health.pendingTry = s.health.pending, s.clock().Now() // a session expiry's registration may have come first
	s.health.mu.Unlock()
	var err error
	if run != 0 {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.stepDownWithin())
		err = s.registerRun(rctx, c, run, true)
		cancel()
	}
	c.regMu.Unlock()
	if err != nil {
		s.log.Warn("registering after a step-down that deregistered this server failed; retrying", zap.Int64("run", run), zap.Error(err))
		return true
	}
	if run != 0 {
		s.installFresh(ctx, c)
	}
	return false
}

// installFresh reads the map and installs it (a watch does not deliver
// an unchanged map again), retried until it works or ctx ends.
func (s *Server) installFresh(ctx context.Context, c *clusterLink) {
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		m, _, err := c.sess.ReadMap(rctx)
		cancel()
		if err == nil {
			if err := s.install(m); err != nil {
				s.log.Error("region map installed in part", zap.Uint64("version", m.Version), zap.Error(err))
			}
			return
		}
		s.log.Warn("reading the region map failed; retrying", zap.Error(err))
		s.pause(ctx, time.Second)
	}
}

package master

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/region"
)

// Config configures a master process.
type Config struct {
	Name string // this candidate's name (shown by `tebis cluster status`)
	// Coord is the cluster's coordination service (ZK(session) for
	// ZooKeeper). When nil, Session is used.
	Coord Coordinator
	// Session is shorthand for Coord: ZK(Session); owned by the caller.
	Session *coord.Session
	// Grace is how long a new leader waits for a server of the map it
	// never saw live (in this Run, any term) before treating it as failed
	// (servers starting together with the cluster, or registering again).
	// Default 10 s.
	Grace time.Duration
	// Recheck bounds the time between two decisions without events
	// (Grace expiries are noticed by it). Default 500 ms.
	Recheck time.Duration
	// LogWait bounds how long a failed primary's promotion waits for its
	// live backups to report their log positions (the most complete is
	// promoted). Default 1 s.
	LogWait time.Duration
	// DropHold is how long a server a primary dropped from its stream is
	// not given a new backup role unless it registers again (it may be
	// dead with its session not expired yet). Default 5 s.
	DropHold time.Duration
	// MoveTimeout bounds how long a move of a live primary (an operator's
	// move, a drain, the balancer) waits for the primary to release its
	// region before it is cancelled. Default 10 s.
	MoveTimeout time.Duration
	// Balance has the master spread the regions' primaries evenly over
	// the servers by itself (docs/failover.md, "Moving a primary").
	Balance bool
	Log     *zap.Logger
	Now     func() time.Time // default time.Now
	// Metrics, if set, gets the master's Prometheus metrics (metrics.go;
	// docs/operations.md, "Metrics"): regions by state, failovers and
	// their duration, decisions and publications, leadership and the
	// ZooKeeper session. nil: none. internal/metrics makes a registry
	// (NewRegistry: with the Go and process collectors) and serves it
	// (Handler).
	Metrics prometheus.Registerer
	// HTTP is the host:port of the master's HTTP endpoints (http.go:
	// /healthz, /readyz, the status page); empty: off. They need no
	// credentials: keep them on loopback or a private network.
	HTTP string
	// Handlers are extra routes of the HTTP listener, by pattern
	// (http.ServeMux syntax, e.g. "GET /metrics"); only with HTTP.
	Handlers map[string]http.Handler
	// Fetch reads a region server's status from its HTTP address, for the
	// status page; default: GET /status.json with a 1 s timeout.
	Fetch func(ctx context.Context, addr string) (region.Status, error)
}

// Run campaigns and, while leading, keeps the region map true, until ctx
// ends. It returns nil at ctx's end, or the first unrecoverable error.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Grace == 0 {
		cfg.Grace = 10 * time.Second
	}
	if cfg.Recheck == 0 {
		cfg.Recheck = 500 * time.Millisecond
	}
	if cfg.DropHold == 0 {
		cfg.DropHold = 5 * time.Second
	}
	if cfg.LogWait == 0 {
		cfg.LogWait = time.Second
	}
	if cfg.MoveTimeout == 0 {
		cfg.MoveTimeout = 10 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Coord == nil {
		if cfg.Session == nil {
			return errors.New("master: no Coord nor Session configured")
		}
		cfg.Coord = ZK(cfg.Session)
	}
	mm, err := registerMetrics(cfg.Metrics, cfg.Coord)
	if err != nil {
		return fmt.Errorf("master: metrics: %w", err)
	}
	if cfg.Fetch == nil {
		cfg.Fetch = fetchStatus
	}
	b := &board{since: cfg.Now()}
	stopHTTP, addr, err := serveHTTP(cfg, b)
	if err != nil {
		return err
	}
	defer stopHTTP()
	actx, stopAnnounce := context.WithCancel(ctx)
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		cfg.Coord.Announce(actx, coord.MasterInfo{Name: cfg.Name, HTTP: addr})
	}()
	defer func() { stopAnnounce(); <-announced }()
	// When this master last saw each server live, kept across terms: a
	// server it saw that is gone now has failed, and waiting Grace for it
	// again after a leadership blip would only delay its failover.
	h := &history{seen: map[string]time.Time{}, gone: map[string]time.Time{}, drops: map[Join]time.Time{},
		released: map[Join]time.Time{}, moving: map[Join]time.Time{}}
	for ctx.Err() == nil {
		cfg.Log.Info("campaigning for master", zap.String("name", cfg.Name))
		lead, err := cfg.Coord.Campaign(ctx, cfg.Name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		cfg.Log.Info("leading", zap.String("name", cfg.Name))
		mm.leading(true)
		b.lead(true, cfg.Now())
		err = lead1(ctx, cfg, lead, h, mm, b)
		mm.leading(false)
		lead.Resign()
		b.lead(false, cfg.Now())
		if ctx.Err() != nil {
			return nil
		}
		cfg.Log.Warn("leadership lost", zap.Error(err))
	}
	return nil
}

// history is what a master remembers across its terms.
type history struct {
	seen  map[string]time.Time // servers seen live, last
	gone  map[string]time.Time // registrations seen ending or changing
	drops map[Join]time.Time   // drop reports, first seen
	// released: release reports, first seen; moving: the map's moves
	// (Server: the target), first seen
	released, moving map[Join]time.Time
}

// observations is what h holds of each server.
func (h *history) observations() map[string]Observed {
	out := map[string]Observed{}
	for n, at := range h.seen {
		o := out[n]
		o.LastLive = at
		out[n] = o
	}
	for n, at := range h.gone {
		o := out[n]
		o.Gone = at
		out[n] = o
	}
	for j, at := range h.drops {
		if o := out[j.Server]; at.After(o.Dropped) {
			o.Dropped = at
			out[j.Server] = o
		}
	}
	return out
}

// observed is what the watches collected; guarded by mu.
type observed struct {
	mu sync.Mutex
	*history
	live  map[string]regionmap.Server
	joins map[Join]bool
	logs  map[Join]uint64 // backups' log positions
	// incomplete: backups that reported their copy incomplete
	incomplete map[Join]bool
	// lost: backups that reported losing their primary
	lost map[Join]bool
	// dropped are backups primaries dropped from their streams
	dropped map[Join]bool
	ready   bool // the first server list arrived
	reports bool // the first reports arrived (a drop must be known before a promotion)
	// health: servers' health reports (a full or failing disk), by name
	health      map[string]coord.Health
	healthReady bool // the first health reports arrived
	requests    coord.Requests
	reqReady    bool // the first requests arrived
}

// unhealthy lists the live servers whose health report names their
// registered run. Called with mu held.
func (o *observed) unhealthy() map[string]bool {
	out := map[string]bool{}
	for name, h := range o.health {
		if srv, ok := o.live[name]; ok && (h.Started == 0 || h.Started == srv.Started) {
			out[name] = true
		}
	}
	return out
}

// lead1 is one term as leader: it returns when leadership is lost. It
// updates h (under its obs.mu; no other term runs meanwhile).
func lead1(ctx context.Context, cfg Config, lead Leadership, h *history, mm *masterMetrics, b *board) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := cfg.Coord
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	obs := &observed{history: h, joins: map[Join]bool{}}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(5)
	go func() {
		defer wg.Done()
		s.WatchRequests(ctx, func(rq coord.Requests) {
			obs.mu.Lock()
			obs.requests, obs.reqReady = rq, true
			obs.mu.Unlock()
			poke()
		})
	}()
	go func() {
		defer wg.Done()
		s.WatchHealth(ctx, func(h map[string]coord.Health) {
			obs.mu.Lock()
			obs.health, obs.healthReady = h, true
			obs.mu.Unlock()
			b.setHealth(h)
			poke()
		})
	}()
	go func() {
		defer wg.Done()
		s.WatchServers(ctx, func(live map[string]coord.ServerInfo) {
			obs.mu.Lock()
			now := cfg.Now()
			prev := obs.live
			obs.live = map[string]regionmap.Server{}
			for n, si := range live {
				srv := si.Server
				srv.Started = si.Started
				obs.live[n] = srv
				obs.seen[n] = now
			}
			for n, old := range prev {
				if cur, ok := obs.live[n]; !ok || cur.Started != old.Started {
					obs.gone[n] = now
				}
			}
			obs.ready = true
			obs.mu.Unlock()
			b.setLive(live)
			poke()
		})
	}()
	go func() {
		defer wg.Done()
		s.WatchReports(ctx, func(rs []coord.Report) {
			obs.mu.Lock()
			obs.joins, obs.dropped, obs.logs, obs.incomplete, obs.lost, obs.reports = map[Join]bool{}, map[Join]bool{}, map[Join]uint64{}, map[Join]bool{}, map[Join]bool{}, true
			releases := map[Join]bool{}
			for _, r := range rs {
				key := r.Key()
				k := Join{Region: key.Region, Epoch: key.Epoch, Server: key.Server}
				switch r := r.(type) {
				case coord.LogReport:
					obs.logs[k] = max(obs.logs[k], r.Pos)
					if !r.Complete {
						obs.incomplete[k] = true
					}
				case coord.DropReport:
					obs.dropped[k] = true
					if _, ok := obs.drops[k]; !ok {
						obs.drops[k] = cfg.Now()
					}
				case coord.JoinReport:
					obs.joins[k] = true
				case coord.LostReport:
					obs.lost[k] = true
				case coord.ReleaseReport:
					releases[k] = true
					if _, ok := obs.released[k]; !ok {
						obs.released[k] = cfg.Now()
					}
				}
			}
			for k := range obs.released {
				if !releases[k] {
					delete(obs.released, k)
				}
			}
			for k, at := range obs.drops { // forget drops deleted, past their hold
				if !obs.dropped[k] && cfg.Now().Sub(at) >= cfg.DropHold {
					delete(obs.drops, k)
				}
			}
			dropped, joins := maps.Clone(obs.dropped), maps.Clone(obs.joins)
			obs.mu.Unlock()
			b.setReports(dropped, joins)
			poke()
		})
	}()
	go func() {
		defer wg.Done()
		s.WatchMap(ctx, func(m *regionmap.Map) { b.setMap(m); poke() }, func(err error) {
			cfg.Log.Error("the region map in zookeeper is invalid", zap.Error(err))
		})
	}()
	termStart := cfg.Now()
	tick := time.NewTicker(cfg.Recheck)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-lead.Lost():
			return coord.ErrNotLeader
		case <-kick:
		case <-tick.C:
		}
		err := decide(ctx, cfg, lead, obs, termStart, mm, b)
		if errors.Is(err, coord.ErrNotLeader) {
			return err
		}
		if err != nil && !errors.Is(err, coord.ErrNoMap) && !errors.Is(err, coord.ErrConflict) {
			cfg.Log.Warn("decision not published", zap.Error(err))
		}
		if errors.Is(err, coord.ErrConflict) {
			poke()
		}
	}
}

// decide reads the map, runs Next and publishes its result; termStart is
// when this term began. It records both in mm and b.
func decide(ctx context.Context, cfg Config, lead Leadership, obs *observed, termStart time.Time, mm *masterMetrics, b *board) error {
	obs.mu.Lock()
	ready := obs.ready && obs.reports && obs.healthReady && obs.reqReady
	obs.mu.Unlock()
	if !ready { // nothing to decide from before the watches delivered
		return nil
	}
	m, ver, err := cfg.Coord.ReadMap(ctx)
	b.decided(err)
	if err != nil {
		return err
	}
	obs.mu.Lock()
	now := cfg.Now()
	moves := map[Join]bool{}
	for _, r := range m.Regions {
		if r.MoveTo != "" {
			k := Join{r.ID, r.Epoch, r.MoveTo}
			moves[k] = true
			if _, ok := obs.moving[k]; !ok {
				obs.moving[k] = now
			}
		}
	}
	for k := range obs.moving {
		if !moves[k] {
			delete(obs.moving, k)
		}
	}
	v := View{Map: m, Live: obs.live, Now: now, TermStart: termStart, Servers: obs.observations(),
		Timing: Timing{Grace: cfg.Grace, LogWait: cfg.LogWait, DropHold: cfg.DropHold, MoveTimeout: cfg.MoveTimeout},
		Joins:  obs.joins, Dropped: obs.dropped, Logs: obs.logs, Incomplete: obs.incomplete, Lost: obs.lost, Unhealthy: obs.unhealthy(),
		Released: obs.released, Moving: obs.moving, Requests: obs.requests, Balance: cfg.Balance}
	d := Next(v)
	obs.mu.Unlock()
	mm.decided(m, v.Live)
	next := d.Map
	if next == nil {
		finishRequests(ctx, cfg, d)
		return nil
	}
	if err := lead.WriteMap(ctx, next, ver); err != nil {
		return err
	}
	finishRequests(ctx, cfg, d)
	now = cfg.Now()
	if len(d.Lost) > 0 {
		// Held back as a dropped server is: one its backups lost is most
		// likely dead, and registered until its session expires.
		obs.mu.Lock()
		for _, j := range d.Lost {
			obs.drops[j] = now
		}
		obs.mu.Unlock()
		cfg.Log.Info("primaries lost to their backups failed over", zap.Any("lost", d.Lost))
	}
	fos := failovers(m, next, v.Servers, termStart, now)
	mm.published(next, v, fos)
	b.published(m, next, now, fos)
	if len(d.Restarted) > 0 {
		cfg.Log.Info("restarted servers failed over", zap.Strings("servers", d.Restarted))
	}
	logChanges(cfg.Log, m, next, v.Logs)
	keep := map[uint64]uint64{}
	for _, r := range next.Regions {
		keep[r.ID] = r.Epoch
	}
	if err := cfg.Coord.ForgetReports(ctx, keep); err != nil && ctx.Err() == nil {
		// Published all the same; stale reports go after the next map.
		cfg.Log.Warn("old reports not deleted", zap.Error(err))
	}
	return nil
}

// finishRequests deletes the operators' requests d settled (after its
// map, if any, was published).
func finishRequests(ctx context.Context, cfg Config, d Decision) {
	for _, o := range d.Moves {
		if o.Err != nil {
			cfg.Log.Warn("move request given up", zap.Uint64("region", o.Region), zap.String("target", o.Target), zap.Error(o.Err))
		} else {
			cfg.Log.Info("move request done", zap.Uint64("region", o.Region), zap.String("primary", o.Target))
		}
		if err := cfg.Coord.FinishMove(ctx, o.Region, o.Target); err != nil && ctx.Err() == nil {
			cfg.Log.Warn("move request not deleted", zap.Uint64("region", o.Region), zap.Error(err))
		}
	}
	if d.Rebalanced {
		cfg.Log.Info("rebalance request done")
		if err := cfg.Coord.FinishRebalance(ctx); err != nil && ctx.Err() == nil {
			cfg.Log.Warn("rebalance request not deleted", zap.Error(err))
		}
	}
}

// logChanges logs what a new map changed per region, and the log
// positions a promotion chose from.
func logChanges(log *zap.Logger, old, next *regionmap.Map, logs map[Join]uint64) {
	log.Info("region map published", zap.Uint64("version", next.Version))
	for _, r := range next.Regions {
		o := old.Region(r.ID)
		if o != nil && o.MoveTo == "" && r.MoveTo != "" {
			log.Info("moving a primary", zap.Uint64("region", r.ID), zap.String("primary", r.Primary), zap.String("to", r.MoveTo),
				zap.Uint64("epoch", r.Epoch))
		}
		if o != nil && o.Primary != r.Primary {
			pos := map[string]uint64{}
			for _, b := range o.Backups {
				if p, ok := logs[Join{o.ID, o.Epoch, b}]; ok {
					pos[b] = p
				}
			}
			log.Info("primary failed over", zap.Uint64("region", r.ID), zap.String("failed", o.Primary), zap.String("promoted", r.Primary),
				zap.Uint64("epoch", r.Epoch), zap.Any("log_positions", pos))
		}
		if o == nil || o.Epoch != r.Epoch || o.Primary != r.Primary || len(o.Joining) != len(r.Joining) || len(o.Backups) != len(r.Backups) {
			log.Info("region group", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch), zap.String("primary", r.Primary),
				zap.Strings("backups", r.Backups), zap.Strings("joining", r.Joining))
		}
	}
}

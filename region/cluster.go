package region

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// clusterLink is a managed server's side of ZooKeeper: its registration
// (an ephemeral znode; the master fails the server over when it goes) and
// the region map it serves, installed as the master publishes it.
type clusterLink struct {
	sess   Coordinator
	cancel context.CancelFunc
	wg     sync.WaitGroup

	started atomic.Int64 // the run registered last (ServerInfo.Started)
	logs    *logReporter // backups' log position reports (logpos.go)
	// regMu serializes registrations (a session expiry's, a step-down's)
	// and health znode updates (health.go).
	regMu sync.Mutex
	// detached: a step-down that could neither register nor deregister
	// closed the session (health.go, escalate).
	detached atomic.Bool
}

// knows reports whether m's roles are for this run of the server: its map
// entry carries the run it registered. A map from before the master saw
// this run (a restart, a new session) gives it no role.
func (c *clusterLink) knows(m *regionmap.Map, name string) bool {
	srv, ok := m.Server(name)
	return ok && srv.Started == c.started.Load()
}

// joinCluster registers the server and starts following the map. Called
// from Start once the server listens (its addresses are known).
func (s *Server) joinCluster() error {
	cfg := s.cfg
	timeout := time.Duration(cfg.ZKSessionTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout+20*time.Second)
	defer cancel()
	sess := s.deps.coord // owned by the cluster link from here
	if sess == nil {
		var auth string
		if cfg.ZKAuthFile != "" {
			var err error
			if auth, err = coord.ReadAuthFile(cfg.ZKAuthFile); err != nil {
				return err
			}
		}
		zs, err := coord.Dial(ctx, coord.Config{Servers: []string{cfg.Zookeeper}, Root: cfg.ZKRoot, SessionTimeout: timeout, Log: s.log.Named("zk"), Clock: s.clock(), Auth: auth})
		if err != nil {
			return err
		}
		sess = zs
	}
	c := &clusterLink{sess: sess, logs: newLogReporter()}
	if err := s.register(ctx, c); err != nil {
		sess.Close()
		return err
	}
	wctx, wcancel := context.WithCancel(context.Background())
	c.cancel = wcancel
	s.cluster = c
	s.lease.Store(sess.Lease()) // before any map is installed: nothing is served without it
	c.wg.Add(5)
	go func() {
		defer c.wg.Done()
		sess.KeepLease(wctx, cfg.Name)
	}()
	go func() {
		defer c.wg.Done()
		sess.WatchServers(wctx, c.logs.servers)
	}()
	go func() {
		defer c.wg.Done()
		s.runLogReports(wctx, c.logs)
	}()
	go func() {
		defer c.wg.Done()
		sess.WatchMap(wctx, func(m *regionmap.Map) {
			if err := s.install(m); err != nil {
				s.log.Error("region map installed in part", zap.Uint64("version", m.Version), zap.Error(err))
			}
		}, func(err error) { s.log.Error("the region map in zookeeper is invalid; ignored", zap.Error(err)) })
	}()
	go func() {
		defer c.wg.Done()
		s.watchExpiry(wctx, c)
	}()
	return nil
}

// register publishes this server as live, as a new run.
func (s *Server) register(ctx context.Context, c *clusterLink) error {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return s.registerRun(ctx, c, time.Now().UnixNano(), false)
}

// registerRun publishes this server as live as run: its health znode
// first, while its volume cannot store writes (the master must never see
// the run without it and give it a role), then its registration, replacing
// this session's earlier one if replace (a step-down: watchers of the
// server list see it go and come back). Called with c.regMu held.
func (s *Server) registerRun(ctx context.Context, c *clusterLink, run int64, replace bool) error {
	addrs := s.Addrs()
	info := coord.ServerInfo{Server: regionmap.Server{Name: s.cfg.Name, Shm: addrs["shm"], TCP: addrs["tcp"]}, Started: run, HTTP: advertisedHTTP(s.httpAddr, addrs["tcp"])}
	c.started.Store(info.Started)
	h := s.health.cur.Load()
	if h != nil {
		if err := s.publishHealthLocked(ctx, c, h, run); err != nil {
			return fmt.Errorf("region: publish health in zookeeper: %w", err)
		}
	}
	if replace {
		if err := c.sess.Deregister(ctx, s.cfg.Name); err != nil {
			return fmt.Errorf("region: deregister from zookeeper: %w", err)
		}
	}
	if err := c.sess.Register(ctx, info); err != nil {
		return fmt.Errorf("region: register in zookeeper: %w", err)
	}
	s.health.mu.Lock()
	s.health.pending = 0
	if h != nil {
		// The master sees this run unhealthy from the start: a role it
		// gives it later is meant (a region with no other complete copy),
		// and the episode does not step down for it.
		s.health.steppedAt = run
	}
	s.health.mu.Unlock()
	s.log.Info("registered in zookeeper", zap.String("root", c.sess.Root()), zap.Int64("run", run))
	return nil
}

// watchExpiry fences the server when its session expires: the master
// has declared it failed, so it stops serving and replicating as primary
// at once; then it registers again and serves the latest map.
func (s *Server) watchExpiry(ctx context.Context, c *clusterLink) {
	gen := c.sess.Generation()
	for {
		t := s.clock().NewTimer(time.Second) // an expiry during the last round
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-c.sess.Expired():
		case <-t.Chan():
		}
		t.Stop()
		if g := c.sess.Generation(); g == gen {
			continue
		} else {
			gen = g
		}
		s.log.Warn("zookeeper session expired: no longer serving as primary until the map says so again")
		s.fence()
		for ctx.Err() == nil {
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := s.register(rctx, c)
			cancel()
			if err == nil {
				break
			}
			s.log.Warn("registering again failed", zap.Error(err))
		}
		// A fresh read (the watch's last map may predate the failover, and
		// it does not deliver an unchanged map again), retried until it
		// works.
		s.installFresh(ctx, c)
	}
}

// fenceLocked stops serving every region as primary (requests get
// WRONG_REGION) and stops their replication; the next install starts
// from nothing. Refuse first, detach after (depose.go): every hosted
// region refuses writes, then the empty routing is published, then the
// streams close. Run by the controller (fence).
func (s *Server) fenceLocked() {
	old := s.state.Load()
	ids := old.hostedIDs()
	refuse(old, ids)  // before anything that may wait
	s.abortAttaches() // none may go on attaching for the map it dialed for
	s.state.Store(newRouting(&regionmap.Map{}, nil))
	s.deposed(ids)
	s.detach(slices.Collect(maps.Keys(s.streams())))
}

// leaveCluster ends the session (the registration goes at once).
func (s *Server) leaveCluster() {
	if c := s.cluster; c != nil {
		c.cancel()
		c.sess.Close()
		c.wg.Wait()
	}
}

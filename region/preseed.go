package region

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/replication"
)

// Joining backups are seeded while their region serves (docs/failover.md):
// the attach that first names one leaves it out of the stream (pending);
// a goroutine copies the region to it from a snapshot
// (replication.PreSeed), then the region is quiesced and attached again
// with it, which ships only what changed since (the delta), and the join
// is reported. Writes are held only for that last attach.

// preseedsOf returns the pre-seeds done for r's joining backups, or nil
// when joining backups of m are seeded at attach instead, with writes held
// (a static map, or Build-Index: docs/failover.md "Build-Index groups").
func (s *Server) preseedsOf(m *regionmap.Map, r regionmap.Assignment) map[string]*replication.Preseeded {
	if s.cluster == nil || s.replMode(m) != replication.SendIndex {
		return nil
	}
	s.replMu.Lock()
	defer s.replMu.Unlock()
	out := map[string]*replication.Preseeded{}
	rs := s.regionLocked(r.ID)
	for _, name := range r.Joining {
		if j := rs.members[name]; j != nil && j.seeded != nil {
			out[name] = j.seeded
		}
	}
	return out
}

// startPreSeeds starts pre-seeding p's pending backups (those not being
// pre-seeded already). Called with mapMu held, after the attach.
func (s *Server) startPreSeeds(r regionmap.Assignment, p *primaryRepl, er *engine.Region) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	rs := s.regionLocked(r.ID)
	// Results are used once: by this attach (the backup is in the stream
	// now), or never (no longer joining).
	for name, j := range rs.members {
		if !slices.Contains(p.pending, name) {
			j.seeded = nil
		}
	}
	for _, name := range p.pending {
		j := rs.memberLocked(name)
		if j.seeding {
			continue
		}
		j.seeding, j.failedAt = true, 0
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			s.preSeed(r, name, er)
		}()
	}
}

// preSeed copies region r to its joining backup name while the region
// serves, then attaches the backup (a short quiesce). A backup that cannot
// be reached or copied is reported dropped (the master takes it out).
func (s *Server) preSeed(r regionmap.Assignment, name string, er *engine.Region) {
	s.replMu.Lock()
	j := s.regionLocked(r.ID).memberLocked(name)
	s.replMu.Unlock()
	defer func() {
		s.replMu.Lock()
		j.seeding = false
		s.replMu.Unlock()
	}()
	start := s.clock().Now()
	pre, err := s.copyTo(r, name, er)
	if err != nil {
		cur := s.state.Load().region(r.ID)
		if s.closed.Load() || cur == nil || !cur.Serving(s.cfg.Name) || !slices.Contains(cur.Joining, name) {
			return // no longer ours to seed, or no longer joining
		}
		s.log.Warn("pre-seeding a joining backup failed: reported dropped", zap.Uint64("region", r.ID), zap.String("backup", name), zap.Error(err))
		s.replMu.Lock()
		j.seeding = false      // a re-add pre-seeds again
		j.failedAt = cur.Epoch // the map's epoch now: the master acts on that one
		s.replMu.Unlock()
		s.reportDropped(s.bgCtx, *cur, name) // and again from reportDrops while the map lists it
		return
	}
	s.replMu.Lock()
	j.seeded = pre
	s.replMu.Unlock()
	s.log.Info("joining backup pre-seeded while the region served", zap.Uint64("region", r.ID), zap.String("backup", name), zap.Duration("took", s.clock().Since(start)))
	s.attachPreseeded(r.ID, name)
}

// copyTo runs replication.PreSeed to backup name, waiting (up to
// ReplicationConnect) for it to be reachable and to hold the region.
func (s *Server) copyTo(r regionmap.Assignment, name string, er *engine.Region) (*replication.Preseeded, error) {
	m := s.state.Load().m
	srv, ok := m.Server(name)
	if !ok {
		return nil, errors.New("region: joining backup not in the map")
	}
	tr, addr, err := s.replTransport(srv)
	if err != nil {
		return nil, err
	}
	deadline := s.clock().Now().Add(time.Duration(s.cfg.ReplicationConnect))
	for {
		ctx, cancel := context.WithTimeout(s.bgCtx, s.clock().Until(deadline)) // ends at Close too
		rc, err := s.peer(ctx, tr, addr)
		cancel()
		if err == nil {
			link := &ringLink{c: rc, region: r.ID, epoch: r.Epoch}
			pre, err := replication.PreSeed(s.bgCtx, er, link, r.Epoch, 30*time.Second, s.log.Named("replication"))
			if err == nil {
				return pre, nil
			}
			if s.clock().Now().After(deadline) || s.closed.Load() || errors.Is(err, engine.ErrClosed) {
				return nil, err // (closed: the region moved away from this server)
			}
		} else if s.clock().Now().After(deadline) || s.closed.Load() {
			return nil, err
		}
		if !s.pause(s.bgCtx, 100*time.Millisecond) { // the backup may not have installed the map yet
			return nil, s.bgCtx.Err()
		}
	}
}

// attachPreseeded attaches region id again once its pending backup name
// is pre-seeded, if the current map still has name joining and the
// region's stream (of the map's epoch) left it pending. (A map that moved
// on meanwhile attached it already, or made it pending again: then this
// attach is the one that adds it.)
func (s *Server) attachPreseeded(id uint64, name string) {
	s.submit(preseededEvent{id: id, name: name})
}

// attachPreseededLocked is attachPreseeded, run by the controller: its
// old stream is retired in the attach; a failed attach leaves the region
// waiting (attaching), retried by the re-attach tick, like any.
func (s *Server) attachPreseededLocked(id uint64, name string) {
	st := s.state.Load()
	r := st.region(id)
	p := s.streamOf(id)
	if r == nil || p == nil || p.epoch != r.Epoch || !slices.Contains(r.Joining, name) || !slices.Contains(p.pending, name) ||
		st.hosted(id) == nil || st.attaching(id) || s.region(id).job != nil || s.closed.Load() {
		return
	}
	s.attachRegions(st, []uint64{id}, nil)
}

// reportPreFailed reports again the joining backups whose pre-seed
// failed while the map still lists them joining at that epoch (a report
// that failed, or one the master has not acted on yet).
func (s *Server) reportPreFailed() {
	st := s.state.Load()
	var drops []drop
	s.replMu.Lock()
	for _, rs := range s.sortedRegions() {
		for _, name := range slices.Sorted(maps.Keys(rs.members)) {
			j := rs.members[name]
			if j.failedAt == 0 {
				continue
			}
			r := st.region(rs.id)
			if r == nil || r.Epoch != j.failedAt || !slices.Contains(r.Joining, name) {
				j.failedAt = 0
				continue
			}
			drops = append(drops, drop{*r, name})
		}
	}
	s.replMu.Unlock()
	for _, d := range drops {
		s.reportDropped(s.bgCtx, d.r, d.name)
	}
}

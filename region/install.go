package region

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/replication"
)

// Installing a region map: which regions this server serves as primary
// (opened, promoted, or kept), which it backs up, and attaching their
// replication (at start, after a promotion, when a group changes).

// installLocked opens the regions m assigns to this server and switches
// routing to m, carrying out plan's actions (plan.go) in order, then
// starts attaching the regions that wait for their streams (without
// waiting for them: attachAll does). A region this
// server backed up and m names it primary of is promoted (fenced from the
// old primary, its buffer persisted, L0 rebuilt). Regions no longer
// assigned stay in the volume but are no longer served, and stop
// replicating. In a managed cluster a region that cannot be opened is
// logged and left out (the master sees it unserved); a standalone map
// must open whole. Run by the controller (controller.go).
func (s *Server) installLocked(m *regionmap.Map) error {
	old := s.state.Load()
	if (old != nil && m.Version <= old.m.Version) || s.closed.Load() {
		return nil
	}
	known := true
	if c := s.cluster; c != nil && !c.knows(m, s.cfg.Name) {
		// The master has not published this run yet: whatever roles the
		// map gives the server were for an earlier run.
		s.log.Info("the region map is not for this run of the server yet: no roles", zap.Uint64("version", m.Version))
		known = false
	}
	acts := plan(m, s.cfg.Name, known, s.cluster != nil, s.holdings(m))
	next := newRouting(m, map[uint64]route{})
	var errs []error
	var deposing []uint64
	ers := map[uint64]*engine.Region{} // the role steps' handles, for the serving steps
	for _, a := range acts {
		switch a.step {
		case stepSupersede:
			s.supersede(a.region)
			continue
		case stepDepose:
			deposing = append(deposing, a.region)
			continue
		}
		if len(deposing) > 0 {
			// Regions m moves away stop being served before anything
			// else happens (depose.go: refuse first, detach after), in
			// particular before one of them is reopened here as a backup.
			old, deposing = s.depose(deposing), nil
		}
		if err := s.apply(m, a, old, next, ers); err != nil {
			err = fmt.Errorf("region %d: %w", a.region, err)
			if s.cfg.Zookeeper == "" {
				return err
			}
			s.log.Error("region not installed", zap.Uint64("region", a.region), zap.Error(err))
			errs = append(errs, err)
		}
	}
	if len(deposing) > 0 {
		old = s.depose(deposing)
	}
	s.state.Store(next)
	s.setRoles(next.hostedIDs(), rolePrimary) // primaries once published: a failed install leaves no role
	if s.cluster != nil {
		s.cluster.logs.poke() // m may make this server a backup of a failed primary
	}
	s.stopDeposed(old, next)
	s.log.Info("region map installed", zap.Uint64("version", m.Version), zap.Int("hosted", len(next.hostedIDs())), zap.Stringers("plan", acts))
	if len(s.rings) > 0 { // else not listening yet: Start attaches after listen
		// Without waiting: the next map must not wait for this one's
		// backups.
		s.attachLocked(nil)
	}
	return errors.Join(errs...)
}

// holdings is what the server holds of each region, as plan reads it:
// its role, its primary stream, its attach in flight, and for a region m names it primary of that it
// neither hosts nor backs up, whether the volume holds a copy. Called
// with mapMu held.
func (s *Server) holdings(m *regionmap.Map) map[uint64]held {
	hs := map[uint64]held{}
	s.replMu.Lock()
	for id, rs := range s.regions {
		h := held{role: rs.role}
		if p := rs.stream; p != nil {
			h.stream, h.epoch, h.group = true, p.epoch, p.group
		}
		if rs.job != nil {
			h.job = &rs.job.r
		}
		hs[id] = h
	}
	s.replMu.Unlock()
	for _, r := range m.Regions {
		if !r.Serving(s.cfg.Name) || hs[r.ID].role != roleNone {
			continue
		}
		_, primary := s.vol.Region(r.ID)
		if _, backup := s.vol.Backup(r.ID); primary || backup {
			h := hs[r.ID]
			if h.copy, h.copyErr = s.vol.IsCopy(r.ID); h.copyErr != nil {
				h.copyErr = fmt.Errorf("open: %w", h.copyErr)
			}
			hs[r.ID] = h
		}
	}
	return hs
}

// supersede cancels region id's attach in flight (attach.go). Called
// with mapMu held.
func (s *Server) supersede(id uint64) {
	rs := s.region(id)
	j := rs.job
	if j == nil {
		return
	}
	j.abort()
	rs.job = nil
	s.log.Info("attach superseded by a newer map", zap.Uint64("region", id), zap.Uint64("epoch", j.r.Epoch))
}

// apply carries out one role or serving step of plan for map m into
// next (ers: the handles the role steps opened, by region). Called with
// mapMu held.
func (s *Server) apply(m *regionmap.Map, a action, old, next *routing, ers map[uint64]*engine.Region) error {
	r := m.Region(a.region)
	rs := s.region(a.region)
	switch a.step {
	case stepFail:
		return a.err
	case stepOpenBackup:
		_, err := s.openBackup(m, *r)
		return err
	case stepPromote:
		er, err := s.promote(*r, s.backupOf(r.ID))
		if err != nil {
			return err
		}
		// A new handle, held until attached; a Build-Index one is an
		// ordinary region whose compactions and GC run: quiesced for its
		// attach like a serving one.
		rs.resumed = s.replMode(m) == replication.BuildIndex
		ers[r.ID] = er
	case stepKeep, stepReattach:
		// Still its primary. A group change under a new epoch
		// (reattach) gets a new stream: attachLocked quiesces the region,
		// retires the old stream, seeds the joining backups.
		ers[r.ID] = old.hosted(r.ID)
	case stepIncomplete:
		// Named primary while it was down, as a backup: the newest writes
		// its primary acknowledged were in the replication buffer the
		// restart lost. Managed, it is not served (the master promotes
		// only complete copies; this one is not).
		s.log.Error("named primary of a region this server holds an incomplete copy of (it backed the region up and restarted: its replication buffer is gone): not serving it",
			zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch))
		next.routes[r.ID] = route{how: routeIncomplete}
	case stepOpen, stepOpenCopy:
		var er *engine.Region
		var err error
		_, isBackup := s.vol.Backup(r.ID) // a copy: promoted below (open-copy)
		switch {
		case isBackup && a.step == stepOpen:
			return fmt.Errorf("open: the volume holds region %d as a backup", r.ID)
		case !isBackup:
			er, _, err = s.vol.OpenRegion(engine.RegionDesc{ID: r.ID, Epoch: r.Epoch})
		}
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		if a.step == stepOpenCopy {
			// A static map is the operator's word.
			s.log.Warn("static map: promoting a copy without its replication buffer", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch))
			if isBackup {
				if er, err = s.vol.PromoteBackup(r.ID, r.Epoch, nil); err != nil {
					return fmt.Errorf("open: %w", err)
				}
				s.markPromoted(r.ID)
				rs.resumed = false
			} else if err := s.vol.SetFollower(r.ID, false); err != nil {
				return fmt.Errorf("open: %w", err)
			}
		}
		s.startBuildLog(r.ID, nil) // a new primaryship
		ers[r.ID] = er
	case stepAttach, stepAlone, stepServe:
		er := ers[r.ID]
		if er == nil {
			return nil // its role step failed (reported)
		}
		if a.step == stepAttach {
			next.routes[r.ID] = route{er: er, how: routeAttaching}
			return nil
		}
		next.routes[r.ID] = s.servedRoute(r.ID, er, a.step == stepServe)
		if a.step == stepAlone {
			// No backups and no stream: it serves alone, its only copy,
			// explicitly (a handle deposed earlier still refuses).
			s.serveAlone(m, *r, er)
		}
		er.Resume()
		rs.resumed = true
	default:
		return fmt.Errorf("region: plan step %s not carried out", a.step)
	}
	return nil
}

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// attachLocked starts attaching the waiting regions (those without an
// attach in flight); each is published attached at its step 3
// (attach.go). b, if set, gets the outcome of every waiting region's
// attach, those in flight included. Run by the controller.
func (s *Server) attachLocked(b *attachBatch) {
	defer b.seal()
	st := s.state.Load()
	waiting := st.attachingIDs()
	if len(waiting) == 0 || s.closed.Load() {
		return
	}
	// Regions not serving yet (promoted, just opened) first: they wait for
	// nothing, while a serving one's quiesce may wait for a compaction
	// stuck on a hung backup.
	ids := make([]uint64, 0, len(waiting))
	resumed := map[uint64]bool{}
	for _, id := range waiting {
		rs := s.region(id)
		if j := rs.job; j != nil {
			j.wait(b)
			continue
		}
		ids = append(ids, id)
		resumed[id] = rs.resumed
	}
	slices.SortFunc(ids, func(a, b uint64) int {
		if resumed[a] != resumed[b] {
			if resumed[b] {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	s.attachRegions(st, ids, b)
}

// publishAttached publishes the routing now published (an install may
// have replaced st while the backups were dialed) without the regions
// attached from st in attaching. Called with mapMu held.
func (s *Server) publishAttached(st *routing, attached map[uint64]bool) {
	if len(attached) == 0 {
		return
	}
	cur := s.state.Load()
	served := map[uint64]route{}
	for id := range attached {
		if er := cur.hosted(id); er != nil && er == st.hosted(id) && cur.attaching(id) {
			served[id] = s.servedRoute(id, er, true)
		}
	}
	s.state.Store(cur.with(served))
}

// servedRoute is the route of hosted region id served by er, confirming
// its reads with the region's stream when streamed (the stream its
// attach installed) and the server is managed. It takes replMu.
func (s *Server) servedRoute(id uint64, er *engine.Region, streamed bool) route {
	rt := route{er: er, how: routeServed}
	if !streamed || s.cluster == nil {
		return rt
	}
	s.replMu.Lock()
	if p := s.regionLocked(id).stream; p != nil && p.shipper != nil {
		rt.confirm = p.shipper
	}
	s.replMu.Unlock()
	return rt
}

// reattach retries, every second, the regions whose replication could not
// attach (they stay unavailable meanwhile), until the server closes.
func (s *Server) reattach(ctx context.Context) {
	t := s.clock().NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		s.reportDrops()
		if len(s.state.Load().attachingIDs()) == 0 {
			continue
		}
		s.submit(attachEvent{})
	}
}

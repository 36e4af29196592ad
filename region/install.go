package region

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
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

// install opens the regions m assigns to this server and switches routing
// to m. A region this server backed up and m names it primary of is
// promoted (fenced from the old primary, its buffer persisted, L0
// rebuilt). Regions no longer assigned stay in the volume but are no
// longer served, and stop replicating. In a managed cluster a region that
// cannot be opened is logged and left out (the master sees it unserved);
// a standalone map must open whole.
func (s *Server) install(m *regionmap.Map) error {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	old := s.state.Load()
	if (old != nil && m.Version <= old.m.Version) || s.closed.Load() {
		return nil
	}
	next := &routing{m: m, hosted: map[uint64]*engine.Region{}, attaching: map[uint64]bool{}}
	var errs []error
	regions := m.Regions
	known := true
	if c := s.cluster; c != nil && !c.knows(m, s.cfg.Name) {
		// The master has not published this run yet: whatever roles the
		// map gives the server were for an earlier run.
		s.log.Info("the region map is not for this run of the server yet: no roles", zap.Uint64("version", m.Version))
		regions, known = nil, false
	}
	// Attaches in flight for what m changes end now (attach.go): none
	// of them may hold a region still or use a connection of the old map.
	s.abortAttaches(m, known)
	// Regions m moves away stop being served before anything else happens
	// (depose.go: refuse first, detach after), in particular before one of
	// them is reopened here as a backup.
	old = s.depose(deposed(old, m, s.cfg.Name, known))
	for _, r := range regions {
		if err := s.installRegion(m, r, old, next); err != nil {
			err = fmt.Errorf("region %d: %w", r.ID, err)
			if s.cfg.Zookeeper == "" {
				return err
			}
			s.log.Error("region not installed", zap.Uint64("region", r.ID), zap.Error(err))
			errs = append(errs, err)
		}
	}
	s.state.Store(next)
	if s.cluster != nil {
		s.cluster.logs.poke() // m may make this server a backup of a failed primary
	}
	s.stopDeposed(old, next)
	s.log.Info("region map installed", zap.Uint64("version", m.Version), zap.Int("hosted", len(next.hosted)))
	switch {
	case len(s.rings) == 0: // not listening yet: Start attaches after listen
	case s.cluster != nil:
		// Managed: the next map must not wait for this one's backups.
		s.attachSoon()
	default:
		errs = append(errs, s.attachLocked())
	}
	return errors.Join(errs...)
}

// installRegion opens one region of m into next.
func (s *Server) installRegion(m *regionmap.Map, r regionmap.Region, old, next *routing) error {
	if slices.Contains(r.Group(), s.cfg.Name) {
		_, err := s.openBackup(m, r)
		return err
	}
	if r.Primary != s.cfg.Name {
		return nil
	}
	s.replMu.Lock()
	p, attached := s.primaries[r.ID]
	b := s.backups[r.ID]
	s.replMu.Unlock()
	var er *engine.Region
	switch {
	case b != nil:
		var err error
		if er, err = s.promote(r, b); err != nil {
			return err
		}
		delete(s.resumed, r.ID) // a new handle, held until attached
		if s.replMode(m) == replication.BuildIndex {
			// An ordinary region whose compactions and GC run: quiesced
			// for its attach like a serving one.
			s.resumed[r.ID] = true
		}
	case old != nil && old.hosted[r.ID] != nil:
		// Still its primary: a group change under a new epoch needs
		// nothing here (dead backups were dropped by the shipper already;
		// the commands' epoch stays the stream's).
		er = old.hosted[r.ID]
		if attached && (p.epoch != r.Epoch || !sameSet(p.group, r.Group())) {
			// Backups joined or left (the epoch grows with every group
			// change, also one whose removal and return this server never
			// saw apart): re-attach (attachLocked quiesces the region,
			// retires the old stream, seeds the joining ones).
			attached = false
		}
	default:
		var err error
		er, _, err = s.vol.OpenRegion(engine.RegionDesc{ID: r.ID, Epoch: r.Epoch})
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		copied, err := s.vol.IsCopy(r.ID)
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
		if copied {
			// Named primary while it was down, as a backup: the newest
			// writes its primary acknowledged were in the replication
			// buffer the restart lost. Managed, it is not served (the
			// master promotes only complete copies; this one is not);
			// a static map is the operator's word.
			if s.cluster != nil {
				s.log.Error("named primary of a region this server holds an incomplete copy of (it backed the region up and restarted: its replication buffer is gone): not serving it",
					zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch))
				if next.incomplete == nil {
					next.incomplete = map[uint64]bool{}
				}
				next.incomplete[r.ID] = true
				return nil
			}
			s.log.Warn("static map: promoting a copy without its replication buffer", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch))
			if er.IsBackup() {
				if er, err = s.vol.PromoteBackup(r.ID, r.Epoch, nil); err != nil {
					return fmt.Errorf("open: %w", err)
				}
				s.markPromoted(r.ID)
				delete(s.resumed, r.ID)
			} else if err := s.vol.SetFollower(r.ID, false); err != nil {
				return fmt.Errorf("open: %w", err)
			}
		}
		s.startBuildLog(r.ID, nil) // a new primaryship
	}
	if !attached && (len(r.Group()) > 0 || p != nil) { // p: a stream to retire (an emptied group)
		next.attaching[r.ID] = true
	}
	next.hosted[r.ID] = er
	if !next.attaching[r.ID] {
		if !attached {
			// No backups and no stream: it serves alone, its only copy,
			// explicitly (a handle deposed earlier still refuses).
			s.serveAlone(m, r, er)
		}
		er.Resume()
		s.resumed[r.ID] = true
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

// attachAll attaches replication to the hosted regions that wait for it.
func (s *Server) attachAll() error {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	return s.attachLocked()
}

// attachLocked attaches the waiting regions (those without an attach in
// flight), then publishes routing without the ones attached. Called with
// mapMu held; it releases mapMu while it dials the backups (attach.go).
func (s *Server) attachLocked() error {
	st := s.state.Load()
	if len(st.attaching) == 0 || s.closed.Load() {
		return nil
	}
	// Regions not serving yet (promoted, just opened) first: they wait for
	// nothing, while a serving one's quiesce may wait for a compaction
	// stuck on a hung backup.
	ids := make([]uint64, 0, len(st.attaching))
	for id := range st.attaching {
		if s.attachJobs[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b uint64) int {
		if s.resumed[a] != s.resumed[b] {
			if s.resumed[b] {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	_, err := s.attachRegions(st, ids)
	return err
}

// publishAttached publishes the routing now published (an install may
// have replaced st while the backups were dialed) without the regions
// attached from st in attaching. Called with mapMu held.
func (s *Server) publishAttached(st *routing, attached map[uint64]bool) {
	if len(attached) == 0 {
		return
	}
	cur := s.state.Load()
	next := *cur
	next.attaching = maps.Clone(cur.attaching)
	for id := range attached {
		if cur.hosted[id] == st.hosted[id] {
			delete(next.attaching, id)
		}
	}
	s.state.Store(&next)
}

// reattach retries, every second, the regions whose replication could not
// attach (they stay unavailable meanwhile), until the server closes.
func (s *Server) reattach(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.reportDrops()
		if len(s.state.Load().attaching) == 0 {
			continue
		}
		s.mapMu.Lock()
		if err := s.attachLocked(); err != nil && !onlySuperseded(err) {
			s.log.Warn("regions still waiting for their backups", zap.Error(err))
		}
		s.mapMu.Unlock()
	}
}

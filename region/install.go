package region

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/region/regionmap"
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
	if c := s.cluster; c != nil && !c.knows(m, s.cfg.Name) {
		// The master has not published this run yet: whatever roles the
		// map gives the server were for an earlier run.
		s.log.Info("the region map is not for this run of the server yet: no roles", zap.Uint64("version", m.Version))
		regions = nil
	}
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
	s.stopDeposed(next)
	s.state.Store(next)
	s.log.Info("region map installed", zap.Uint64("version", m.Version), zap.Int("hosted", len(next.hosted)))
	if len(s.rings) > 0 { // listening: backups can be reached (Start attaches after listen)
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
		if err == nil && er.IsBackup() {
			// Named primary while it was down: its buffer is gone, its
			// adopted log is what it has.
			s.log.Warn("promoting a backup region without its buffer", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch))
			er, err = s.vol.PromoteBackup(r.ID, r.Epoch, nil)
			s.markPromoted(r.ID)
			delete(s.resumed, r.ID)
		}
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
	}
	if !attached && (len(r.Group()) > 0 || p != nil) { // p: a stream to retire (an emptied group)
		next.attaching[r.ID] = true
	}
	next.hosted[r.ID] = er
	if !attached && !next.attaching[r.ID] {
		s.serveAlone(m, r, er) // no group, no stream: the only copy
	}
	if !next.attaching[r.ID] {
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

// attachLocked attaches the waiting regions, then publishes routing
// without them in attaching. Called with mapMu held.
func (s *Server) attachLocked() error {
	st := s.state.Load()
	if len(st.attaching) == 0 || s.closed.Load() {
		return nil
	}
	still := map[uint64]bool{}
	var errs []error
	// Regions not serving yet (promoted, just opened) first: they wait for
	// nothing, while a serving one's quiesce may wait for a compaction
	// stuck on a hung backup.
	ids := make([]uint64, 0, len(st.attaching))
	for id := range st.attaching {
		ids = append(ids, id)
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
	for _, id := range ids {
		if err := s.attachOne(st, id); err != nil {
			still[id] = true
			errs = append(errs, err)
		}
	}
	next := *st
	next.attaching = still
	s.state.Store(&next)
	return errors.Join(errs...)
}

// attachOne attaches region id of st (hosted there). A serving region is
// quiesced and its old stream retired first. Called with mapMu held.
func (s *Server) attachOne(st *routing, id uint64) error {
	r := st.m.Region(id)
	er := st.hosted[id]
	var release func()
	if s.resumed[id] {
		// A serving region (its group changed, or its attach is retried):
		// make it still and end the old stream.
		var err error
		if release, err = er.Quiesce(); err != nil {
			return fmt.Errorf("region: quiesce region %d: %w", id, err)
		}
		s.retire(id)
	}
	if len(r.Group()) == 0 {
		// The master left it without backups: it serves alone, its only
		// copy.
		s.serveAlone(st.m, *r, er)
		if release != nil {
			release()
		}
		er.Resume()
		s.resumed[id] = true
		s.log.Warn("region has no backups left: serving without replication", zap.Uint64("region", id), zap.Uint64("epoch", r.Epoch))
		return nil
	}
	p, err := s.attach(st.m, *r, er)
	if err != nil && release != nil {
		// The old stream is retired: until an attach succeeds no write may
		// be acknowledged without its backups (the writers the quiesce
		// held go on at release, before the caller marks it attaching).
		er.SetReplicator(refuseWrites{})
	}
	if release != nil {
		release()
	}
	if err != nil {
		return fmt.Errorf("region: attach replication of region %d: %w", id, err)
	}
	s.replMu.Lock()
	s.primaries[id] = p
	s.replMu.Unlock()
	er.Resume()
	s.resumed[id] = true
	s.reportJoins(*r, p)
	s.startPreSeeds(*r, p, er)
	return nil
}

// refuseWrites is the replicator of a region between a retired stream and
// the next: no write counts as replicated.
type refuseWrites struct{}

func (refuseWrites) WaitReplicated(uint64) error { return replication.ErrNoBackups }

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
		if err := s.attachLocked(); err != nil {
			s.log.Warn("regions still waiting for their backups", zap.Error(err))
		}
		s.mapMu.Unlock()
	}
}

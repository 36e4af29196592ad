package region

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/replication"
)

// Failover on the region server (docs/failover.md). The master decides;
// the server acts on the map: named primary of a region it backs up, it
// fences the old primary off, promotes its copy and, at its first attach,
// has its backups rebase their log maps onto its segments.

// promote turns backup b into the primary of r. Called with mapMu held;
// it waits for a hello of the region in progress (a buffer fold).
func (s *Server) promote(r regionmap.Assignment, b *backupRegion) (*engine.Region, error) {
	start := s.clock().Now()
	b.hello.Lock()
	defer b.hello.Unlock()
	s.replMu.Lock()
	b.fence() // from here no WRITE of the old primary completes
	s.replMu.Unlock()
	er, err := b.rep.Promote(r.Epoch)
	if err != nil {
		return nil, err
	}
	s.startBuildLog(r.ID, b.rep.Handover())
	s.replMu.Lock()
	rs := s.regionLocked(r.ID)
	rs.backup, rs.reported, rs.role = nil, 0, roleNone // primary once served (install's serving step)
	s.replMu.Unlock()
	b.rep.Close()
	b.buf.Deregister()
	s.markPromoted(r.ID)
	s.log.Info("promoted to primary", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch), zap.Duration("took", s.clock().Since(start)))
	return er, nil
}

// markPromoted remembers that region id's backups must rebase at its next
// attach (once: a rebase applied twice would drop the backups' log).
func (s *Server) markPromoted(id uint64) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	s.regionLocked(id).promoted = true
}

// takeRebase returns the rebase pairs a promoted region's first attach
// sends, and forgets the promotion.
func (s *Server) takeRebase(id uint64, er *engine.Region) []replication.RebasePair {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	rs := s.regions[id]
	if rs == nil || !rs.promoted {
		return nil
	}
	rs.promoted = false
	return replication.PromotedPairs(er)
}

// stopDeposed stops replicating the regions next no longer hosts that
// still have a stream (install deposes the regions its map moves away
// before it starts; this catches any other). Their handles in old refuse
// first. Called with mapMu held, after next is published.
func (s *Server) stopDeposed(old, next *routing) {
	var ids []uint64
	s.replMu.Lock()
	for id, rs := range s.regions {
		if next.hosted(id) == nil && (rs.stream != nil || rs.role == rolePrimary) {
			ids = append(ids, id)
		}
	}
	s.replMu.Unlock()
	s.deposed(ids)
	if len(ids) == 0 {
		return
	}
	if old != nil {
		refuse(old, ids)
	}
	s.detach(ids)
}

// reportJoins tells the master which joining backups of r the attach
// brought in sync.
func (s *Server) reportJoins(r regionmap.Assignment, p *primaryRepl) {
	c := s.cluster
	if c == nil || len(r.Joining) == 0 {
		return
	}
	for _, name := range r.Joining {
		if p.mirror == nil || p.mirror.IsDropped(name) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.sess.Report(ctx, coord.JoinReport{Region: r.ID, Epoch: r.Epoch, Server: name})
		cancel()
		if err != nil {
			s.log.Warn("reporting a joined backup failed", zap.Uint64("region", r.ID), zap.String("backup", name), zap.Error(err))
		}
	}
}

// takeStream takes a serving region's replication stream out of service
// before a re-attach: it is no longer the region's (er) and its
// replicator refuses from here; the caller retires or closes it. Called
// with mapMu held and the region quiesced. nil: the region had none.
func (s *Server) takeStream(id uint64, er *engine.Region) *primaryRepl {
	s.replMu.Lock()
	rs := s.regionLocked(id)
	p := rs.stream
	rs.stream = nil
	s.replMu.Unlock()
	if p != nil && p.shipper != nil {
		er.ReplaceReplicator(p.shipper, replication.Refuse{Err: replication.ErrStreamClosed})
	}
	return p
}

// retireSlot orders the retires of region id's old streams with the
// attaches after them: it returns the retire still running for the
// region, if any (the caller's job waits for it before it retires its own
// stream or dials), and, when the caller has a stream to retire (own), a
// channel it closes once that one is closed. Called with mapMu held.
func (s *Server) retireSlot(id uint64, own bool) (after <-chan struct{}, retired chan struct{}) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	rs := s.regionLocked(id)
	after = rs.retiring
	if own {
		retired = make(chan struct{})
		rs.retiring = retired
	}
	return after, retired
}

// retireOld is the start of step 2 (attach.go) for j, without mapMu: once
// an earlier retire of the region ended, the stream the region served
// with hands the commands it still has queued to its backups (bounded by
// retireDrain and j's context) and closes. The new stream's check and
// catch-up give the backups whatever the old one had not; a backup that
// missed a queued compaction would fail that check and be seeded whole.
func (s *Server) retireOld(j *attachJob) {
	if j.after != nil {
		<-j.after
	}
	if j.old == nil {
		return
	}
	ctx, cancel := context.WithTimeout(j.ctx, retireDrain)
	err := j.old.retire(ctx)
	cancel()
	if err != nil {
		s.log.Warn("re-attach: the old stream's queued commands did not all reach its backups", zap.Uint64("region", j.id), zap.Error(err))
	}
	close(j.retired)
	s.replMu.Lock()
	if rs := s.regionLocked(j.id); rs.retiring == j.retired {
		rs.retiring = nil
	}
	s.replMu.Unlock()
}

// reportDropped tells the master that region r's stream dropped backup
// name at r's epoch (the master takes it out of the group; until then the
// region acknowledges no write), for at most 10 s or until ctx ends.
func (s *Server) reportDropped(ctx context.Context, r regionmap.Assignment, name string) {
	c := s.cluster
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.sess.Report(ctx, coord.DropReport{Region: r.ID, Epoch: r.Epoch, Server: name}); err != nil {
		s.log.Warn("reporting a dropped backup failed", zap.Uint64("region", r.ID), zap.String("backup", name), zap.Error(err))
		return
	}
	s.log.Info("reported a dropped backup to the master", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch), zap.String("backup", name))
}

// drop names a backup to report dropped from region r.
type drop struct {
	r    regionmap.Assignment
	name string
}

// reportDrops reports again every backup a stream dropped that the map
// still lists (a report that failed, or one the master has not acted on:
// the region refuses writes until it does). Reports are idempotent.
func (s *Server) reportDrops() {
	if s.cluster == nil {
		return
	}
	s.reportPreFailed()
	st := s.state.Load()
	var drops []drop
	for id, p := range s.streams() {
		r := st.region(id)
		if r == nil || r.Epoch != p.epoch || p.mirror == nil {
			continue
		}
		for name := range p.mirror.Dropped() {
			if slices.Contains(r.Group(), name) {
				drops = append(drops, drop{*r, name})
			}
		}
	}
	for _, d := range drops {
		s.reportDropped(s.bgCtx, d.r, d.name)
	}
}

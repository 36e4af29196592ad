package region

import (
	"slices"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/rdma"
)

// Failure detection by the backups (docs/failover.md, "Failure
// detection"). A primary's death shows at its backups at once: the
// kernel closes its sockets, and the connections its mirror WRITEs over
// end without the goodbye a Close sends (rdma.ErrPeerLost; over tcp also
// the dead-peer deadline). When every connection of a region's primary
// ended so, the backup fences that primary off (its buffer revoked: no
// WRITE of it completes from then on, so it acknowledges no write and
// confirms no read) and reports the loss with its log position
// (coord.LostReport, then coord.LogReport). When every live backup of the
// region did, the master promotes the most complete without waiting for
// the primary's ZooKeeper session to expire. A primary that is alive
// after all (a cut network) has lost nothing it acknowledged: it could
// acknowledge only what every backup held; its reads fail their
// confirmation (replication.Shipper.Confirm) from the fence on.

// primaryLost handles the end without a goodbye of qp, a primary's
// connection to one of this server's backup regions: once no connection
// of that region's primary is left, the primary is fenced off and the
// loss recorded for the log reporter. A managed server only: with a
// static map nobody would act on the report.
func (s *Server) primaryLost(qp rdma.QP) {
	if s.cluster == nil {
		return
	}
	s.replMu.Lock()
	var id uint64
	var b *backupRegion
	for rid, rs := range s.regions {
		if rs.backup != nil && slices.Contains(rs.backup.qps, qp) {
			id, b = rid, rs.backup
			break
		}
	}
	if b == nil || b.revoked {
		s.replMu.Unlock()
		return // not a current connection (fenced, replaced)
	}
	primary := b.primary
	if primary.Name == "" {
		// The hello came before this server's map named its sender: the
		// map now may (an epoch of a region has one primary).
		if st := s.state.Load(); st != nil {
			primary, _ = helloSender(st.m, id, b.epoch)
		}
	}
	if primary.Name == "" {
		s.replMu.Unlock()
		return // its loss cannot be reported against a run
	}
	for _, q := range b.qps {
		if q.Err() == nil {
			s.replMu.Unlock()
			return // another connection of the primary is up
		}
	}
	b.fence()
	b.lost, b.lostEpoch = primary, b.epoch
	epoch := b.epoch
	s.replMu.Unlock()
	s.log.Warn("the region's primary was lost: fenced it off, reporting", zap.Uint64("region", id),
		zap.String("primary", primary.Name), zap.Uint64("epoch", epoch))
	s.cluster.logs.poke()
}

// lostPrimary is a backup's record of a primary it lost: its run, and
// the epoch of the connections that ended.
type lostPrimary struct {
	srv   regionmap.Server
	epoch uint64
}

// lostRun reports whether lost names the run map m gives region r's
// primary, at r's epoch: a loss of older connections says nothing of the
// group the map has now (this backup alone may have lost them, and the
// primary dropped it since).
func lostRun(m *regionmap.Map, r regionmap.Assignment, lost lostPrimary) bool {
	if lost.srv.Name == "" || lost.srv.Name != r.Primary || lost.epoch != r.Epoch {
		return false
	}
	mine, ok := m.Server(r.Primary)
	return ok && samePrimary(mine, lost.srv)
}

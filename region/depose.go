package region

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/replication"
)

// Deposing: a server stops serving a region as primary (the map names
// another primary or drops the region, the map is not for this run, the
// session expired, the server closes). Refuse first, detach after:
//
//  1. the region's engine handle gets a refusing replicator, so a write
//     appended from then on (a request routed before step 2) is refused,
//     and a read of its L0 fails too;
//  2. routing stops sending the region requests (published);
//  3. only then its replication stream is closed; writes still waiting on
//     it fail unless their backups held them.
//
// Closing the stream first would leave the region with no replicator, and
// a write appended in between would be acknowledged on this node only.

// errDeposed is the refusal of a region no longer served here as primary.
var errDeposed = fmt.Errorf("%w: the region is no longer served here as primary", replication.ErrStreamClosed)

// without returns a copy of st that serves none of ids: their requests
// get StatusUnavailable until the next routing is published (a client on
// the same map retries; WRONG_REGION at the same version would make it
// give up).
func (st *routing) without(ids []uint64) *routing {
	rs := map[uint64]route{}
	for _, id := range ids {
		rs[id] = route{how: routeWithdrawn}
	}
	return st.with(rs)
}

// depose stops serving regions ids of the published routing as primary,
// in the order above, and returns the routing it published. Called with
// mapMu held.
func (s *Server) depose(ids []uint64) *routing {
	st := s.state.Load()
	if len(ids) == 0 {
		return st
	}
	refuse(st, ids)
	next := st.without(ids)
	s.state.Store(next)
	s.deposed(ids)
	s.detach(ids)
	return next
}

// deposed records that regions ids are no longer primaries here (their
// handles refuse and routing no longer serves them). Called with mapMu
// held.
func (s *Server) deposed(ids []uint64) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	for _, id := range ids {
		if rs := s.regions[id]; rs != nil && rs.role == rolePrimary {
			rs.role = roleNone
		}
	}
}

// refuse makes the engine regions ids hosted in st refuse every write
// and L0 read from now on (step 1).
func refuse(st *routing, ids []uint64) {
	for _, id := range ids {
		if er := st.hosted(id); er != nil {
			er.SetReplicator(replication.Refuse{Err: errDeposed})
		}
	}
}

// detach closes the replication streams of regions ids (step 3: their
// regions already refuse). Called with mapMu held.
func (s *Server) detach(ids []uint64) {
	var ps []*primaryRepl
	s.replMu.Lock()
	for _, id := range ids {
		if rs := s.regions[id]; rs != nil && rs.stream != nil {
			ps = append(ps, rs.stream)
			rs.stream = nil
			s.log.Info("no longer primary: replication stopped", zap.Uint64("region", id))
		}
	}
	s.replMu.Unlock()
	for _, p := range ps {
		p.close()
	}
}

package region

import (
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// The read lease (docs/failover.md, "Read contract"). A managed server
// serves a region as primary (reads and writes) only while the lease of
// its ZooKeeper session holds (coord.Lease): then the session cannot have
// expired, so the master has not promoted another primary of the region.
// A server paused past its session resumes with its lease lapsed and
// answers StatusUnavailable until it learns of the expiry and the new map
// (clients retry, and follow a newer map). Standalone servers have no
// lease.
//
// Requests are checked twice: at routing (route), and reads once more
// after reading (leased): a pause between the routing check and the read
// would otherwise return a value overwritten meanwhile by a new primary.
// A read whose second check passes read while the lease held.

// leaseHolds reports whether the server may serve as primary now.
func (s *Server) leaseHolds() bool {
	l := s.lease.Load()
	return l == nil || l.Holds()
}

// noLease is the reply of a server whose lease does not hold.
func (s *Server) noLease() ring.Reply {
	return errorReply(wire.StatusUnavailable, "server %s: its zookeeper session is not confirmed alive (read lease lapsed): retry, with a newer map", s.cfg.Name)
}

// leased wraps a read handler: an answer (a value, or not found) is given
// only if the lease still holds after the read.
func (s *Server) leased(h ring.HandlerFunc) ring.HandlerFunc {
	return func(req *ring.ServerRequest) ring.Reply {
		rep := h(req)
		if (rep.Status == 0 || rep.Status == wire.StatusNotFound) && !s.leaseHolds() {
			return s.noLease()
		}
		return rep
	}
}

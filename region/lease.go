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
//
// The lease covers promotions after a session's expiry. The master also
// promotes a backup while the primary's session lives, when every live
// backup lost the primary's connections and fenced it off (lost.go). So a
// managed primary with backups also confirms every read after reading it
// (replication.Shipper.Confirm: a probe every backup of its stream
// completes only while it has not fenced the primary off), with the
// stream of the route published when the read is confirmed: a read so
// confirmed happened before any of those backups could be promoted.
// Promotions at older epochs cannot happen any more (the map moved on),
// and a backup outside that stream is joining (never promoted) or was
// dropped (the stream fails every confirmation until the map leaves it
// out).

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
// only if the lease still holds after the read and, managed, the region's
// route is the one published before the read (same handle, same stream)
// and its backups confirm this server is still the primary (confirmRead).
func (s *Server) leased(h ring.HandlerFunc) ring.HandlerFunc {
	return func(req *ring.ServerRequest) ring.Reply {
		pre := s.state.Load().routes[req.Region]
		rep := h(req)
		if rep.Status != 0 && rep.Status != wire.StatusNotFound {
			return rep
		}
		if rej := s.confirmRead(req.Region, pre); rej != nil {
			return *rej
		}
		return rep
	}
}

// leasedShort is leased for a ring.ShortFunc. A managed region whose reads
// are confirmed with its backups is declined (to a worker: a confirmation
// waits for the transport's completions, which a spinner must not).
func (s *Server) leasedShort(h ring.ShortFunc) ring.ShortFunc {
	return func(req *ring.ServerRequest) (ring.Reply, bool) {
		pre := s.state.Load().routes[req.Region]
		if s.cluster != nil && pre.confirm != nil {
			return ring.Reply{}, false
		}
		rep, ok := h(req)
		if !ok || (rep.Status != 0 && rep.Status != wire.StatusNotFound) {
			return rep, ok
		}
		if rej := s.confirmRead(req.Region, pre); rej != nil {
			return *rej, true
		}
		return rep, true
	}
}

// confirmRead is the check of a read of region id done through route pre
// (published before the read): nil if it may be answered. The lease must
// hold; managed, the route published now must be pre (a region handed
// over, re-attached or promoted anew meanwhile gets a new handle or a new
// stream: UNAVAILABLE, the client retries), and the stream confirms.
func (s *Server) confirmRead(id uint64, pre route) *ring.Reply {
	if !s.leaseHolds() {
		r := s.noLease()
		return &r
	}
	if s.cluster == nil {
		return nil
	}
	cur := s.state.Load().routes[id]
	if cur.how != routeServed || cur.er != pre.er || cur.confirm != pre.confirm {
		r := errorReply(wire.StatusUnavailable, "region %d: its route on %s changed during the read: retry", id, s.cfg.Name)
		return &r
	}
	if cur.confirm != nil {
		if err := cur.confirm.Confirm(); err != nil {
			r := errorReply(wire.StatusUnavailable, "region %d: %s could not confirm the read with its backups (%v): retry, with a newer map", id, s.cfg.Name, err)
			return &r
		}
	}
	return nil
}

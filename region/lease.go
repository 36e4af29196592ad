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
// backups confirm this server is still its primary.
func (s *Server) leased(h ring.HandlerFunc) ring.HandlerFunc {
	return func(req *ring.ServerRequest) ring.Reply {
		rep := h(req)
		if rep.Status != 0 && rep.Status != wire.StatusNotFound {
			return rep
		}
		if !s.leaseHolds() {
			return s.noLease()
		}
		if s.cluster == nil {
			return rep
		}
		switch rt := s.state.Load().routes[req.Region]; {
		case rt.how != routeServed:
			return errorReply(wire.StatusUnavailable, "region %d: no longer served by %s (its map or stream changed during the read): retry", req.Region, s.cfg.Name)
		case rt.confirm != nil:
			if err := rt.confirm.Confirm(); err != nil {
				return errorReply(wire.StatusUnavailable, "region %d: %s could not confirm the read with its backups (%v): retry, with a newer map", req.Region, s.cfg.Name, err)
			}
		}
		return rep
	}
}

// leasedShort is leased for a ring.ShortFunc: an answer it gives is
// checked as leased checks a handler's.
func (s *Server) leasedShort(h ring.ShortFunc) ring.ShortFunc {
	return func(req *ring.ServerRequest) (ring.Reply, bool) {
		rep, ok := h(req)
		if ok && (rep.Status == 0 || rep.Status == wire.StatusNotFound) && !s.leaseHolds() {
			return s.noLease(), true
		}
		return rep, ok
	}
}

// Package rdma is a verbs-like abstraction of one-sided RDMA WRITE and its
// software transports.
//
// A process registers memory regions (MR): buffers allocated off the Go heap
// with mmap, named to peers by a RemoteMR descriptor (address, key,
// length). A connected queue pair (QP) posts WRITEs from one of its own
// registered regions into a region the peer exposed when the connection was
// set up. The peer's CPU takes no part in a WRITE: no callback runs, no
// message is delivered; the bytes simply appear in its memory. A WRITE may
// be signaled (its completion is queued on the writer's CQ) and solicited
// (if the peer armed its QP with ReqNotify, a doorbell completion is queued
// on the peer's CQ, which is how a parked poller wakes up).
//
// Contract, for every transport:
//   - WRITEs on one QP become visible in the order they were posted, and the
//     last 8-byte word of a WRITE whose end is 8-aligned becomes visible
//     after every other byte of it (LoadWord reads such a word). A poller
//     that sees a message's last word therefore sees the whole message.
//   - A WRITE outside the target region, or with a stale or wrong key, leaves
//     the target untouched and completes with ErrAccess on the writer's CQ
//     (signaled or not). The QP stays usable.
//   - When the peer dies or the connection breaks, pending signaled WRITEs
//     complete with ErrPeerGone within the transport's dead-peer timeout,
//     an OpDisconnect completion is queued, and later posts fail.
//   - The source bytes of a WRITE must stay untouched until its completion
//     (or until a protocol-level acknowledgement implies it).
//   - MR.Revoke fences a region off: every later WRITE into it fails with
//     ErrAccess, and every WRITE a peer saw complete landed before Revoke
//     returned (a backup taking over from a primary that may still run).
//   - MRs, CQs and QPs are safe for concurrent use: PostWrite may be
//     called from many goroutines (WRITEs are ordered as their calls
//     returned), and one CQ may serve many QPs.
//
// Transports: Loopback (in one process, for unit tests), Shm (processes on
// one host sharing memfd mappings; a WRITE is a copy into the peer's mapping
// followed by a release store) and TCP (software RDMA: the passive side's
// transport goroutine applies WRITE frames into registered memory). One
// conformance suite (rdma/internal/conformance) runs against each.
//
// Peer authentication happens before a connection request is read, so a
// refused peer exposes, maps and writes nothing: TCP with a TLS
// configuration requires mutual TLS (TCP.TLS), and a Shm listener admits
// only peers of the uids it allows (Shm.PeerUIDs, from SO_PEERCRED).
//
// Package rdma/ring builds the client-server message protocol on these
// WRITEs; the replication log mirror uses them directly.
package rdma

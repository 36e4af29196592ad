package rdma

import (
	"errors"
	"fmt"
)

var (
	// ErrAccess: a WRITE fell outside the target region or named a wrong
	// or deregistered key. The target is untouched.
	ErrAccess = errors.New("rdma: remote access error")
	// ErrLocalAccess: the WRITE's source range is outside its local region.
	ErrLocalAccess = errors.New("rdma: local access error")
	// ErrPeerGone: the peer died, closed the connection or stopped
	// answering within the dead-peer timeout.
	ErrPeerGone = errors.New("rdma: peer gone")
	// ErrPeerLost is the ErrPeerGone of a connection that ended without
	// the peer closing it (errors.Is(ErrPeerLost, ErrPeerGone) holds):
	// the peer process died (its sockets closed by the kernel), the
	// connection was reset, or it stopped answering within the dead-peer
	// timeout. A peer's Close is told apart (the peer sees ErrPeerGone
	// only): it says goodbye first.
	ErrPeerLost = fmt.Errorf("%w: connection lost without a close", ErrPeerGone)
	// ErrClosed: the QP, CQ, MR or listener was closed locally.
	ErrClosed = errors.New("rdma: closed")
	// ErrRejected: the passive side refused the connection request.
	ErrRejected = errors.New("rdma: connection rejected")
	// ErrAuth: the peer is not authenticated: over TLS it presented no
	// certificate, or one the configured CA did not sign or that does not
	// name it, or it refused ours; over shm it runs as a user the
	// listener does not allow.
	ErrAuth = errors.New("rdma: peer not authenticated")
	// ErrProtocol: a peer sent bytes that do not follow the transport's
	// connection protocol.
	ErrProtocol = errors.New("rdma: transport protocol violation")
)

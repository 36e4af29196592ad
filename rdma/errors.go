package rdma

import "errors"

var (
	// ErrAccess: a WRITE fell outside the target region or named a wrong
	// or deregistered key. The target is untouched.
	ErrAccess = errors.New("rdma: remote access error")
	// ErrLocalAccess: the WRITE's source range is outside its local region.
	ErrLocalAccess = errors.New("rdma: local access error")
	// ErrPeerGone: the peer died, closed the connection or stopped
	// answering within the dead-peer timeout.
	ErrPeerGone = errors.New("rdma: peer gone")
	// ErrClosed: the QP, CQ, MR or listener was closed locally.
	ErrClosed = errors.New("rdma: closed")
	// ErrRejected: the passive side refused the connection request.
	ErrRejected = errors.New("rdma: connection rejected")
	// ErrProtocol: a peer sent bytes that do not follow the transport's
	// connection protocol.
	ErrProtocol = errors.New("rdma: transport protocol violation")
)

package rdma

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"
)

// Op says what a completion reports.
type Op uint8

const (
	// OpWrite: a posted WRITE finished (signaled, or any WRITE that failed).
	OpWrite Op = iota + 1
	// OpDoorbell: the peer posted a solicited WRITE while this QP was armed
	// by ReqNotify; Imm is the WRITE's immediate value.
	OpDoorbell
	// OpDisconnect: the connection broke (Err says why) or was closed.
	OpDisconnect
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpDoorbell:
		return "doorbell"
	case OpDisconnect:
		return "disconnect"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Completion is one entry of a CQ.
type Completion struct {
	Op   Op
	WRID uint64 // OpWrite: the work request's ID
	Err  error  // nil on success
	Imm  uint32 // OpDoorbell: the immediate value
	QP   QP
}

// WriteWR is a one-sided WRITE work request: Len bytes from Local at
// LocalOff into the peer's region Remote at RemoteOff.
type WriteWR struct {
	ID        uint64
	Local     *MR
	LocalOff  int
	Len       int
	Remote    RemoteMR
	RemoteOff uint64
	// Signaled queues a completion on the writer's CQ when the WRITE is
	// visible at the peer. Failed WRITEs complete whether signaled or not.
	Signaled bool
	// Solicited raises the peer's doorbell (an OpDoorbell completion with
	// Imm on its CQ) if the peer armed its QP with ReqNotify.
	Solicited bool
	Imm       uint32
}

// source pins the local region and returns the WRITE's source bytes, or
// ErrLocalAccess. The caller unpins wr.Local after copying.
func (wr *WriteWR) source() ([]byte, error) {
	if wr.Local == nil || wr.Len < 0 || wr.LocalOff < 0 || wr.LocalOff > wr.Local.Len() || wr.Len > wr.Local.Len()-wr.LocalOff {
		return nil, ErrLocalAccess
	}
	if !wr.Local.pin() {
		return nil, ErrLocalAccess
	}
	return wr.Local.buf[wr.LocalOff : wr.LocalOff+wr.Len], nil
}

// QP is a connected queue pair. PostWrite may be called from many
// goroutines; WRITEs are ordered by the order their PostWrite calls
// returned.
type QP interface {
	// PostWrite queues a WRITE. It fails at once (and nothing is queued)
	// on a bad local range or a broken or closed QP.
	PostWrite(wr WriteWR) error
	// ReqNotify arms the doorbell: the next solicited WRITE from the peer
	// queues one OpDoorbell completion. Arm, then re-check memory, then
	// wait on the CQ: no wake-up is lost.
	ReqNotify()
	// PeerRegions are the regions the peer exposed at connection set-up.
	PeerRegions() []RemoteMR
	// PeerPrivate is the private data the peer sent at set-up.
	PeerPrivate() []byte
	// CQ is the completion queue this QP reports to.
	CQ() *CQ
	// Err is non-nil once the QP is broken or closed.
	Err() error
	// Close breaks the QP at once (later posts fail; pending signaled
	// WRITEs complete with ErrClosed) and tears the connection down, the
	// WRITEs posted before it delivered first (tcp finishes in the
	// background): the peer's QP breaks with ErrPeerGone, never
	// ErrPeerLost (a death's: Sever).
	Close() error
}

// Immediate is implemented by QPs whose PostWrite never waits for the
// peer or the link: CompletesOnPost true means the bytes are in the peer's
// memory when PostWrite returns and a signaled WRITE's completion is
// queued by then (shm, loopback; tcp queues the bytes and waits for room
// while its queue is full). A caller that must not wait posts only to
// such QPs.
type Immediate interface {
	CompletesOnPost() bool
}

// ConnConfig is one side's part of a connection.
type ConnConfig struct {
	CQ      *CQ   // required: where completions go (may be shared by QPs)
	Expose  []*MR // regions the peer may WRITE into
	Private []byte
}

// Listener yields connection requests.
type Listener interface {
	Accept(ctx context.Context) (ConnRequest, error)
	Addr() string
	Close() error
}

// ConnRequest is a peer's pending connection request.
type ConnRequest interface {
	Private() []byte
	PeerRegions() []RemoteMR
	Accept(cfg ConnConfig) (QP, error)
	Reject() error
}

// Certified is implemented by the connection requests of transports
// that authenticate peers by certificate (TCP): PeerCertificate is the
// leaf of the peer's verified chain, nil on a connection without TLS.
type Certified interface {
	PeerCertificate() *x509.Certificate
}

// Credentialed is implemented by the connection requests of transports
// that know the peer process's user (shm: SO_PEERCRED): PeerUID is the
// uid the peer ran as when it connected.
type Credentialed interface {
	PeerUID() uint32
}

// Transport makes connections of one kind.
type Transport interface {
	Name() string
	Listen(addr string) (Listener, error)
	Dial(ctx context.Context, addr string, cfg ConnConfig) (QP, error)
}

// MaxPrivate and MaxExposed bound what a connection request may carry.
const (
	MaxPrivate = 4096
	MaxExposed = 64
)

func checkConfig(cfg ConnConfig) error {
	switch {
	case cfg.CQ == nil:
		return fmt.Errorf("rdma: connection config without a CQ")
	case len(cfg.Private) > MaxPrivate:
		return fmt.Errorf("rdma: private data of %d bytes, limit %d", len(cfg.Private), MaxPrivate)
	case len(cfg.Expose) > MaxExposed:
		return fmt.Errorf("rdma: %d exposed regions, limit %d", len(cfg.Expose), MaxExposed)
	}
	for _, m := range cfg.Expose {
		if m == nil || m.dead.Load() {
			return fmt.Errorf("rdma: exposing a deregistered region: %w", ErrClosed)
		}
	}
	return nil
}

func remotes(ms []*MR) []RemoteMR {
	out := make([]RemoteMR, len(ms))
	for i, m := range ms {
		out[i] = m.Remote()
	}
	return out
}

// closeLinger bounds how long Close waits for its goodbye to be sent.
const closeLinger = 100 * time.Millisecond

// Sever ends qp's connection as the death of this process would: unlike
// Close, no goodbye is sent, so the peer's QP breaks with ErrPeerLost.
// Fault injection and tests use it; a QP of a transport without the
// distinction is closed.
func Sever(qp QP) {
	if s, ok := qp.(interface{ sever() }); ok {
		s.sever()
		return
	}
	qp.Close()
}

// PostsWithoutWaiting reports whether q's PostWrite returns without
// waiting for its peer while the peer leaves at most n bytes, in at most k
// WRITEs, unread: shm and loopback copy straight into the peer's memory;
// tcp queues up to its MaxQueued bytes, frame headers included, and then
// waits for the peer to read. Other QPs may wait.
func PostsWithoutWaiting(q QP, n, k int) bool {
	switch q := q.(type) {
	case *shmQP, *loopQP:
		return true
	case *tcpQP:
		return n+k*frameHeader <= q.t.maxQueued()
	}
	return false
}

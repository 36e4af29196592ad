package rdma

import (
	"context"
	"runtime/pprof"
	"sync"
	"sync/atomic"
)

// qpBase holds what every transport's QP shares: the CQ, the peer's
// set-up data and the broken/closed state.
type qpBase struct {
	self    QP
	cq      *CQ
	peerMRs []RemoteMR
	private []byte

	errMu sync.Mutex
	err   error
	down  atomic.Bool
}

func (q *qpBase) PeerRegions() []RemoteMR { return q.peerMRs }
func (q *qpBase) PeerPrivate() []byte     { return q.private }
func (q *qpBase) CQ() *CQ                 { return q.cq }

func (q *qpBase) Err() error {
	if !q.down.Load() {
		return nil
	}
	q.errMu.Lock()
	defer q.errMu.Unlock()
	return q.err
}

// breakWith moves the QP to the broken state once and queues the
// OpDisconnect completion. It reports whether this call did it.
func (q *qpBase) breakWith(err error) bool {
	q.errMu.Lock()
	if q.err != nil {
		q.errMu.Unlock()
		return false
	}
	q.err = err
	q.down.Store(true)
	q.errMu.Unlock()
	q.cq.push(Completion{Op: OpDisconnect, Err: err, QP: q.self})
	return true
}

// exposedSet finds the region a peer's WRITE names among those this side
// exposed on the connection.
type exposedSet map[uint64]*MR

func newExposedSet(ms []*MR) exposedSet {
	s := make(exposedSet, len(ms))
	for _, m := range ms {
		s[m.addr] = m
	}
	return s
}

// dst returns the local bytes a peer's WRITE may fill, with their region
// pinned (the caller unpins it), or ErrAccess.
func (s exposedSet) dst(r RemoteMR, off uint64, n int) ([]byte, *MR, error) {
	m, ok := s[r.Addr]
	if !ok || !m.pin() {
		return nil, nil, ErrAccess
	}
	b, err := target(m.buf, ctlKey(m.mapping).Load(), r, off, n)
	if err != nil {
		m.unpin()
		return nil, nil, err
	}
	return b, m, nil
}

// armedFlag is a doorbell armed by ReqNotify and fired by one solicited
// WRITE.
type armedFlag struct{ v atomic.Bool }

func (a *armedFlag) arm()       { a.v.Store(true) }
func (a *armedFlag) fire() bool { return a.v.CompareAndSwap(true, false) }

// transportLabeled runs a transport goroutine under the pprof label
// component=transport (CPU profiles split by component).
func transportLabeled(f func()) {
	pprof.Do(context.Background(), pprof.Labels("component", "transport"), func(context.Context) { f() })
}

package rdma

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Loopback is an in-process transport: both ends live in this process and
// a WRITE is a synchronous copy into the peer's region. Unit tests of the
// layers above use it; its addresses are names in a per-Loopback table.
type Loopback struct {
	mu        sync.Mutex
	listeners map[string]*loopListener
}

// NewLoopback returns an empty in-process fabric.
func NewLoopback() *Loopback { return &Loopback{listeners: map[string]*loopListener{}} }

// Name implements Transport.
func (*Loopback) Name() string { return "loopback" }

type loopListener struct {
	f      *Loopback
	addr   string
	reqs   chan *loopRequest
	done   chan struct{}
	closer sync.Once
}

type loopRequest struct {
	cfg   ConnConfig
	reply chan loopReply
}

type loopReply struct {
	qp  *loopQP // the listener side's QP; nil if rejected
	err error
}

// Listen implements Transport.
func (f *Loopback) Listen(addr string) (Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.listeners[addr]; ok {
		return nil, fmt.Errorf("rdma: loopback address %q in use", addr)
	}
	l := &loopListener{f: f, addr: addr, reqs: make(chan *loopRequest), done: make(chan struct{})}
	f.listeners[addr] = l
	return l, nil
}

func (l *loopListener) Addr() string { return l.addr }

func (l *loopListener) Close() error {
	l.closer.Do(func() {
		l.f.mu.Lock()
		delete(l.f.listeners, l.addr)
		l.f.mu.Unlock()
		close(l.done)
	})
	return nil
}

func (l *loopListener) Accept(ctx context.Context) (ConnRequest, error) {
	select {
	case r := <-l.reqs:
		return &loopConnReq{req: r}, nil
	case <-l.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type loopConnReq struct {
	req  *loopRequest
	once sync.Once
}

func (c *loopConnReq) Private() []byte         { return c.req.cfg.Private }
func (c *loopConnReq) PeerRegions() []RemoteMR { return remotes(c.req.cfg.Expose) }

func (c *loopConnReq) Accept(cfg ConnConfig) (QP, error) {
	return answerOnce(&c.once, cfg, func() (QP, error) {
		qp := newLoopQP(cfg, c.req.cfg)
		c.req.reply <- loopReply{qp: qp}
		return qp, nil
	})
}

func (c *loopConnReq) Reject() error {
	c.once.Do(func() { c.req.reply <- loopReply{err: ErrRejected} })
	return nil
}

// Dial implements Transport.
func (f *Loopback) Dial(ctx context.Context, addr string, cfg ConnConfig) (QP, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	f.mu.Lock()
	l, ok := f.listeners[addr]
	f.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("rdma: loopback dial %q: no listener: %w", addr, ErrPeerGone)
	}
	req := &loopRequest{cfg: cfg, reply: make(chan loopReply, 1)}
	select {
	case l.reqs <- req:
	case <-l.done:
		return nil, fmt.Errorf("rdma: loopback dial %q: %w", addr, ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case rep := <-req.reply:
		if rep.err != nil {
			return nil, rep.err
		}
		qp := newLoopQP(cfg, ConnConfig{Private: nil, Expose: nil})
		qp.private = rep.qp.myPrivate
		qp.peerMRs = remotes(rep.qp.exposed.list())
		qp.peer, rep.qp.peer = rep.qp, qp
		close(rep.qp.ready)
		close(qp.ready)
		return qp, nil
	case <-ctx.Done():
		// The listener may still accept: that QP breaks at once.
		go func() {
			if rep := <-req.reply; rep.qp != nil {
				rep.qp.breakWith(ErrPeerGone)
				close(rep.qp.ready)
			}
		}()
		return nil, ctx.Err()
	}
}

// loopQP is one end of an in-process connection.
type loopQP struct {
	qpBase
	myPrivate []byte
	exposed   exposedSet
	armed     atomic.Bool
	ready     chan struct{} // closed once peer is set
	peer      *loopQP
	mu        sync.Mutex // orders PostWrite calls
}

func newLoopQP(mine, theirs ConnConfig) *loopQP {
	q := &loopQP{myPrivate: mine.Private, exposed: newExposedSet(mine.Expose), ready: make(chan struct{})}
	q.self, q.cq = q, mine.CQ
	q.private, q.peerMRs = theirs.Private, remotes(theirs.Expose)
	return q
}

func (s exposedSet) list() []*MR {
	out := make([]*MR, 0, len(s))
	for _, m := range s {
		out = append(out, m)
	}
	return out
}

// CompletesOnPost: a WRITE is a copy into the peer's memory, its
// completion queued before PostWrite returns (Immediate).
func (q *loopQP) CompletesOnPost() bool { return true }

func (q *loopQP) PostWrite(wr WriteWR) error {
	src, err := wr.source()
	if err != nil {
		return err
	}
	defer wr.Local.unpin()
	<-q.ready
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.Err(); err != nil {
		return err
	}
	p := q.peer
	if p.Err() != nil {
		q.breakWith(ErrPeerGone)
		return ErrPeerGone
	}
	dst, m, err := p.exposed.dst(wr.Remote, wr.RemoteOff, len(src))
	if err != nil {
		q.cq.push(Completion{Op: OpWrite, WRID: wr.ID, Err: err, QP: q})
		return nil
	}
	publish(dst, src)
	m.unpin()
	if wr.Solicited && p.armed.CompareAndSwap(true, false) {
		p.cq.push(Completion{Op: OpDoorbell, Imm: wr.Imm, QP: p})
	}
	if wr.Signaled {
		q.cq.push(Completion{Op: OpWrite, WRID: wr.ID, QP: q})
	}
	return nil
}

func (q *loopQP) ReqNotify() { q.armed.Store(true) }

func (q *loopQP) Close() error {
	q.end(ErrPeerGone)
	return nil
}

// sever ends the connection as the process's death would: the peer sees
// ErrPeerLost.
func (q *loopQP) sever() { q.end(ErrPeerLost) }

func (q *loopQP) end(peerErr error) {
	if q.breakWith(ErrClosed) {
		select {
		case <-q.ready:
			q.peer.breakWith(peerErr)
		default:
		}
	}
}

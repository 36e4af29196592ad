package ring

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// armQP is a QP whose ReqNotify runs land once (the first time ready, if
// set, says so): a WRITE that lands as the poller arms its doorbell, its
// writer having found the doorbell unarmed (so it rings none). ReqNotify
// runs on the poller only.
type armQP struct {
	rdma.QP
	cq     *rdma.CQ
	land   func()
	ready  func() bool
	landed bool
	closed chan struct{}
	close  sync.Once
}

func (q *armQP) ReqNotify() {
	if !q.landed && (q.ready == nil || q.ready()) {
		q.landed = true
		q.land()
	}
}
func (q *armQP) CQ() *rdma.CQ                 { return q.cq }
func (q *armQP) Err() error                   { return nil }
func (q *armQP) Close() error                 { q.close.Do(func() { close(q.closed) }); return nil }
func (q *armQP) PeerRegions() []rdma.RemoteMR { return nil }

// TestSpinnerNoParkIncomplete: a spinner that first sees a message
// incomplete in its poll after arming its doorbells does not park: a
// malformed message (here a bad magic) gets no doorbell and nothing else
// may come, so only polling on closes its connection.
func TestSpinnerNoParkIncomplete(t *testing.T) {
	s := newServer(ServerConfig{ArriveWait: 50 * time.Millisecond, Spinners: 1}, nil)
	t.Cleanup(func() { s.Close() })
	sp := s.spinners[0]
	reqMR, repMR := register(t, MinRing), register(t, MinRing)
	qp := &armQP{cq: sp.cq, closed: make(chan struct{})}
	qp.land = func() { copy(reqMR.Bytes(), bytes.Repeat([]byte{0xEE}, HeaderSize)) }
	c := &sconn{s: s, sp: sp, qp: qp, reqMR: reqMR, repMR: repMR, reqSize: MinRing, repSize: MinRing}
	s.conns.Add(1)
	sp.add <- c
	select {
	case <-qp.closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("the connection with a bad magic was not closed; stats %+v", s.Stats())
	}
	if st := s.Stats(); st.Malformed != 1 {
		t.Fatalf("stats %+v, want one malformed", st)
	}
}

// TestPollerNoParkIncomplete: the client side of
// TestSpinnerNoParkIncomplete, for a reply slot.
func TestPollerNoParkIncomplete(t *testing.T) {
	repMR := register(t, MinRing)
	qp := &armQP{cq: rdma.NewCQ(), closed: make(chan struct{})}
	c := &Client{cfg: ClientConfig{SpinTime: DefaultSpin, ArriveWait: 50 * time.Millisecond}, qp: qp, cq: qp.cq, repMR: repMR,
		rep: spans{size: MinRing}, pending: map[uint64]*Call{}, space: make(chan struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.poller()
	t.Cleanup(func() {
		c.closeOnce.Do(func() { close(c.stop) })
		<-c.done
	})
	c.mu.Lock()
	at, _, _ := c.rep.reserve(HeaderSize)
	call := &Call{Req: Request{Type: typeEcho}, Done: make(chan *Call, 1), id: 1, slot: at, slotSize: HeaderSize}
	c.pending[1], c.bySlot = call, []*Call{call}
	qp.land = func() { copy(repMR.Bytes()[at%MinRing:], bytes.Repeat([]byte{0xEE}, HeaderSize)) }
	// Land once the poller took its kick: nothing else will wake it.
	qp.ready = func() bool { return len(c.kick) == 0 }
	c.mu.Unlock()
	c.kick <- struct{}{}
	select {
	case got := <-call.Done:
		if got.Err == nil {
			t.Fatal("a reply with a bad magic was delivered")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call with a bad magic reply did not fail")
	}
}

package rdma

import (
	"context"
	"errors"
	"testing"
	"time"
)

// tcpPair connects two TCP QPs over loopback: a exposes nothing, b a
// region of size bytes.
func tcpPair(t *testing.T, size int) (a, b *tcpQP, acq, bcq *CQ, amr, bmr *MR) {
	qa, qb, acq, bcq, amr, bmr := connectPair(t, &TCP{}, "127.0.0.1:0", size)
	return qa.(*tcpQP), qb.(*tcpQP), acq, bcq, amr, bmr
}

// connectPair connects two QPs of tr, listening at addr: a exposes
// nothing, b a region of size bytes. Both are closed when the test ends.
func connectPair(t *testing.T, tr Transport, addr string, size int) (a, b QP, acq, bcq *CQ, amr, bmr *MR) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ln, err := tr.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if amr, err = Register(size); err != nil {
		t.Fatal(err)
	}
	if bmr, err = Register(size); err != nil {
		t.Fatal(err)
	}
	acq, bcq = NewCQ(), NewCQ()
	got := make(chan QP, 1)
	go func() {
		req, err := ln.Accept(ctx)
		if err != nil {
			got <- nil
			return
		}
		qp, _ := req.Accept(ConnConfig{CQ: bcq, Expose: []*MR{bmr}})
		got <- qp
	}()
	a, err = tr.Dial(ctx, ln.Addr(), ConnConfig{CQ: acq})
	if err != nil {
		t.Fatal(err)
	}
	if b = <-got; b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close(); amr.Deregister(); bmr.Deregister() })
	return a, b, acq, bcq, amr, bmr
}

// disconnect waits for qp's OpDisconnect completion on cq.
func disconnect(t *testing.T, cq *CQ, within time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		var c [1]Completion
		if _, err := cq.Wait(ctx, c[:]); err != nil {
			t.Fatalf("no disconnect within %v", within)
		}
		if c[0].Op == OpDisconnect {
			return c[0].Err
		}
	}
}

// TestTCPCloseWithBacklogSaysGoodbye: a Close while megabytes of WRITEs
// wait for a peer that is slow to read (its reader held up) still reaches
// the peer as a close (ErrPeerGone), after every WRITE before it, not as
// a loss (ErrPeerLost): a deliberate close must not look like a death.
func TestTCPCloseWithBacklogSaysGoodbye(t *testing.T) {
	const size = 1 << 20
	a, _, _, bcq, amr, bmr := tcpPair(t, size)
	held := make(chan struct{})
	go bmr.View(func([]byte) { // the peer's reader waits for the region
		close(held)
		time.Sleep(500 * time.Millisecond)
	})
	<-held
	r := a.PeerRegions()[0]
	for i := range 40 {
		amr.Bytes()[0] = byte(i)
		if err := a.PostWrite(WriteWR{ID: uint64(i), Local: amr, Len: size, Remote: r}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	a.Close()
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("Close took %v: it must not wait for the peer", d)
	}
	err := disconnect(t, bcq, 10*time.Second)
	if !errors.Is(err, ErrPeerGone) || errors.Is(err, ErrPeerLost) {
		t.Fatalf("the peer saw %v, want a close (ErrPeerGone, not ErrPeerLost)", err)
	}
	if got := bmr.Bytes()[0]; got != 39 {
		t.Fatalf("the peer's region holds WRITE %d, want the last before the close (39)", got)
	}
}

// TestTCPDeathMidFrameIsLost: a stream that ends inside a WRITE frame (the
// sender died while streaming) is a loss (ErrPeerLost), as an end between
// frames is.
func TestTCPDeathMidFrameIsLost(t *testing.T) {
	a, _, _, bcq, _, bmr := tcpPair(t, 4096)
	var hdr [frameHeader]byte
	r := bmr.Remote()
	f := frame{typ: frameWrite, n: 4096, addr: r.Addr, key: r.Key}
	f.put(hdr[:])
	a.omu.Lock() // the writer goroutine is idle: nothing was posted
	_, err := a.c.Write(append(hdr[:], make([]byte, 100)...))
	a.omu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	a.sever()
	if err := disconnect(t, bcq, 10*time.Second); !errors.Is(err, ErrPeerLost) {
		t.Fatalf("the peer saw %v, want ErrPeerLost", err)
	}
}

// TestTCPAbandonedDialIsAClose: a dialer that gives up waiting for the
// accept (its context ends) while the listener accepts later: the
// accepted QP breaks as at a close (ErrPeerGone), not as at a death.
func TestTCPAbandonedDialIsAClose(t *testing.T) {
	tr := &TCP{}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	mr, err := Register(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Deregister()
	cq := NewCQ()
	accepted := make(chan QP, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := ln.Accept(ctx)
		if err != nil {
			accepted <- nil
			return
		}
		time.Sleep(300 * time.Millisecond) // slow to accept: the dialer gives up first
		qp, _ := req.Accept(ConnConfig{CQ: cq, Expose: []*MR{mr}})
		accepted <- qp
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if qp, err := tr.Dial(ctx, ln.Addr(), ConnConfig{CQ: NewCQ()}); err == nil {
		qp.Close()
		t.Fatal("the dial did not give up")
	}
	qp := <-accepted
	if qp == nil {
		t.Skip("the listener refused the abandoned request (nothing to check)")
	}
	defer qp.Close()
	if err := disconnect(t, cq, 10*time.Second); !errors.Is(err, ErrPeerGone) || errors.Is(err, ErrPeerLost) {
		t.Fatalf("the accepted QP saw %v, want a close (ErrPeerGone, not ErrPeerLost)", err)
	}
}

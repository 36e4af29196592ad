package ring

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// notifyCounting is a transport whose dialled QPs count ReqNotify: how
// often the client's poller armed its doorbell to park with a call
// pending.
type notifyCounting struct {
	rdma.Transport
	arms atomic.Int64
}

type countingQP struct {
	rdma.QP
	arms *atomic.Int64
}

func (q countingQP) ReqNotify() { q.arms.Add(1); q.QP.ReqNotify() }

func (t *notifyCounting) Dial(ctx context.Context, addr string, cfg rdma.ConnConfig) (rdma.QP, error) {
	qp, err := t.Transport.Dial(ctx, addr, cfg)
	if err != nil {
		return nil, err
	}
	return countingQP{QP: qp, arms: &t.arms}, nil
}

// TestClientPollerSpinsAfterWake: a client poller parked idle (the last
// reply long past) that a new call wakes spins for its reply rather than
// arming the doorbell and parking at once: with the spin counted from the
// last reply, every call of a client calling now and then (here every 2
// ms, 40 times the spin) paid a doorbell wake-up for its reply.
func TestClientPollerSpinsAfterWake(t *testing.T) {
	e := envs[0] // loopback
	s, _ := start(t, e, ServerConfig{})
	tr := &notifyCounting{Transport: e.tr()}
	c, err := Dial(context.Background(), ClientConfig{Transport: tr, Addr: s.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const calls = 100
	for i := range calls {
		time.Sleep(2 * time.Millisecond) // the poller parks idle
		if _, err := c.Call(context.Background(), Request{Type: typeEcho, Payload: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	// Spinning, a reply the server sends within the spin (50 µs) needs
	// no doorbell; allow for a loaded machine's slow replies.
	if n := tr.arms.Load(); n > calls*3/4 {
		t.Fatalf("the poller armed its doorbell %d times in %d calls, want fewer than %d", n, calls, calls*3/4)
	}
	t.Logf("%d doorbell arms in %d calls", tr.arms.Load(), calls)
}

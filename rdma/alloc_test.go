package rdma_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// TestTCPNoPerWriteAllocation: in steady state, posting, sending,
// applying and acknowledging WRITEs allocates (almost) nothing per WRITE,
// in both processes' roles.
func TestTCPNoPerWriteAllocation(t *testing.T) {
	tr := &rdma.TCP{}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dst, _ := rdma.Register(1 << 20)
	src, _ := rdma.Register(1 << 20)
	defer dst.Deregister()
	defer src.Deregister()
	go func() {
		if req, err := ln.Accept(ctx); err == nil {
			req.Accept(rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{dst}})
		}
	}()
	cq := rdma.NewCQ()
	qp, err := tr.Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	defer qp.Close()
	r := qp.PeerRegions()[0]
	round := func(n int) {
		for i := range n {
			wr := rdma.WriteWR{ID: uint64(i), Local: src, LocalOff: (i * 64) % (1 << 20), Len: 64, Remote: r, RemoteOff: uint64(i*64) % (1 << 20), Signaled: i == n-1}
			if err := qp.PostWrite(wr); err != nil {
				t.Fatal(err)
			}
		}
		var c [1]rdma.Completion
		if _, err := cq.Wait(ctx, c[:]); err != nil || c[0].Err != nil {
			t.Fatal(err, c[0].Err)
		}
	}
	for range 20 {
		round(10000) // warm the buffers up
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const rounds, per = 20, 10000
	for range rounds {
		round(per)
	}
	runtime.ReadMemStats(&after)
	perWrite := float64(after.Mallocs-before.Mallocs) / (rounds * per)
	t.Logf("%.4f allocations per WRITE", perWrite)
	if perWrite > 0.05 {
		t.Fatalf("%.4f allocations per WRITE, want ~0", perWrite)
	}
}

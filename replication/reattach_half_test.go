package replication

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
	"go.uber.org/zap/zaptest"
)

// reattachKeepingBuffers re-attaches the group's primary to its backups at
// epoch the way a region server does when the same primary comes back at a
// new epoch (its group changed): the old stream is closed without a flush
// (a no-op if the caller retired it first, as a region server does), its
// connections closed, and a new mirror and shipper connect to the
// backups' same buffers (the backup keeps them: they hold records the
// primary acknowledged that no backup log holds yet). Links get
// g.linkFail.
func (g *replGroup) reattachKeepingBuffers(epoch uint64) {
	g.t.Helper()
	g.reattach(epoch, true)
}

// reattach is reattachKeepingBuffers; unless must, a failed NewShipper is
// logged and leaves the group with the new mirror and the closed stream.
func (g *replGroup) reattach(epoch uint64, must bool) {
	t := g.t
	t.Helper()
	g.shipper.Close()
	g.mirror.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tr := rdma.NewLoopback()
	cq := rdma.NewCQ()
	links := map[string]Link{}
	var bs []Backup
	for i, end := range g.ends {
		loopAddrs++
		ln, err := tr.Listen(fmt.Sprintf("ra%d", loopAddrs))
		if err != nil {
			t.Fatal(err)
		}
		accepted := make(chan error, 1)
		go func() {
			req, err := ln.Accept(ctx)
			if err == nil {
				end.qp, err = req.Accept(rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{end.buf}})
			}
			accepted <- err
		}()
		qp, err := tr.Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
		ln.Close()
		t.Cleanup(func() { qp.Close() })
		b := Backup{Name: fmt.Sprintf("b%d", i), QP: qp, Buffer: qp.PeerRegions()[0]}
		bs = append(bs, b)
		links[b.Name] = &LocalLink{Replica: g.reps[i], Fail: g.linkFail[i]}
	}
	m := newTailMirror(t, g.pr, cq, bs)
	sh, err := startShipper(ShipperConfig{Region: g.pr, Epoch: epoch, Mode: g.modes[0], SegSize: mirrorSeg, Mirror: m,
		Links: links, Credits: g.creditsOr2(), Log: zaptest.NewLogger(t), LogID: g.logID})
	g.mirror = m
	switch {
	case err != nil && must:
		t.Fatal(err)
	case err != nil:
		t.Logf("re-attach at epoch %d: %v", epoch, err)
		return
	}
	t.Cleanup(sh.Close)
	g.shipper = sh
}

// putsUntil puts key prefix+i with a 1000-byte value for i from *next on
// until stop reports true (bounded), and records them in model.
func putsUntil(t *testing.T, g *replGroup, model map[string][]byte, prefix string, next *int, stop func() bool) {
	t.Helper()
	for range 10000 {
		if stop() {
			return
		}
		k, v := fmt.Sprintf("%s%06d", prefix, *next), fmt.Appendf(nil, "%s.%06d.%01000d", prefix, *next, 0)
		if err := g.pr.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
		model[k] = v
		*next++
	}
	t.Fatalf("%s: condition not reached after 10000 puts", prefix)
}

// A same-primary re-attach while the tail sits in buffer half 1: the new
// stream mirrors the same log segment into half 0, so both halves name it
// and the one in half 1 stops where the old stream ended. The primary dies
// after more acknowledged writes: the promoted backup must adopt the
// longer image (half 0), not the stale one, for every engine size (the
// tail's half depends only on how many segments the stream switched, which
// the test forces to one).
func TestPromoteAfterReattachAdoptsNewerHalf(t *testing.T) {
	for _, mode := range []Mode{SendIndex, BuildIndex} {
		t.Run(mode.String(), func(t *testing.T) {
			g := newReplGroup(t, 100000, []Mode{mode}, nil)
			model := map[string][]byte{}
			start, err := g.pr.LogTail()
			if err != nil {
				t.Fatal(err)
			}
			index := func() uint64 {
				tl, err := g.pr.LogTail()
				if err != nil {
					t.Fatal(err)
				}
				return tl.Index
			}
			next := 0
			// One switch: the old stream's tail is in half 1.
			putsUntil(t, g, model, "a", &next, func() bool { return index() == start.Index+1 })
			n := next
			putsUntil(t, g, model, "b", &next, func() bool { return next >= n+10 })
			g.reattachKeepingBuffers(4)
			// Acknowledged through the new stream only, in the same segment.
			n = next
			putsUntil(t, g, model, "c", &next, func() bool { return next >= n+10 })
			if index() != start.Index+1 {
				t.Fatalf("tail moved to index %d: the writes after the re-attach must stay in the re-mirrored segment", index())
			}
			g.failPrimary()
			np, err := g.reps[0].Promote(5)
			if err != nil {
				t.Fatal(err)
			}
			checkContent(t, "promoted after a same-primary re-attach", np, model)
			if _, err := np.Get([]byte(fmt.Sprintf("c%06d", next-1))); err != nil {
				t.Fatalf("last acknowledged write: %v", err)
			}
		})
	}
}

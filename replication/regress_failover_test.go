package replication

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
	"go.uber.org/zap/zaptest"
)

// A re-attach at a new epoch (group change): the kept backup gets a fresh
// buffer; the new stream re-sends the tail only at the next Wait. The
// primary dies before any write: the promoted backup lacks acked writes.
func TestReattachResendsTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 11))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	model := g.write(rng, 4, 1500, 2400)
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	for k, v := range g.write(rng, 2, 20, 2400) { // acknowledged: on both buffers
		model[k] = v
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	// retire (no flush), the backups fence the old stream (rebuffer)
	g.shipper.Close()
	g.mirror.Close()
	for _, e := range g.ends {
		e.buf.Revoke()
	}
	g.follow(g.pr, 4, g.reps, nil)
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("dropped %v", d)
	}
	// the primary dies with no write after the re-attach
	g.failPrimary()
	np, err := g.reps[0].Promote(5)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted after re-attach", np, model)
}

// The older buffer half holds a segment that GC freed (LogFree applied on
// the backup): Promote re-adopts it after the tail, and replays it into L0.
func TestPromoteSkipsFreedSegment(t *testing.T) {
	g := newReplGroup(t, 1000, []Mode{SendIndex}, nil)
	val := func(round int) []byte { return bytes.Repeat([]byte{byte('a' + round%26)}, 1000) }
	key := func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	first, err := g.pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	round, i := 0, 0
	// write until the tail moves twice (S is the segment before the tail)
	seg := first.Segment
	moves := 0
	for moves < 2 {
		if err := g.pr.Put(key(i), val(round)); err != nil {
			t.Fatal(err)
		}
		i++
		if i == 30 {
			i, round = 0, round+1
		}
		tl, _ := g.pr.LogTail()
		if tl.Segment != seg {
			seg = tl.Segment
			moves++
		}
	}
	// newest versions of every key in T
	round++
	model := map[string][]byte{}
	for i := range 30 {
		if err := g.pr.Put(key(i), val(round)); err != nil {
			t.Fatal(err)
		}
		model[string(key(i))] = val(round)
	}
	tl, _ := g.pr.LogTail()
	if tl.Segment != seg {
		t.Fatalf("tail moved again")
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	st, err := g.pr.GC()
	t.Logf("gc: %+v err %v", st, err)
	g.settle()
	t.Logf("backup log: %+v", copyOf(g.reps[0]).LogSegments())
	checkContent(t, "primary", g.pr, model)
	g.failPrimary()
	np, err := g.reps[0].Promote(5)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("promoted log: %+v", np.LogSegments())
	checkContent(t, "promoted", np, model)
}

// TestCatchUpBeforeServing: after a promotion the remaining backup gets
// the old primary's acknowledged tail only through the catch-up; the new
// stream serves nothing before it landed. Here the catch-up fails: the
// backup is dropped (reported) and, strict, the new primary acknowledges
// no write with it missing.
func TestCatchUpBeforeServing(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 15))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	_, np := g.promoteWithTail(rng)
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("cu%d", loopAddrs) }, 1)
	rep := g.reps[1]
	if err := rep.SetBuffer(ends[0].buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	var caughtUp atomic.Bool
	link := &LocalLink{Replica: rep, Fail: func(c *Command) error {
		if c.Kind == CmdFlush && len(c.Data) > 0 {
			time.Sleep(50 * time.Millisecond) // slow, then the backup dies
			caughtUp.Store(true)
			return errors.New("backup died during the catch-up")
		}
		return nil
	}}
	tail, _ := np.LogTail()
	m, err := NewMirror(mirrorSeg, tail.Segment, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dropped := make(chan string, 1)
	sh, err := startShipper(ShipperConfig{Region: np, Epoch: 4, Mode: SendIndex, SegSize: mirrorSeg, Mirror: m,
		Links: map[string]Link{bs[0].Name: link}, Credits: 2, Rebase: PromotedPairs(np), Strict: true,
		OnDrop: func(name string, _ error) { dropped <- name }, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if !caughtUp.Load() {
		t.Fatal("NewShipper returned before the catch-up was tried")
	}
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("the backup that failed its catch-up was not reported")
	}
	if err := np.Put([]byte("new-key"), []byte("new")); !errors.Is(err, ErrBackupDropped) && !errors.Is(err, ErrNoBackups) {
		t.Fatalf("a write with the only backup missing the old tail: %v, want a refusal", err)
	}
}

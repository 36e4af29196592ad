package replication

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/internal/testseed"
)

// Build-Index under the Send-Index fault schedule, scaled: 64 KiB
// segments hold ~250 of the ~250-byte records written while a fault is
// armed, and L0 (1000 pairs, emptied first) does not fill meanwhile, so
// the segments fill and switch without a partial flush — the regime of
// the 2 MiB / 96K-pair default, where a buffer half is flushed only whole
// (the tests check that no partial flush was sent).

// fillUntilSwitch writes distinct keys of ~250 bytes through the group's
// primary until its log tail moved to another segment n times, then more
// writes into the new tail; it returns what it wrote.
func (g *replGroup) fillUntilSwitch(prefix string, n, more int) map[string][]byte {
	t := g.t
	t.Helper()
	model := map[string][]byte{}
	tl, err := g.pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	seg, moves := tl.Segment, 0
	put := func(i int) {
		k := fmt.Sprintf("%s%06d", prefix, i)
		v := bytes.Repeat([]byte{byte('a' + i%26)}, 240)
		if err := g.pr.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	i := 0
	for ; moves < n && i < 100000; i++ {
		put(i)
		tl, _ := g.pr.LogTail()
		if tl.Segment != seg {
			seg, moves = tl.Segment, moves+1
		}
	}
	for j := 0; j < more; j++ {
		put(i + j)
	}
	if tl, _ := g.pr.LogTail(); tl.Segment != seg {
		t.Fatalf("the tail moved again during the last %d writes", more)
	}
	return model
}

// g0StalledFailover runs a Build-Index group of two backups in which
// backup 1's flushes stall (it holds the records in its buffer only) while
// the primary fills a segment and goes on into the next, then fails the
// primary and promotes backup 0 at epoch 4, which must hold every
// acknowledged write.
func g0StalledFailover(t *testing.T, rng *rand.Rand) (*replGroup, map[string][]byte, *engine.Region) {
	var hold atomic.Bool
	var partial atomic.Int32
	release := make(chan struct{})
	g := newReplGroup(t, 1000, []Mode{BuildIndex, BuildIndex}, map[int]func(*Command) error{0: func(c *Command) error {
		if hold.Load() && c.Kind == CmdFlush && !c.Sealed {
			partial.Add(1)
		}
		return nil
	}, 1: func(c *Command) error {
		if hold.Load() && c.Kind == CmdFlush {
			<-release
			return errors.New("test: the primary died before this flush reached backup 1")
		}
		return nil
	}})
	model := g.write(rng, 4, 1500, 2400)
	if err := g.pr.Compact(); err != nil { // L0 empty: the writes below flush no part of a segment
		t.Fatal(err)
	}
	g.settle()
	hold.Store(true)
	// Backup 1's flushes stall from here: the primary fills a segment and
	// goes on into the next (the mirror's switch waits only for earlier
	// sealed flushes) — every write acknowledged, i.e. in both buffers.
	for k, v := range g.fillUntilSwitch("late", 1, 30) {
		model[k] = v
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	if n := partial.Load(); n != 0 {
		t.Fatalf("%d partial flushes while the fault was armed: not the regime this test is for", n)
	}
	close(release)
	g.failPrimary()
	np, err := g.reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted", np, model)
	if err := np.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	return g, model, np
}

// TestBuildIndexSecondFailoverKeepsWrites: backup 1 lags (the primary's
// flushes to it stall: it holds the records in its buffer, applied up to an
// older flush) when the primary dies with acknowledged writes in two
// segments not flushed to it. Backup 0 is promoted and replays its buffer
// into its own log — across its own segment switches. Backup 1, on a fresh
// buffer, must end up with every acknowledged write: the new primary
// catches it up from its handover (the old primary's records from backup
// 1's point) rather than re-sending only its own tail, and without a
// whole seed.
func TestBuildIndexSecondFailoverKeepsWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 31))
	g, model, np := g0StalledFailover(t, rng)
	// The last records' WRITEs to backup 1 never landed (in flight when
	// the primary died): only the promoted backup has them, and it has
	// applied them, so backup 1 must get them from its handover.
	lost := loseTail(t, g.reps[1], 2000)
	t.Logf("backup 1's buffer lost the tail from offset %d", lost)
	var sent kindCounter
	g.linkFail = map[int]func(*Command) error{0: sent.fail}
	g.handover = g.reps[0].Handover()
	g.follow(np, 4, g.reps[1:], nil)
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("backup 1 dropped at the new primary's attach: %v", d)
	}
	if n := sent.get(CmdReset); n != 0 {
		t.Fatalf("backup 1 was seeded whole (sent %v): the handover was not used", sent.n)
	}
	if n := sent.get(CmdFlush); n == 0 {
		t.Fatalf("backup 1 got no catch-up flush (sent %v)", sent.n)
	}
	g.settle()
	checkContent(t, "backup 1 after the failover", copyOf(g.reps[0]), model)
	// It follows the new primary from there.
	for k, v := range g.write(rng, 4, 800, 2400) {
		model[k] = v
	}
	g.settle()
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("backups dropped: %v", d)
	}
	checkContent(t, "new primary", np, model)
	checkContent(t, "backup 1", copyOf(g.reps[0]), model)
}

// TestBuildIndexJoiningBackupSeeded: a primary with levels, L0 and a tail
// gets a new, empty Build-Index backup: the stream seeds it (reset, the
// region's pairs, the tail's end as its point) and it then follows like
// any backup; the backup kept from before is only caught up (no seed),
// and a backup that was the region's primary once (stale keys of its own)
// is emptied by the seed.
func TestBuildIndexJoiningBackupSeeded(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 32))
	g := newReplGroup(t, 64, []Mode{BuildIndex}, nil)
	model := g.write(rng, 4, 1500, 2400)
	g.settle()
	for k, v := range g.write(rng, 2, 20, 2400) { // in L0 and the tail only
		model[k] = v
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	g.shipper.Close()
	g.mirror.Close()
	nv, err := engine.Open(g.opts("new"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nv.Close() })
	stale := []byte("stale-only-on-the-new-backup")
	nr, err := nv.CreateRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := nr.Put(stale, []byte("x")); err != nil {
		t.Fatal(err)
	}
	model[string(stale)] = nil
	nr.Resume()
	rep, err := NewBuildIndexReplica(nv, nr, 3, make([]byte, 2*mirrorSeg))
	if err != nil {
		t.Fatal(err)
	}
	var kept, joined kindCounter
	g.linkFail = map[int]func(*Command) error{0: kept.fail, 1: joined.fail}
	g.follow(g.pr, 4, []*Replica{g.reps[0], rep}, nil)
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("dropped: %v", d)
	}
	if kept.get(CmdReset) != 0 || joined.get(CmdReset) != 1 || joined.get(CmdPairs) == 0 {
		t.Fatalf("kept backup got %v, joining one %v", kept.n, joined.n)
	}
	g.settle()
	checkContent(t, "joined backup", copyOf(rep), model)
	for k, v := range g.write(rng, 4, 800, 2400) {
		model[k] = v
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("dropped: %v", d)
	}
	for i, r := range g.reps {
		checkContent(t, fmt.Sprintf("backup %d", i), copyOf(r), model)
	}
}

// TestBuildIndexFlushOfAnotherStreamRefused: a Build-Index backup applied
// primary A's tail segment up to some offset; a new primary B whose tail
// has the same segment number and record seed (two volumes allocate
// alike) starts a stream. A flush of B's segment that no agreed starting
// point precedes must be refused, not applied from A's offset (which
// silently skips B's first records).
func TestBuildIndexFlushOfAnotherStreamRefused(t *testing.T) {
	opts := func(name string) engine.Options { return replOpts(vfs.NewMem(), 1000)(name) }
	tailOf := func(name, prefix string, n int) engine.LogTail {
		v, err := engine.Open(opts(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Close() })
		r, err := v.CreateRegion(engine.RegionDesc{ID: 7})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := r.Put(fmt.Appendf(nil, "%s%04d", prefix, i), bytes.Repeat([]byte{'v'}, 100)); err != nil {
				t.Fatal(err)
			}
		}
		tl, err := r.LogTail()
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	a, b := tailOf("a", "a", 20), tailOf("b", "b", 40)
	if a.Segment != b.Segment || a.Seq != b.Seq {
		t.Fatalf("the two primaries' tails differ (%d/%d, %d/%d): the test shows nothing", a.Segment, a.Seq, b.Segment, b.Seq)
	}
	bv, err := engine.Open(opts("backup"))
	if err != nil {
		t.Fatal(err)
	}
	defer bv.Close()
	br, err := bv.CreateRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2*mirrorSeg)
	rep, err := NewBuildIndexReplica(bv, br, 3, buf)
	if err != nil {
		t.Fatal(err)
	}
	handle := func(c *Command) error {
		c.Region = 7
		_, err := rep.Reply(c)
		return err
	}
	// Primary A's stream: check, starting point, a flush of half 0.
	copy(buf[:mirrorSeg], a.Image)
	for _, c := range []*Command{
		{Kind: CmdCheck, Epoch: 3},
		{Kind: CmdApplyFrom, Epoch: 3, Data: replwire.Applied{Position: Position{Log: 1, Index: a.Index, Segment: a.Segment, Seq: a.Seq, Off: engine.SegmentHeaderSize}}.Encode()},
		{Kind: CmdFlush, Epoch: 3, Segment: a.Segment, Seq: a.Seq, End: a.Offset, Half: 0},
	} {
		if err := handle(c); err != nil {
			t.Fatalf("%s: %v", c.Kind, err)
		}
	}
	// Primary B's stream, into half 1, with no agreed starting point.
	copy(buf[mirrorSeg:], b.Image)
	_ = handle(&Command{Kind: CmdCheck, Epoch: 4})
	err = handle(&Command{Kind: CmdFlush, Epoch: 4, Segment: b.Segment, Seq: b.Seq, End: b.Offset, Half: 1})
	if err == nil {
		for i := range 40 {
			if _, gerr := br.Get(fmt.Appendf(nil, "b%04d", i)); gerr != nil {
				t.Fatalf("B's flush was accepted but its key b%04d is missing (%v): records were skipped", i, gerr)
			}
		}
		return
	}
	if !errors.Is(err, ErrOutOfSync) {
		t.Fatalf("B's flush: %v, want ErrOutOfSync", err)
	}
}

// TestBuildIndexNewPrimaryHelloKeepsBufferedWrites: as above, backup 1
// holds acknowledged writes only in its buffer when the primary dies. The
// promoted backup's hello replaces backup 1's buffer (the old primary is
// fenced): backup 1 must still hold every acknowledged write — it applied
// its old buffer before letting it go. Its copy is incomplete until the
// new primary's stream caught it up (the new primary may have made
// records visible that backup 1 lacks): if the new primary dies first,
// backup 1 is not promoted.
func TestBuildIndexNewPrimaryHelloKeepsBufferedWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 33))
	g, model, _ := g0StalledFailover(t, rng)
	if err := g.reps[1].SetBuffer(make([]byte, 2*mirrorSeg)); err != nil { // the new primary's hello
		t.Fatal(err)
	}
	checkContent(t, "backup 1 after the new primary's hello", g.reps[1].region, model)
	if err := g.bvs[0].Close(); err != nil { // the new primary dies
		t.Fatal(err)
	}
	if _, err := g.reps[1].Promote(5); !errors.Is(err, ErrIncompleteCopy) {
		t.Fatalf("promoting backup 1 with its copy incomplete: %v, want ErrIncompleteCopy", err)
	}
}

// loseTail zeroes the last n bytes of verified records in the newest half
// of rep's buffer, as if their WRITEs never landed, and returns where the
// records now end.
func loseTail(t *testing.T, rep *Replica, n int64) int64 {
	t.Helper()
	rep.mu.Lock()
	defer rep.mu.Unlock()
	hs := rep.halves()
	if len(hs) == 0 {
		t.Fatal("no buffer half names the region")
	}
	h := hs[len(hs)-1]
	if h.end-n <= engine.SegmentHeaderSize {
		t.Fatalf("the tail half holds only %d bytes", h.end)
	}
	clear(h.img[h.end-n : h.end])
	end := engine.TailEnd(h.img, h.m.Seq)
	if end >= h.end {
		t.Fatalf("records still end at %d", end)
	}
	return end
}

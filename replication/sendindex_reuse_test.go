package replication

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tebis-go/tebis/engine"
)

// pausingListener forwards a region's events to its shipper; hook, if
// set, runs on the compaction goroutine before a compaction event is
// forwarded (a test parks the compaction there).
type pausingListener struct {
	*Shipper
	hook func(ev string, c engine.CompactionInfo)
}

func (p *pausingListener) CompactionStarted(c engine.CompactionInfo) {
	p.hook("start", c)
	p.Shipper.CompactionStarted(c)
}

func (p *pausingListener) SegmentBuilt(c engine.CompactionInfo, s engine.BuiltSegment) {
	p.hook("built", c)
	p.Shipper.SegmentBuilt(c, s)
}

// TestSendIndexStalePointerIntoReusedLogSegment: GC relocates the live
// records of log segment X while an L0 compaction (C1) that already took
// its view of the live log segments is building L1. C1's L1 keeps
// pointers into X, stale (shadowed by the relocated copies in L0) but
// valid-looking. X is freed, its number handed to the log again (the tail,
// which the backups adopt only at its first flush), and the next
// compaction (C2, L1 into L2) copies the stale pointers: X is "live" again,
// so they are not written dead. A Send-Index backup that applied X's
// LogFree has no mapping for X and must still install C2.
func TestSendIndexStalePointerIntoReusedLogSegment(t *testing.T) {
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil, func(o engine.Options) engine.Options {
		o.GCGarbageRatio = 0.1
		return o
	})
	model := map[string][]byte{}
	put := func(k string, v []byte) {
		t.Helper()
		if err := g.pr.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	val := func(n int, tag string) []byte { return bytes.Repeat([]byte(tag), n/len(tag)) }
	compact := func() {
		t.Helper()
		if err := g.pr.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	big := val(4000, "pad.")
	// L2: 129 small keys (two L0 compactions, a third pushes L1 over its
	// capacity of 128: moved down).
	for i := range 129 {
		put(fmt.Sprintf("z%03d", i), val(40, fmt.Sprintf("z%d.", i)))
	}
	compact()
	// Log segment X holds only A (30 keys) and garbage (10 of them
	// overwritten); then it is sealed and the recovery point moves past it.
	start := tailSeg(t, g.pr)
	for i := 0; tailSeg(t, g.pr) == start; i++ {
		put(fmt.Sprintf("p%02d", i), big)
	}
	x := tailSeg(t, g.pr)
	for i := range 30 {
		put(fmt.Sprintf("a%02d", i), val(1500, fmt.Sprintf("a%d.", i)))
	}
	for i := range 10 {
		put(fmt.Sprintf("a%02d", i), val(20, "over."))
	}
	if tailSeg(t, g.pr) != x {
		t.Fatal("A does not fit one log segment")
	}
	for i := 0; tailSeg(t, g.pr) == x; i++ {
		put(fmt.Sprintf("q%02d", i), big)
	}
	compact()
	for i := range 20 {
		put(fmt.Sprintf("r%02d", i), val(40, "r."))
	}
	compact()
	l1 := levelPairs(g.pr, 1)
	if l1 <= 64 || l1 > 128 || levelPairs(g.pr, 2) == 0 {
		t.Fatalf("setup: L1 %d pairs, L2 %d", l1, levelPairs(g.pr, 2))
	}

	// C1 (L0 -> L1) parks once it has built its first segment (its view
	// of the live log segments, X included, is taken); C2 (L1 -> L2)
	// parks at its start.
	c1Built, c1Go := make(chan struct{}), make(chan struct{})
	c2Start, c2Go := make(chan struct{}), make(chan struct{})
	var c1Seen, c2Seen bool
	g.pr.SetListener(&pausingListener{Shipper: g.shipper, hook: func(ev string, c engine.CompactionInfo) {
		switch {
		case ev == "built" && c.Src == 0 && !c1Seen:
			c1Seen = true
			close(c1Built)
			<-c1Go
		case ev == "start" && c.Src == 1 && c1Seen && !c2Seen:
			c2Seen = true
			close(c2Start)
			<-c2Go
		}
	}})
	t.Cleanup(func() { g.pr.SetListener(g.shipper) })
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s never happened", what)
		}
	}
	// 65 writes: the first 64 freeze into C1 (L1 grows past its capacity,
	// so C2 follows).
	for i := range 65 {
		put(fmt.Sprintf("f%02d", i), val(40, "f."))
	}
	wait(c1Built, "C1")
	// GC relocates X's 30 live records into the memtable and frees X.
	st, err := g.pr.GC()
	if err != nil {
		t.Fatal(err)
	}
	if st.Freed == 0 {
		t.Fatalf("GC freed nothing: %+v", st)
	}
	close(c1Go)
	wait(c2Start, "C2")
	// While C2 is parked, the log moves on until X's number is its tail:
	// once the segments prepared before X was freed are used up (about
	// 16 puts fill one), a new batch takes the lowest free number.
	parked := true
	defer func() {
		if parked {
			close(c2Go) // a failed or skipped test must not leave C2 parked: closing waits for it
		}
	}()
	for i := 0; tailSeg(t, g.pr) != x; i++ {
		if i == 16*(engine.DefaultLogPrepareAhead+4) {
			t.Skipf("log segment %d not reused by the log", x)
		}
		put(fmt.Sprintf("w%02d", i), big)
	}
	t.Logf("log segment %d freed by GC (%+v), then the log's tail again", x, st)
	parked = false
	close(c2Go)
	compact()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := g.shipper.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("backups dropped: %v", d)
	}
	checkContent(t, "primary", g.pr, model)
	checkLevels(t, "backup", g.pr, copyOf(g.reps[0]))
	checkContent(t, "backup", copyOf(g.reps[0]), model)
}

func tailSeg(t *testing.T, r *engine.Region) uint64 {
	t.Helper()
	tail, err := r.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	return tail.Segment
}

func levelPairs(r *engine.Region, n int) int64 {
	for _, l := range r.Levels() {
		if l.Level == n {
			return l.Pairs
		}
	}
	return 0
}

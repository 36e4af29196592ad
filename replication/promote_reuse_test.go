package replication

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tebis-go/tebis/engine"
)

// TestPromoteAdoptsReusedLogSegment: GC frees log segment Y (the backup
// applies its LOG_FREE), the log hands Y's number out again as its tail,
// the reused Y fills with acknowledged writes and the log switches to Z;
// the primary dies before the backup applied Y's FLUSH. The promoted
// backup must adopt the buffer half holding the reused Y (its marker names
// Y with a new sequence): the freed Y was another segment.
//
// Scale: 64 KiB segments and 4000-byte values with an L0 that never
// fills (no compaction, GC only on demand): a log segment fills and is
// sealed with no partial flush, as one of 2 MiB does under the default L0
// of 96K pairs; the property the bug needs is that, not the size.
func TestPromoteAdoptsReusedLogSegment(t *testing.T) {
	var armed atomic.Uint64 // Y: its sealed flush is held back, then lost
	release := make(chan struct{})
	fail := map[int]func(*Command) error{0: func(c *Command) error {
		if y := armed.Load(); y != 0 && c.Kind == CmdFlush && c.Segment == y && c.Sealed && len(c.Data) == 0 {
			<-release
			return errors.New("the primary died before this flush arrived")
		}
		return nil
	}}
	g := newReplGroup(t, 1<<20, []Mode{SendIndex}, fail, func(o engine.Options) engine.Options {
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
	val := func(tag string) []byte { return bytes.Repeat([]byte(tag), 4000/len(tag)) }
	// Y: the first log segment, filled with keys overwritten later (dead).
	y := tailSeg(t, g.pr)
	ySeq := g.pr.LogSegments()[0].Seq
	for i := 0; tailSeg(t, g.pr) == y; i++ {
		put(fmt.Sprintf("a%03d", i), val(fmt.Sprintf("a%d.", i)))
	}
	for i := 0; i < 20; i++ {
		put(fmt.Sprintf("a%03d", i), []byte("small"))
	}
	// The recovery point moves past Y, wholly dead: the compaction (or GC)
	// frees it.
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	st, err := g.pr.GC()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range g.pr.LogSegments() {
		if l.Segment == y && l.Seq == ySeq {
			t.Fatalf("log segment %d (all dead) not freed: %+v %+v", y, st, g.pr.LogSegments())
		}
	}
	g.settle() // the backup applied Y's LOG_FREE
	// The log moves on until its tail is Y's number again.
	for i := 0; tailSeg(t, g.pr) != y; i++ {
		if i == 200 {
			t.Fatalf("log segment %d not reused by the log", y)
		}
		put(fmt.Sprintf("b%03d", i), val("b."))
	}
	armed.Store(y)
	// The reused Y fills (acknowledged writes, no partial flush), the log
	// switches to Z, one more write lands in Z.
	for i := 0; tailSeg(t, g.pr) == y; i++ {
		put(fmt.Sprintf("y%03d", i), val(fmt.Sprintf("y%d.", i)))
	}
	put("z000", val("z."))
	close(release)
	g.failPrimary()
	np, err := g.reps[0].Promote(5)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted", np, model)
}

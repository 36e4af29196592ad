package replication

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// TestCheckRefusesMissedSameShapeCompaction: a backup misses an L0->L1
// compaction that leaves L1 with the same shape (the same keys updated
// with values of the same length: same height, pairs, bytes, nodes,
// segment count, root offset) and a delete balanced by an insert. The
// primary's CHECK must refuse it (the recovery point moved): accepted, the
// backup's L1 holds the deleted key and the old values, and a promotion
// would serve them.
//
// Sizes: the check compares level metadata, which no segment or L0 size
// changes; 64 KiB segments and an L0 that only explicit compactions empty
// make the missed compaction exactly one L0->L1.
func TestCheckRefusesMissedSameShapeCompaction(t *testing.T) {
	var broken atomic.Bool
	fail := map[int]func(*Command) error{0: func(*Command) error {
		if broken.Load() {
			return errors.New("link down")
		}
		return nil
	}}
	g := newReplGroup(t, 1<<20, []Mode{SendIndex}, fail)
	put := func(k string, v []byte) {
		t.Helper()
		if err := g.pr.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	val := func(tag string, i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%s%03d.", tag, i), 20) }
	for i := range 200 {
		put(fmt.Sprintf("k%04d", i), val("a", i))
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	before := g.pr.Levels()
	// The backup's stream breaks; the primary compacts updates of every
	// key, and a delete balanced by an insert, into L1.
	broken.Store(true)
	for i := range 200 {
		put(fmt.Sprintf("k%04d", i), val("b", i))
	}
	if err := g.pr.Delete([]byte("k0100")); err != nil {
		t.Fatal(err)
	}
	put("k0100x", val("b", 100)[1:])
	if err := g.pr.Delete([]byte("k0100x")); err != nil {
		t.Fatal(err)
	}
	put("k0100", val("c", 100))
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	checkLevels(t, "backup that missed the compaction (same shape)", g.pr, copyOf(g.reps[0]))
	if after := g.pr.Levels(); len(after) != len(before) || after[0].Segments[0] == before[0].Segments[0] && after[0].Seqs[0] == before[0].Seqs[0] {
		t.Fatalf("setup: L1 was not replaced: %+v -> %+v", before, after)
	}
	st := primaryState(g.pr)
	d, err := replwire.DecodeState(st.Encode())
	if err != nil {
		t.Fatal(err)
	}
	err = g.reps[0].Handle(&Command{Kind: CmdCheck, Region: 7, Epoch: 3, Data: d.Encode()})
	if !errors.Is(err, ErrOutOfSync) {
		t.Fatalf("check of a backup that missed an L0->L1 compaction of the same shape: %v, want %v", err, ErrOutOfSync)
	}
}

// TestStateRecoveryPointRoundTrip: the recovery point travels in the
// check's state; a malformed one is refused.
func TestStateRecoveryPointRoundTrip(t *testing.T) {
	st := replwire.State{Logs: []engine.LogSegment{{Segment: 3, Seq: 9, End: 100}}, RP: replwire.RecoveryPoint{Segment: 3, Seq: 9, Offset: 4096}}
	d, err := replwire.DecodeState(st.Encode())
	if err != nil || d.RP != st.RP {
		t.Fatalf("round trip: %+v %v", d.RP, err)
	}
	for name, rp := range map[string]replwire.RecoveryPoint{
		"segment without seq":   {Segment: 3, Offset: 4096},
		"seq without segment":   {Seq: 9, Offset: 4096},
		"offset without either": {Offset: 4096},
		"negative offset":       {Segment: 3, Seq: 9, Offset: -1},
	} {
		bad := st
		bad.RP = rp
		if _, err := replwire.DecodeState(bad.Encode()); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	b := st.Encode()
	if _, err := replwire.DecodeState(b[:len(b)-1]); !errors.Is(err, ErrMalformed) {
		t.Errorf("truncated recovery point: %v", err)
	}
}

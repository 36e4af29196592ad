package engine

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestL0OverwriteGarbagePersisted: garbage charged when a write replaces a
// key still in L0 (Region.write) can reach sealed segments whose end the
// log persisted already (the preparer does so as soon as the next segment
// is prepared). The next compaction must persist it: after a reopen the
// segments before the recovery point carry the garbage they had in memory
// (what GC picks candidates by, and what inspect summary shows).
func TestL0OverwriteGarbagePersisted(t *testing.T) {
	fs := vfs.NewMem()
	v := mustOpen(t, smallOpts(fs))
	r := mustRegion(t, v, 1)
	val := bytes.Repeat([]byte("v"), 4000)
	put := func(k []byte) {
		t.Helper()
		if err := r.Put(k, val); err != nil {
			t.Fatal(err)
		}
	}
	// 50 records over 3+ segments, every fifth of one of 10 hot keys.
	for i := range 50 {
		if i%5 == 0 {
			put(key(i / 5))
		} else {
			put(key(100 + i))
		}
	}
	// The sealed segments' ends (and garbage: none yet) are persisted, as
	// the preparer does when it prepares the next segment.
	if err := r.log.saveEnds(); err != nil {
		t.Fatal(err)
	}
	// Rewriting the hot keys charges their first records' segments.
	for i := range 10 {
		put(key(i))
	}
	// New keys fill L0 (64 pairs): it freezes and the compaction moves the
	// recovery point past the charged segments.
	for i := range 20 {
		put(key(1000 + i))
	}
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	want := map[uint64]int64{}
	for _, ls := range sealedBeforeRP(r) {
		if ls.garbage > 0 {
			want[ls.idx] = ls.garbage
		}
	}
	if len(want) < 2 {
		t.Fatalf("only %d segments before the recovery point carry garbage (%v): the test no longer exercises L0 overwrites of sealed segments", len(want), want)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = mustOpen(t, smallOpts(fs))
	defer v.Close()
	r = mustRegion(t, v, 1)
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	for _, ls := range r.log.segs {
		if w, ok := want[ls.idx]; ok && ls.garbage != w {
			t.Errorf("log segment %d: %d bytes of garbage after reopen, %d before", ls.idx, ls.garbage, w)
		}
	}
}

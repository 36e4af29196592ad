package engine

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPreparedHeaderLostOnCrash: the preparer writes a next segment's
// header without syncing it. A crash right after the preparation (its
// metadata batch synced, the header not) leaves the log's last segment
// with no header; the offline check accepts it, recovery makes it the
// empty tail and writes its header again, and the records it then takes
// survive a reopen.
func TestPreparedHeaderLostOnCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	o := smallOpts(mem)
	o.L0Pairs = 100000 // no compaction: its sync would make the header durable
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	r.Resume()

	// A synced prefix, then puts until the next segment is prepared,
	// without a sync after them.
	n := 0
	put := func() {
		t.Helper()
		if err := r.Put(key(n), sealValue(n)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	for i := 0; i < 5; i++ {
		put()
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	synced := n
	prepared := func() *logSeg {
		r.log.mu.Lock()
		defer r.log.mu.Unlock()
		return r.log.next
	}
	for prepared() == nil && r.log.pos()&uint64(o.SegmentSize-1) < uint64(o.SegmentSize/2) {
		put()
	}
	deadline := time.Now().Add(5 * time.Second)
	for prepared() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	next := prepared()
	if next == nil {
		t.Fatal("no segment prepared within 5 s of the tail's half")
	}
	if v.Stats().LogSeals != 0 {
		t.Fatal("the first segment sealed: its seal made the header durable")
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}

	// The crash lost the header, and the offline check accepts that.
	in, err := OpenInspector(clone, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.segHeader(next.seg); err == nil {
		in.Close()
		t.Fatalf("segment %d's header survived the crash: the test does not reach the lost header", next.seg)
	}
	rep := in.Check()
	in.Close()
	if !rep.OK() {
		t.Fatalf("check of the crashed volume: %+v", rep.Problems)
	}

	// Recovery: the synced prefix, nothing after it.
	checkPrefix(t, clone, n, synced)
	v = mustOpen(t, smallOpts(clone))
	r = mustRegion(t, v, 1)
	r.Resume()
	if got := r.LogSegments(); len(got) != 2 || got[1].Segment != next.seg {
		t.Fatalf("recovered log %+v, want 2 segments, the last %d", got, next.seg)
	}
	// The empty tail takes records under its rewritten header.
	n = synced
	for r.log.pos()>>r.log.g.shift == next.idx && r.log.pos()&uint64(o.SegmentSize-1) < uint64(o.SegmentSize/4) {
		put()
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	written := n
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	checkPrefix(t, clone, written, written)
}

package engine

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestApplyWritesCommitOnce: in sync mode ApplyPut, ApplyDelete and
// ApplyLogRecord (a Build-Index backup's batch) take no fdatasync each;
// CommitApplied makes the whole batch durable with one (a crash right
// after keeps every write of it, the completion table included). In async
// mode CommitApplied syncs nothing.
func TestApplyWritesCommitOnce(t *testing.T) {
	mem := vfs.NewCrashableMem()
	o := smallOpts(mem)
	o.SegmentSize, o.L0Pairs, o.SyncMode = 1<<20, 1<<14, SyncModeSync
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	const seq = 99
	before := v.Stats().Syncs
	for i := range 300 {
		if err := r.ApplyPut(key(i), []byte(fmt.Sprint("v", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if err := r.ApplyDelete(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		id := RequestID{Client: 3, Seq: uint64(1 + i)}
		val := []byte(fmt.Sprint("once", i))
		b := make([]byte, recordSize(len(key(1000+i)), payloadLen(id, val)))
		encodeRecord(b, seq, recPut, id, key(1000+i), val)
		if _, err := r.ApplyLogRecord(b, seq); err != nil {
			t.Fatal(err)
		}
		if i == 50 { // a re-delivery does not wait for its original either
			if _, err := r.ApplyLogRecord(b, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := v.Stats().Syncs - before; n != 0 {
		t.Fatalf("%d fdatasyncs applying the batch, want none", n)
	}
	if err := r.CommitApplied(); err != nil {
		t.Fatal(err)
	}
	if n := v.Stats().Syncs - before; n != 1 {
		t.Fatalf("%d fdatasyncs for the batch's commit, want 1", n)
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cv := mustOpen(t, func() Options { c := o; c.FS = clone; return c }())
	defer cv.Close()
	cr, ok := cv.Region(1)
	if !ok {
		t.Fatal("region 1 is gone after a crash")
	}
	for i := range 300 {
		want := ""
		if i >= 100 {
			want = fmt.Sprint("v", i)
		}
		checkValue(t, cr, key(i), want, "after a crash")
	}
	for i := range 100 {
		checkValue(t, cr, key(1000+i), fmt.Sprint("once", i), "after a crash")
	}
	if n := cr.RequestTableLen(); n != 100 {
		t.Fatalf("the completion table holds %d outcomes after a crash, want 100", n)
	}

	ao := smallOpts(vfs.NewMem())
	ao.SyncMode = SyncModeAsync
	av := mustOpen(t, ao)
	defer av.Close()
	ar := mustRegion(t, av, 1)
	if err := ar.ApplyPut(key(1), []byte("v")); err != nil {
		t.Fatal(err)
	}
	before = av.Stats().Syncs
	if err := ar.CommitApplied(); err != nil {
		t.Fatal(err)
	}
	if n := av.Stats().Syncs - before; n != 0 {
		t.Fatalf("async: %d fdatasyncs for a commit, want none", n)
	}
}

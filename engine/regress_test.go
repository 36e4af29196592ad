package engine

// Regression tests for format bugs found by review: a record that ends
// exactly at a segment's end, 64 KiB nodes overflowing the u16 "used"
// field, and an empty (non-nil) region end key.

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// 64 KiB segments: data area 61440 = 512 records of 11+11+98 bytes.
func TestLogPositionAdvancesPastFullSegments(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 100000
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	val := bytes.Repeat([]byte("x"), 98)
	var last uint64
	for i := 0; i < 1024; i++ {
		if err := r.Put(key(i), val); err != nil {
			t.Fatal(err)
		}
		p := r.log.pos()
		if off := p & (1<<16 - 1); p <= last || off < segHeaderSize {
			t.Fatalf("after record %d: log position %#x (previous %#x)", i, p, last)
		}
		last = p
	}
}

func TestReopenAfterCompactingLogThatFillsSegmentExactly(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 512
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	val := bytes.Repeat([]byte("x"), 98)
	for i := 0; i < 513; i++ {
		if err := r.Put(key(i), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	t.Logf("rp %#x", r.rp)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = mustOpen(t, o)
	r, _ = v.Region(1)
	t.Logf("after reopen: tail idx %d off %d", r.log.tail.idx, r.log.off)
	for i := 0; i < 513; i++ {
		if _, err := r.Get(key(i)); err != nil {
			t.Errorf("get %d: %v", i, err)
		}
	}
	if err := r.Put(key(9999), val); err != nil {
		t.Fatal(err)
	}
	v.Close()
	v, err := Open(o)
	if err != nil {
		t.Fatalf("second reopen: %v", err)
	}
	v.Close()
}

func TestPutAfterRecoveryCompactsLogThatFillsSegmentExactly(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 512
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	val := bytes.Repeat([]byte("x"), 98)
	for i := 0; i < 512; i++ {
		if err := r.Put(key(i), val); err != nil {
			t.Fatal(err)
		}
	}
	v.Close()
	v = mustOpen(t, o) // L0 is full: frozen at recovery and compacted
	r, _ = v.Region(1)
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	t.Logf("rp %#x", r.rp)
	v.Close()
	v = mustOpen(t, o)
	r, _ = v.Region(1)
	t.Logf("after reopen: tail idx %d off %d buf %d", r.log.tail.idx, r.log.off, len(r.log.buf))
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("put panics: %v", p)
		}
	}()
	if err := r.Put(key(9999), val); err != nil {
		t.Fatal(err)
	}
	v.Close()
}

func TestSyncPutsSurviveCrashWhenRecordsFillSegmentsExactly(t *testing.T) {
	mem := vfs.NewCrashableMem()
	o := smallOpts(mem)
	o.SyncMode = SyncModeSync
	o.L0Pairs = 100000
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	val := bytes.Repeat([]byte("x"), 98)
	for i := 0; i < 1024; i++ {
		if err := r.Put(key(i), val); err != nil {
			t.Fatal(err)
		}
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	v.Close()
	o.FS = clone
	v = mustOpen(t, o)
	defer v.Close()
	r, _ = v.Region(1)
	for i := 0; i < 1024; i++ {
		if _, err := r.Get(key(i)); err != nil {
			t.Errorf("acknowledged put %d lost: %v", i, err)
		}
	}
}

// The largest node size fits the u16 "used" field even when full.
func TestLargestNodeSizeFitsUsedField(t *testing.T) {
	w := newNodeWriter(32<<10, true, 0)
	for i := 0; w.fits(11); i++ {
		w.addLeaf([]byte(fmt.Sprintf("key%08d", i)), entry{ptr: 1 << 21, vlen: 1})
	}
	if _, err := decodeNode(w.seal(9), 1<<21|4096, newGeometry(1<<21, 32<<10), 9); err != nil {
		t.Fatal(err)
	}
	o := smallOpts(vfs.NewMem())
	o.SegmentSize, o.NodeSize = 1<<20, 64<<10
	if _, err := Open(o); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("64 KiB nodes: %v, want ErrBadOptions", err)
	}
}

func TestVolumeWith32KiBNodesCompactsAndReads(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.SegmentSize, o.NodeSize, o.L0Pairs = 1<<20, 32<<10, 4000
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	for i := 0; i < 4001; i++ {
		if err := r.Put(key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Get(key(0)); err != nil {
		t.Fatal(err)
	}
}

func TestCreateRegionRejectsEmptyEndKey(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	if _, err := v.CreateRegion(RegionDesc{ID: 3, End: []byte{}}); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("empty end key: %v, want ErrBadOptions", err)
	}
}

package engine

import (
	"errors"
	"fmt"
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

// setBytes overwrites [off, off+n) of the volume's segments file in fs
// with f(i) for the i-th byte.
func setBytes(t *testing.T, fs vfs.FS, off, n int64, f func(i int64) byte) {
	t.Helper()
	file, err := fs.OpenReadWrite("vol/"+dataFileName, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	b := make([]byte, n)
	for i := range b {
		b[i] = f(int64(i))
	}
	if _, err := file.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedLogHeaderIsCorruption: what a lost header of a prepared
// segment looks like is told from damage. A tail holding synced records
// whose header area and first record are overwritten (with garbage, or
// zeros: records after them still verify), and an unsealed segment before
// the tail (its end not saved), wiped whole while the tail holds records,
// are reported corrupt
// by recovery and by the offline check, in both sync modes.
func TestDamagedLogHeaderIsCorruption(t *testing.T) {
	garbage := func(i int64) byte { return byte(i*7 + 3) }
	zeros := func(int64) byte { return 0 }
	for _, mode := range []SyncMode{SyncModeAsync, SyncModeSync} {
		for _, c := range []struct {
			name  string
			fill  func(int64) byte
			whole bool // wipe the segment before the tail instead
		}{
			{"tail garbage", garbage, false},
			{"tail zeros", zeros, false},
			{"segment before the tail wiped", zeros, true},
		} {
			t.Run(fmt.Sprintf("%s/sync mode %d", c.name, mode), func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				o := smallOpts(mem)
				o.SyncMode = mode
				o.L0Pairs = 100000
				o.HoldBackground = true // no preparer: the first segment's end stays unsaved
				v := mustOpen(t, o)
				r := mustRegion(t, v, 1)
				first := r.log.tail.seg
				n := 0
				for r.log.pos()>>v.g.shift == 0 || r.log.pos()&uint64(o.SegmentSize-1) < 3*segHeaderSize {
					if err := r.Put(key(n), sealValue(n)); err != nil {
						t.Fatal(err)
					}
					n++
				}
				if err := r.Sync(); err != nil {
					t.Fatal(err)
				}
				tail, g := r.log.tail.seg, v.g
				// A crash now: the first segment's end is not saved (Close
				// would save it).
				fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
				if err := v.Close(); err != nil {
					t.Fatal(err)
				}
				o.FS = fs
				if c.whole {
					in, err := OpenInspector(fs, "vol", false)
					if err != nil {
						t.Fatal(err)
					}
					st := in.states[1]
					in.Close()
					if len(st.logs) != 2 || st.logs[0].end != 0 {
						t.Fatalf("log after the crash %+v: want the first of 2 segments unsealed", st.logs)
					}
				}
				if c.whole {
					setBytes(t, fs, g.fileOff(first), g.segSize, c.fill)
				} else {
					setBytes(t, fs, g.fileOff(tail), 2*segHeaderSize, c.fill)
				}
				in, err := OpenInspector(fs, "vol", false)
				if err != nil {
					t.Fatal(err)
				}
				rep := in.Check()
				in.Close()
				if rep.OK() {
					t.Errorf("the offline check found nothing wrong (%d records)", rep.Records)
				}
				o.HoldBackground = false
				if v, err := Open(o); !errors.Is(err, ErrCorrupt) {
					if err == nil {
						v.Close()
					}
					t.Fatalf("open: %v, want ErrCorrupt", err)
				}
			})
		}
	}
}

package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestDamagedLogHeaderIsCorruption: a log segment holding synced records
// whose header is damaged is corruption, reported by recovery and by the
// offline check, in both sync modes: a tail whose header area and first
// record are overwritten (with garbage, or zeros: records after them still
// verify), a tail wiped whole, and an unsealed segment before the tail
// (its end not saved) wiped whole; with one segment prepared at a time and
// with several (the tail is then not the last segment of the log). (A log
// that took a segment with an unreadable header for one prepared just
// before a crash would lose them silently.)
func TestDamagedLogHeaderIsCorruption(t *testing.T) {
	garbage := func(i int64) byte { return byte(i*7 + 3) }
	zeros := func(int64) byte { return 0 }
	for _, mode := range []SyncMode{SyncModeAsync, SyncModeSync} {
		for _, ahead := range []int{1, DefaultLogPrepareAhead} {
			for _, c := range []struct {
				name  string
				fill  func(int64) byte
				wipe  bool // wipe the whole segment
				first bool // the segment before the tail, not the tail
			}{
				{"tail garbage", garbage, false, false},
				{"tail zeros", zeros, false, false},
				{"tail wiped", zeros, true, false},
				{"segment before the tail wiped", zeros, true, true},
			} {
				t.Run(fmt.Sprintf("%s/%v/ahead=%d", c.name, mode, ahead), func(t *testing.T) {
					mem := vfs.NewCrashableMem()
					o := smallOpts(mem)
					o.SyncMode = mode
					o.LogPrepareAhead = ahead
					o.L0Pairs = 100000
					o.HoldBackground = true // no preparer: the first segment's end stays unsaved
					v := mustOpen(t, o)
					r := mustRegion(t, v, 1)
					first := r.log.tail.seg
					// No preparer (HoldBackground): prepare ahead now, before
					// any end is there to save.
					if err := r.log.prepare(ahead); err != nil {
						t.Fatal(err)
					}
					r.log.mu.Lock()
					prepared := len(r.log.next)
					r.log.mu.Unlock()
					if prepared != ahead {
						t.Fatalf("%d segments prepared, want %d", prepared, ahead)
					}
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
					if c.first {
						in, err := OpenInspector(fs, "vol", false)
						if err != nil {
							t.Fatal(err)
						}
						st := in.states[1]
						in.Close()
						if len(st.logs) < 2 || st.logs[0].seg != first || st.logs[0].end != 0 {
							t.Fatalf("log after the crash %+v: want its first segment (%d) unsealed, then more", st.logs, first)
						}
					}
					seg, size := tail, int64(2*segHeaderSize)
					if c.first {
						seg = first
					}
					if c.wipe {
						size = g.segSize
					}
					setBytes(t, fs, g.fileOff(seg), size, c.fill)
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
}

package engine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// prepareOpts are the options of the log preparation tests: the segment
// size users run (2 MiB: a batch of prepared segments is 6 MiB of a
// growth step's 32), async, 4 KiB values, no compaction unless asked.
func prepareOpts(fs vfs.FS, ahead int) Options {
	o := smallOpts(fs)
	o.SegmentSize = DefaultSegmentSize
	o.L0Pairs = 1 << 20
	o.LogPrepareAhead = ahead
	return o
}

func prepareValue(i int) []byte {
	return bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(i >> 16), 0xc3}, 1024)
}

// putUntilSeals writes 4 KiB values from key n on until the volume has
// sealed seals log segments, and returns the next key.
func putUntilSeals(t *testing.T, v *Volume, r *Region, n, seals int) int {
	t.Helper()
	for v.Stats().LogSeals < uint64(seals) {
		if err := r.Put(key(n), prepareValue(n)); err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}

// TestPrepareAheadBatchesPreparation: with LogPrepareAhead 4, a region
// writing a segment after another prepares its next segments three at a
// time, one fdatasync of the segment file for the three headers; with 1,
// one per segment. Segment file fdatasyncs per sealed segment are the
// seal's own plus the preparations'.
func TestPrepareAheadBatchesPreparation(t *testing.T) {
	const seals = 24
	syncs := map[int]uint64{}
	for _, ahead := range []int{1, 4} {
		v := mustOpen(t, prepareOpts(vfs.NewMem(), ahead))
		r := mustRegion(t, v, 1)
		r.Resume()
		putUntilSeals(t, v, r, 0, seals)
		r.log.waitSealed()
		st := v.Stats()
		syncs[ahead] = st.Syncs
		if err := r.log.prepare(); err != nil { // the preparer may not have refilled yet
			t.Fatal(err)
		}
		r.log.mu.Lock()
		prepared := len(r.log.next)
		r.log.mu.Unlock()
		t.Logf("LogPrepareAhead %d: %d seals, %d fdatasyncs, %d segments prepared", ahead, st.LogSeals, st.Syncs, prepared)
		if prepared < 1 || prepared > ahead {
			t.Errorf("LogPrepareAhead %d: %d segments prepared", ahead, prepared)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// ahead 1: a seal and a preparation per segment. ahead 4: a seal per
	// segment and a preparation per three (plus the first, synchronous).
	if syncs[1] < 2*seals-2 {
		t.Fatalf("LogPrepareAhead 1: %d fdatasyncs for %d seals, want about %d", syncs[1], seals, 2*seals)
	}
	if max4 := uint64(seals + seals/3 + 3); syncs[4] > max4 {
		t.Fatalf("LogPrepareAhead 4: %d fdatasyncs for %d seals, want at most %d", syncs[4], seals, max4)
	}
}

// TestPreparedSegmentsAfterCrash: a crash while several segments are
// prepared after the tail (their headers synced, named in the metadata, no
// record in them) recovers every synced write; the recovered log continues
// in the last of them, the others become empty sealed segments, and those
// are freed once the recovery point passes them. Twice in a row (a second
// crash before their ends were saved), and in both sync modes.
func TestPreparedSegmentsAfterCrash(t *testing.T) {
	for _, mode := range []SyncMode{SyncModeAsync, SyncModeSync} {
		t.Run(mode.String(), func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			o := prepareOpts(mem, 4)
			o.SyncMode = mode
			v := mustOpen(t, o)
			r := mustRegion(t, v, 1)
			r.Resume()
			n := putUntilSeals(t, v, r, 0, 5)
			// A few records into the tail, then wait for the preparer to
			// have refilled (the fifth switch left one prepared).
			for i := 0; i < 10; i++ {
				if err := r.Put(key(n), prepareValue(n)); err != nil {
					t.Fatal(err)
				}
				n++
			}
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
			r.log.prepare()
			r.log.mu.Lock()
			prepared := len(r.log.next)
			r.log.mu.Unlock()
			if prepared < 2 {
				t.Fatalf("%d segments prepared after the tail, want several", prepared)
			}
			fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
			v.Close()
			for round := 1; round <= 2; round++ {
				o.FS = fs
				v = mustOpen(t, o)
				r, ok := v.Region(1)
				if !ok {
					t.Fatalf("round %d: region lost", round)
				}
				for i := 0; i < n; i++ {
					got, err := r.Get(key(i))
					if err != nil || !bytes.Equal(got, prepareValue(i)) {
						t.Fatalf("round %d: key %d after the crash: %d bytes, %v", round, i, len(got), err)
					}
				}
				l := r.log
				l.mu.Lock()
				empty := 0
				for _, s := range l.segs {
					if s.end == segHeaderSize {
						empty++
					}
				}
				tailLast := l.segs[len(l.segs)-1] == l.tail
				l.mu.Unlock()
				if !tailLast || empty < round*(prepared-1) {
					t.Fatalf("round %d: tail last %v, %d empty sealed segments, want at least %d", round, tailLast, empty, round*(prepared-1))
				}
				if round == 1 {
					// Its own preparation, then a crash before any end is saved.
					r.log.prepare()
					fs = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
					v.Close()
					continue
				}
				// The recovery point passes the empty segments: they are freed.
				for i := 0; i < 100; i++ {
					if err := r.Put(key(n+i), []byte("after")); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Compact(); err != nil {
					t.Fatal(err)
				}
				l.mu.Lock()
				left := 0
				for _, s := range l.segs {
					if s.end == segHeaderSize {
						left++
					}
				}
				l.mu.Unlock()
				if left != 0 {
					t.Fatalf("%d empty sealed segments left after a compaction moved the recovery point past them", left)
				}
				if err := v.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestPrepareAheadTakesNoNeededSpace: on a capped volume, a log preparing
// segments ahead writes as much as one preparing a segment at a time
// before it runs out of space, and the volume does not report a want of
// space earlier: segments prepared ahead come only out of room to spare.
func TestPrepareAheadTakesNoNeededSpace(t *testing.T) {
	written, healthy := map[int]int{}, map[int]int{}
	for _, ahead := range []int{1, 4} {
		o := prepareOpts(vfs.NewMem(), ahead)
		o.MaxSegments = 20
		v := mustOpen(t, o)
		r := mustRegion(t, v, 1)
		r.Resume()
		n := 0
		healthy[ahead] = -1
		for ; n < 20*600; n++ {
			err := r.Put(key(n), prepareValue(n))
			if errors.Is(err, ErrNoSpace) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h := v.Health(); h != nil && healthy[ahead] < 0 {
				healthy[ahead] = n
			}
		}
		written[ahead] = n
		t.Logf("LogPrepareAhead %d: %d puts before the volume was full, health first failed after %d", ahead, n, healthy[ahead])
		v.Close()
	}
	if written[4] != written[1] || written[1] == 0 {
		t.Fatalf("puts before the volume was full: %d preparing 4 ahead, %d one at a time", written[4], written[1])
	}
	// When the volume first reports it depends on when the preparer ran
	// (it tries once the tail is half full): allow half a segment's puts.
	if healthy[4] < healthy[1]-256 {
		t.Fatalf("preparing 4 ahead, the volume reported a want of space after %d puts, %d preparing one at a time", healthy[4], healthy[1])
	}
}

func TestLogPrepareAheadOption(t *testing.T) {
	for _, bad := range []int{-1, maxLogPrepareAhead + 1} {
		o := smallOpts(vfs.NewMem())
		o.LogPrepareAhead = bad
		if _, err := Open(o); !errors.Is(err, ErrBadOptions) {
			t.Fatalf("LogPrepareAhead %d: %v, want ErrBadOptions", bad, err)
		}
	}
	o, err := smallOpts(vfs.NewMem()).withDefaults()
	if err != nil || o.LogPrepareAhead != DefaultLogPrepareAhead {
		t.Fatal(fmt.Sprint(o.LogPrepareAhead, err))
	}
}

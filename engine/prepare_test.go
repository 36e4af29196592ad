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
		if err := r.log.prepare(r.log.v.opts.LogPrepareAhead); err != nil { // the preparer may not have refilled yet
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
	// (Some batches are cut short where the file would have to grow, and a
	// writer that finds none prepared prepares one alone: the bound is
	// against ahead 1's, not exact.)
	if syncs[4]+seals/3 > syncs[1] {
		t.Fatalf("LogPrepareAhead 4: %d fdatasyncs for %d seals, want at least %d fewer than one at a time (%d)", syncs[4], seals, seals/3, syncs[1])
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
			r.log.prepare(r.log.v.opts.LogPrepareAhead)
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
					r.log.prepare(r.log.v.opts.LogPrepareAhead)
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
// space earlier: segments prepared ahead come only out of room to spare
// (more than a margin of free segments), which the log then uses itself.
func TestPrepareAheadTakesNoNeededSpace(t *testing.T) {
	written, unhealthy := map[int]int{}, map[int]int{}
	spares := 0
	for _, ahead := range []int{1, 4} {
		o := prepareOpts(vfs.NewMem(), ahead)
		o.MaxSegments = 40
		o.GrowStep = 4 * o.SegmentSize // a margin of 2+4*4 segments
		v := mustOpen(t, o)
		r := mustRegion(t, v, 1)
		r.Resume()
		n := 0
		unhealthy[ahead] = -1
		for ; n < 40*600; n++ {
			err := r.Put(key(n), prepareValue(n))
			if errors.Is(err, ErrNoSpace) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h := v.Health(); h != nil && unhealthy[ahead] < 0 {
				unhealthy[ahead] = n
			}
			if ahead > 1 {
				r.log.mu.Lock()
				spares = max(spares, len(r.log.next))
				r.log.mu.Unlock()
			}
		}
		if unhealthy[ahead] < 0 {
			unhealthy[ahead] = n // healthy until the first refusal
		}
		written[ahead] = n
		t.Logf("LogPrepareAhead %d: %d puts before the volume was full, health first failed after %d", ahead, n, unhealthy[ahead])
		v.Close()
	}
	if spares < 2 {
		t.Fatalf("LogPrepareAhead 4 never had more than %d segments prepared", spares)
	}
	if written[4] != written[1] || written[1] == 0 {
		t.Fatalf("puts before the volume was full: %d preparing 4 ahead, %d one at a time", written[4], written[1])
	}
	// When the volume first reports depends on when the preparer ran (it
	// tries once the tail is half full): allow a segment's puts (about 500).
	if unhealthy[4] < unhealthy[1]-600 {
		t.Fatalf("preparing 4 ahead, the volume reported a want of space after %d puts, %d preparing one at a time", unhealthy[4], unhealthy[1])
	}
}

// TestPrepareAheadNeedsHeadroom: on an uncapped volume, segments are
// prepared beyond the next only while the file system has room for the
// segment file to grow by spareSteps steps beyond the space reserve, and
// never while the volume reports a want of space.
func TestPrepareAheadNeedsHeadroom(t *testing.T) {
	for _, c := range []struct {
		name   string
		avail  uint64
		spares bool
	}{
		{"plenty", 1 << 40, true},
		{"short", DefaultSpaceReserve + spareSteps*growChunk - 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			mem.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: c.avail, TotalBytes: 1 << 41, UsedBytes: 1 << 30})
			o := prepareOpts(mem, 4)
			o.SpaceReserve = DefaultSpaceReserve
			v := mustOpen(t, o)
			defer v.Close()
			r := mustRegion(t, v, 1)
			r.Resume()
			putUntilSeals(t, v, r, 0, 3)
			if err := r.log.prepare(4); err != nil {
				t.Fatal(err)
			}
			r.log.mu.Lock()
			prepared := len(r.log.next)
			r.log.mu.Unlock()
			if got := prepared > 1; got != c.spares {
				t.Fatalf("%d bytes free: %d segments prepared", c.avail, prepared)
			}
		})
	}
	v := mustOpen(t, prepareOpts(vfs.NewMem(), 4))
	defer v.Close()
	err := fmt.Errorf("%w: test", ErrNoSpace)
	v.setNoSpace(err)
	if _, ok := v.allocSpare(); ok {
		t.Fatal("a spare segment was allocated while the volume reports a want of space")
	}
}

// TestClosePreparedSegmentsFreed: a clean close frees the prepared
// segments: reopening again and again leaves no empty segment behind and
// the log does not grow, and every write is still there.
func TestClosePreparedSegmentsFreed(t *testing.T) {
	mem := vfs.NewMem()
	o := prepareOpts(mem, 4)
	n := 0
	var logSegs []int
	for round := 0; round < 5; round++ {
		v := mustOpen(t, o)
		r, ok := v.Region(1)
		if !ok {
			r = mustRegion(t, v, 1)
		}
		r.Resume()
		for i := 0; i < n; i++ {
			got, err := r.Get(key(i))
			if err != nil || !bytes.Equal(got, prepareValue(i)) {
				t.Fatalf("round %d: key %d: %d bytes, %v", round, i, len(got), err)
			}
		}
		if round == 0 {
			n = putUntilSeals(t, v, r, n, 2)
		}
		// Past half the tail, so the preparer has segments ready.
		for r.log.pos()&uint64(o.SegmentSize-1) < uint64(o.SegmentSize)*3/4 {
			if err := r.Put(key(n), prepareValue(n)); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := r.log.prepare(4); err != nil {
			t.Fatal(err)
		}
		r.log.mu.Lock()
		empty := 0
		for _, s := range r.log.segs {
			if s.end == segHeaderSize {
				empty++
			}
		}
		prepared := len(r.log.next)
		logSegs = append(logSegs, len(r.log.segs)-prepared)
		r.log.mu.Unlock()
		// (After a reopen an in-memory file covers only the bytes written,
		// which leaves little room for spares: at least one is prepared.)
		if empty != 0 || prepared < 1 || round == 0 && prepared < 2 {
			t.Fatalf("round %d: %d empty segments, %d prepared", round, empty, prepared)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Each round fills less than a segment: the tail moves on once at most.
	if logSegs[4] > logSegs[0]+4 {
		t.Fatalf("log segments (prepared ones aside) after each reopen: %v", logSegs)
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

// TestAllocWithinTakesOnlyCoveredSegments: a spare is a segment the file
// covers (below limit), whether it comes off the free list (which can hold
// one past the file's end, put back when growing the file failed) or from
// the high-water mark, and on a capped volume only with more than margin
// segments free.
func TestAllocWithinTakesOnlyCoveredSegments(t *testing.T) {
	used := []segRef{{seg: 1, seq: 1}, {seg: 2, seq: 2}, {seg: 3, seq: 3}, {seg: 4, seq: 4}, {seg: 5, seq: 5}}
	a := newAllocator(0, 6, used) // high-water mark 6
	a.release(5)                  // free: 5, which a file of 5 segments does not cover
	if s, ok := a.allocWithin(5, 0); ok {
		t.Fatalf("took segment %d with the file covering segments below 5", s.seg)
	}
	if s, ok := a.allocWithin(6, 0); !ok || s.seg != 5 {
		t.Fatalf("took %d, %v; want the free segment 5", s.seg, ok)
	}
	if s, ok := a.allocWithin(6, 0); ok {
		t.Fatalf("took segment %d at the high-water mark 6 with the file covering segments below 6", s.seg)
	}
	if s, ok := a.allocWithin(7, 0); !ok || s.seg != 6 {
		t.Fatalf("took %d, %v; want segment 6", s.seg, ok)
	}
	c := newAllocator(10, 1, used) // capped at 10: segments 6..9 free
	if _, ok := c.allocWithin(100, 4); ok {
		t.Fatal("took a spare leaving fewer than the margin free")
	}
	if s, ok := c.allocWithin(100, 3); !ok || s.seg != 6 {
		t.Fatalf("took %d, %v; want segment 6 with 4 free and a margin of 3", s.seg, ok)
	}
}

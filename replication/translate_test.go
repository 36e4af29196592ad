package replication

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
)

func TestSegMap(t *testing.T) {
	m := NewSegMap()
	if err := m.Add(5, 9); err != nil {
		t.Fatal(err)
	}
	if err := m.Add(5, 9); err != nil {
		t.Fatalf("re-adding the same pair: %v", err)
	}
	for _, c := range [][2]uint64{{5, 10}, {6, 9}, {0, 3}, {3, 0}} {
		if err := m.Add(c[0], c[1]); !errors.Is(err, ErrConflict) {
			t.Fatalf("add %v: %v, want ErrConflict", c, err)
		}
	}
	if err := m.Add(7, 11); err != nil {
		t.Fatal(err)
	}
	if l, ok := m.Lookup(7); !ok || l != 11 || m.Len() != 2 {
		t.Fatalf("lookup: %d %v (%d mappings)", l, ok, m.Len())
	}
	m.Remove(5)
	if _, ok := m.Lookup(5); ok {
		t.Fatal("removed mapping still there")
	}
	if err := m.Add(8, 9); err != nil {
		t.Fatalf("target freed by Remove: %v", err)
	}
}

func TestTranslatePointers(t *testing.T) {
	log, index := NewSegMap(), NewSegMap()
	log.Add(3, 40)
	index.Add(7, 70)
	tr, err := NewTranslator(1<<16, log, index)
	if err != nil {
		t.Fatal(err)
	}
	p := func(seg, off uint64) uint64 { return seg<<16 | off }
	if got, err := tr.Translate(p(3, 4096+123), true); err != nil || got != p(40, 4096+123) {
		t.Fatalf("value pointer: %#x %v", got, err)
	}
	if got, err := tr.Translate(p(7, 8192), false); err != nil || got != p(70, 8192) {
		t.Fatalf("child pointer: %#x %v", got, err)
	}
	// The kinds do not mix, and unmapped segments are errors.
	for _, c := range []struct {
		p     uint64
		value bool
	}{{p(3, 4096), false}, {p(7, 4096), true}, {p(9, 4096), true}} {
		if _, err := tr.Translate(c.p, c.value); !errors.Is(err, ErrUnmapped) {
			t.Fatalf("translate %#x value=%v: %v, want ErrUnmapped", c.p, c.value, err)
		}
	}
	// A dead value pointer (segment 0) stays; a child pointer into segment
	// 0 is unmapped. A retired log mapping serves value pointers only.
	if got, err := tr.Translate(p(0, 5000), true); err != nil || got != p(0, 5000) {
		t.Fatalf("dead value pointer: %#x %v", got, err)
	}
	if _, err := tr.Translate(p(0, 4096), false); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("child pointer into segment 0: %v", err)
	}
	tr.Retired = NewSegMap()
	tr.Retired.Add(9, 90)
	if got, err := tr.Translate(p(9, 4200), true); err != nil || got != p(90, 4200) {
		t.Fatalf("retired value pointer: %#x %v", got, err)
	}
	if _, err := tr.Translate(p(9, 4096), false); !errors.Is(err, ErrUnmapped) {
		t.Fatalf("child pointer via a retired log mapping: %v", err)
	}
	if _, err := NewTranslator(3000, log, index); err == nil {
		t.Fatal("segment size 3000 accepted")
	}
}

// recorder keeps a compaction's shipped segments and result.
type recorder struct {
	engine.NopListener
	segs []engine.BuiltSegment
	done []engine.LevelInfo
	logs map[uint64]bool // log segments appended to
}

func (r *recorder) LogAppended(a engine.LogAppend)          { r.logs[a.Segment] = true }
func (r *recorder) LogSealed(engine.LogSeal)                {}
func (r *recorder) LogFlushed(engine.LogFlush)              {}
func (r *recorder) CompactionStarted(engine.CompactionInfo) { r.segs = nil }
func (r *recorder) SegmentBuilt(_ engine.CompactionInfo, b engine.BuiltSegment) {
	b.Data = bytes.Clone(b.Data)
	r.segs = append(r.segs, b)
}
func (r *recorder) CompactionDone(_ engine.CompactionInfo, l engine.LevelInfo) {
	r.done = append(r.done, l)
}

// openVolume opens a volume, closed when the test ends.
func openVolume(tb testing.TB, o engine.Options) *engine.Volume {
	tb.Helper()
	v, err := engine.Open(o)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { v.Close() })
	return v
}

// recordedRegion opens a volume with region 1, a recorder listening.
func recordedRegion(tb testing.TB, o engine.Options) (*engine.Volume, *engine.Region, *recorder) {
	tb.Helper()
	v := openVolume(tb, o)
	r, _, err := v.OpenRegion(engine.RegionDesc{ID: 1})
	if err != nil {
		tb.Fatal(err)
	}
	rec := &recorder{logs: map[uint64]bool{}}
	r.SetListener(rec)
	return v, r, rec
}

// pointers lists every pointer of an index segment image, in order, by
// running the engine's rewriter with an identity map on a copy.
func pointers(t *testing.T, v *engine.Volume, data []byte, seg, seq uint64) (values, children []uint64) {
	t.Helper()
	cp := bytes.Clone(data)
	_, err := v.RewriteIndexSegment(cp, seg, seq, func(p uint64, value bool) (uint64, error) {
		if value {
			values = append(values, p)
		} else {
			children = append(children, p)
		}
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return values, children
}

// TestRewriteShippedSegments: a level built by a real compaction is
// rewritten for another volume through a log map and an index map; every
// value and child pointer lands in the mapped segment at the same offset,
// and a missing mapping is an error that leaves the image unwritten.
func TestRewriteShippedSegments(t *testing.T) {
	o := engine.Options{FS: vfs.NewMem(), Dir: "p", SegmentSize: 64 << 10, L0Pairs: 100000, SyncMode: engine.SyncModeAsync, GCInterval: -1}
	primary, r, rec := recordedRegion(t, o)
	for i := range 3000 {
		if err := r.Put(fmt.Appendf(nil, "key%06d", i), fmt.Appendf(nil, "value-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if len(rec.done) != 1 || len(rec.segs) < 2 || len(rec.logs) < 2 {
		t.Fatalf("%d compactions, %d shipped segments, %d log segments", len(rec.done), len(rec.segs), len(rec.logs))
	}
	o.Dir = "b"
	backup := openVolume(t, o)
	log, index := NewSegMap(), NewSegMap()
	for s := range rec.logs {
		log.Add(s, s+1000) // where the backup would have flushed them
	}
	tr, err := NewTranslator(backup.SegmentSize(), log, index)
	if err != nil {
		t.Fatal(err)
	}
	shift := uint(16)
	for _, s := range rec.segs {
		wantV, wantC := pointers(t, primary, s.Data, s.Segment, s.Seq)
		seg, seq, err := backup.AllocSegment()
		if err != nil {
			t.Fatal(err)
		}
		if err := index.Add(s.Segment, seg); err != nil {
			t.Fatal(err)
		}
		img := bytes.Clone(s.Data)
		if _, err := backup.RewriteIndexSegment(img, seg, seq, tr.PointerMap()); err != nil {
			t.Fatal(err)
		}
		gotV, gotC := pointers(t, backup, img, seg, seq)
		if len(gotV) != len(wantV) || len(gotC) != len(wantC) {
			t.Fatalf("segment %d: %d/%d pointers after, %d/%d before", s.Segment, len(gotV), len(gotC), len(wantV), len(wantC))
		}
		for i, p := range wantV {
			if gotV[i] != (p>>shift+1000)<<shift|p&(1<<shift-1) {
				t.Fatalf("value pointer %d: %#x -> %#x", i, p, gotV[i])
			}
		}
		for i, p := range wantC {
			l, _ := index.Lookup(p >> shift)
			if gotC[i] != l<<shift|p&(1<<shift-1) {
				t.Fatalf("child pointer %d: %#x -> %#x", i, p, gotC[i])
			}
		}
	}
	// A log segment the backup never flushed: the rewrite fails.
	for s := range rec.logs {
		log.Remove(s)
		break
	}
	seg, seq, err := backup.AllocSegment()
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, s := range rec.segs {
		if _, err := backup.RewriteIndexSegment(bytes.Clone(s.Data), seg, seq, tr.PointerMap()); err != nil {
			if !errors.Is(err, ErrUnmapped) {
				t.Fatalf("rewrite with a missing log mapping: %v", err)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no shipped segment needed the removed log segment")
	}
}

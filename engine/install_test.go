package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// shipRecorder keeps what a compaction reports: the segments of the level
// being built and the installed level.
type shipRecorder struct {
	NopListener
	segs []BuiltSegment
	done []LevelInfo
}

func (s *shipRecorder) LogAppended(LogAppend)            {}
func (s *shipRecorder) LogSealed(LogSeal)                {}
func (s *shipRecorder) LogFlushed(LogFlush)              {}
func (s *shipRecorder) CompactionStarted(CompactionInfo) { s.segs = nil }
func (s *shipRecorder) SegmentBuilt(_ CompactionInfo, b BuiltSegment) {
	b.Data = append([]byte(nil), b.Data...)
	s.segs = append(s.segs, b)
}
func (s *shipRecorder) CompactionDone(_ CompactionInfo, l LevelInfo) { s.done = append(s.done, l) }

// TestInstallShippedLevel ships a level through the compaction hooks,
// rewrites it into fresh segments (child pointers through an index map),
// installs it in place of the original, and reads everything back.
func TestInstallShippedLevel(t *testing.T) {
	fs := vfs.NewMem()
	o := smallOpts(fs)
	o.L0Pairs = 10000
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	rec := &shipRecorder{}
	r.SetListener(rec)
	val := func(i int) []byte { return []byte(fmt.Sprintf("value-%d", i*i)) }
	for i := 0; i < 3000; i++ {
		if err := r.Put(key(i), val(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if len(rec.done) != 1 || len(rec.segs) != len(rec.done[0].Segments) || len(rec.segs) < 2 {
		t.Fatalf("recorded %d compactions, %d segments", len(rec.done), len(rec.segs))
	}
	built := rec.done[0]
	indexMap := map[uint64]uint64{}
	var segs, refs []uint64
	for _, s := range rec.segs {
		seg, seq, err := v.AllocSegment()
		if err != nil {
			t.Fatal(err)
		}
		indexMap[s.Segment] = seg
		r, err := v.RewriteIndexSegment(s.Data, seg, seq, func(p uint64, value bool) (uint64, error) {
			if value {
				return p, nil
			}
			n, ok := indexMap[v.g.seg(p)]
			if !ok {
				return 0, fmt.Errorf("child in segment %d shipped later", v.g.seg(p))
			}
			return v.g.rebase(p, n), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := v.WriteSegment(seg, s.Data); err != nil {
			t.Fatal(err)
		}
		segs, refs = append(segs, seg), append(refs, r...)
	}
	root := v.g.rebase(built.Root, indexMap[v.g.seg(built.Root)])
	if err := r.InstallLevel(1, InstalledLevel{Root: root, Height: built.Height, Pairs: built.Pairs, Segments: segs, LogRefs: refs}); err != nil {
		t.Fatal(err)
	}
	ver := r.acquire()
	got := ver.level(1).root
	r.release(ver)
	if got != root || got == built.Root {
		t.Fatalf("installed root %#x, want %#x (built %#x)", got, root, built.Root)
	}
	check := func(r *Region) {
		t.Helper()
		for i := 0; i < 3000; i++ {
			if got, err := r.Get(key(i)); err != nil || !bytes.Equal(got, val(i)) {
				t.Fatalf("key %d: %q %v", i, got, err)
			}
		}
	}
	check(r)
	for _, s := range rec.segs {
		if v.alloc.seqOf(s.Segment) == s.Seq {
			t.Fatalf("segment %d of the replaced level is still allocated", s.Segment)
		}
	}
	v.Close()
	v = mustOpen(t, o)
	defer v.Close()
	check(mustRegion(t, v, 1))
}

package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSnapshotSurvivesCompactionAndGC: a snapshot's levels and sealed log
// segments read the same after overwrites, compactions and GC replaced
// the levels and freed the segments, and their segments are reused only
// after Release.
func TestSnapshotSurvivesCompactionAndGC(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	r.Resume()
	val := bytes.Repeat([]byte("v"), 200)
	for i := range 3000 {
		if err := r.Put(key(i%600), append(val, fmt.Sprint(i)...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	s, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Levels) == 0 || s.RP.Segment == 0 {
		t.Fatalf("snapshot of %d levels, recovery point %+v", len(s.Levels), s.RP)
	}
	read := func() map[string][]byte {
		out := map[string][]byte{}
		for _, ls := range s.Logs {
			if ls.End == 0 {
				continue
			}
			b, err := s.ReadLog(ls.Segment, ls.Seq, SegmentHeaderSize, ls.End)
			if err != nil {
				t.Fatalf("log segment %d: %v", ls.Segment, err)
			}
			out[fmt.Sprint("log", ls.Segment)] = b
		}
		for _, li := range s.Levels {
			if len(li.Seqs) != len(li.Segments) {
				t.Fatalf("level %d: %d segments, %d sequences", li.Level, len(li.Segments), len(li.Seqs))
			}
			for _, seg := range li.Segments {
				b, err := s.ReadIndexSegment(seg)
				if err != nil {
					t.Fatalf("level %d segment %d: %v", li.Level, seg, err)
				}
				out[fmt.Sprint("index", seg)] = b
			}
		}
		return out
	}
	before := read()
	sealed := map[uint64]bool{}
	for _, ls := range s.Logs {
		if ls.End != 0 {
			sealed[ls.Segment] = true
		}
	}
	// Overwrite everything: the levels are replaced, the old log is garbage.
	for i := range 3000 {
		if err := r.Put(key(i%600), append(val, fmt.Sprint("new", i)...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.GC(); err != nil {
			t.Fatal(err)
		}
	}
	freed := 0
	for _, ls := range r.LogSegments() {
		delete(sealed, ls.Segment)
	}
	freed = len(sealed)
	if freed == 0 {
		t.Fatal("GC freed none of the snapshot's log segments: the test shows nothing")
	}
	after := read()
	for k, b := range before {
		if !bytes.Equal(after[k], b) {
			t.Fatalf("%s changed under the snapshot (%d log segments freed since)", k, freed)
		}
	}
	if _, err := r.ReadLog(s.Logs[0].Segment, s.Logs[0].Seq, SegmentHeaderSize, s.Logs[0].End); err == nil && sealed[s.Logs[0].Segment] {
		t.Fatal("the region reads a freed log segment outside the snapshot")
	}
	var someSeg uint64
	for _, li := range s.Levels {
		if len(li.Segments) > 0 {
			someSeg = li.Segments[0]
		}
	}
	s.Release()
	s.Release()
	if _, err := s.ReadIndexSegment(someSeg); err == nil {
		t.Fatal("a released snapshot still reads")
	}
	// Reused once released: new writes and compactions go on cleanly.
	for i := range 3000 {
		if err := r.Put(key(i%600), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	got, err := r.Get(key(5))
	if err != nil || !bytes.Equal(got, val) {
		t.Fatalf("get after release: %q, %v", got, err)
	}
}

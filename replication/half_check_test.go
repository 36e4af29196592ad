package replication

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// newLoneReplica is a Send-Index replica of region 7 at epoch 1 on a
// volume of its own, its copy complete (an IN_SYNC came), and its buffer.
func newLoneReplica(t *testing.T) (*Replica, []byte) {
	t.Helper()
	vol, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "b", SegmentSize: mirrorSeg, SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vol.Close() })
	br, err := vol.CreateBackupRegion(engine.RegionDesc{ID: 7, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2*mirrorSeg)
	rep, err := NewSendIndexReplica(vol, br, 1, buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Handle(&Command{Kind: CmdInSync, Region: 7, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	return rep, buf
}

// mark writes a tail marker into buffer half h, as the primary's mirror
// does when its tail moves into it.
func mark(buf []byte, h int, m replwire.Marker) {
	copy(buf[int64(h)*mirrorSeg:], m.Encode())
}

// TestFlushOfAnotherSegmentsHalfRefused: a flush is applied only from a
// buffer half whose tail marker names the flush's segment (number and
// sequence). A half the next segment overwrote (a backup dropped late,
// resuming with the flush in its ring) or that holds no marker is refused
// (ErrOutOfSync), nothing adopted, the copy incomplete: adopting it would
// persist another segment's bytes under the flushed one's name.
func TestFlushOfAnotherSegmentsHalfRefused(t *testing.T) {
	rep, buf := newLoneReplica(t)
	end := int64(engine.SegmentHeaderSize + 64)
	mark(buf, 0, replwire.Marker{Region: 7, Segment: 6, Seq: 8, Index: 12}) // S+2 over S's half
	for _, c := range []*Command{
		{Kind: CmdFlush, Region: 7, Epoch: 1, Segment: 4, Seq: 6, End: end, Half: 0, Sealed: true}, // another segment
		{Kind: CmdFlush, Region: 7, Epoch: 1, Segment: 6, Seq: 7, End: end, Half: 0, Sealed: true}, // the number, another sequence
		{Kind: CmdFlush, Region: 7, Epoch: 1, Segment: 5, Seq: 7, End: end, Half: 1},               // no marker
	} {
		if err := rep.Handle(c); !errors.Is(err, ErrOutOfSync) {
			t.Fatalf("flush of segment %d seq %d from half %d: %v, want ErrOutOfSync", c.Segment, c.Seq, c.Half, err)
		}
		if rep.Complete() {
			t.Fatalf("a refused flush of segment %d left the copy complete", c.Segment)
		}
		if _, ok := rep.Backup().LogMap()[c.Segment]; ok {
			t.Fatalf("a refused flush adopted segment %d", c.Segment)
		}
	}
	if err := rep.Handle(&Command{Kind: CmdFlush, Region: 7, Epoch: 1, Segment: 6, Seq: 8, End: end, Half: 0, Sealed: true}); err != nil {
		t.Fatalf("flush of the segment the half holds: %v", err)
	}
	if _, ok := rep.Backup().LogMap()[6]; !ok {
		t.Fatal("the flush of the segment the half holds adopted nothing")
	}
}

// TestReportAndPromoteRefuseLogGap: a Send-Index copy whose halves are
// more than one segment past the last segment it flushed, the one right
// after it in neither half (the mirror went on writing to a backup that
// never flushed it), is reported incomplete and not promoted
// (ErrIncompleteCopy); halves that continue the log from there are fine.
func TestReportAndPromoteRefuseLogGap(t *testing.T) {
	rep, buf := newLoneReplica(t)
	end := int64(engine.SegmentHeaderSize + 64)
	mark(buf, 0, replwire.Marker{Region: 7, Segment: 3, Seq: 5, Index: 9})
	if err := rep.Handle(&Command{Kind: CmdFlush, Region: 7, Epoch: 1, Segment: 3, Seq: 5, End: end, Half: 0, Sealed: true}); err != nil {
		t.Fatal(err)
	}
	// Segment S (index 10) went into half 1 and was never flushed; S+1
	// and S+2 overwrote both halves.
	mark(buf, 1, replwire.Marker{Region: 7, Segment: 5, Seq: 7, Index: 11})
	mark(buf, 0, replwire.Marker{Region: 7, Segment: 6, Seq: 8, Index: 12})
	if _, complete := rep.Report(2); complete {
		t.Fatal("a copy missing segment index 10 reported complete")
	}
	if _, err := rep.Promote(2); !errors.Is(err, ErrIncompleteCopy) {
		t.Fatalf("promoting a copy missing segment index 10: %v, want ErrIncompleteCopy", err)
	}
	// S in half 1 (its flush not come), S+1 the tail: the log continues.
	mark(buf, 1, replwire.Marker{Region: 7, Segment: 4, Seq: 6, Index: 10})
	mark(buf, 0, replwire.Marker{Region: 7, Segment: 5, Seq: 7, Index: 11})
	if _, complete := rep.Report(2); !complete {
		t.Fatal("a copy whose halves continue its flushed log reported incomplete")
	}
}

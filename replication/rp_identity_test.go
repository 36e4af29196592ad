package replication

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// TestCompactionDoneNamesRecoveryPointBySeq: an L0 compaction-done names
// the recovery point's segment by number and records' seed. A backup whose
// copy of that number is another segment (the log reuses freed numbers:
// it missed the free, or the new segment's flush) refuses it as out of
// sync instead of moving its recovery point into the wrong segment; one
// holding that very segment goes on. A compaction-done of L0 without the
// seed does not decode.
func TestCompactionDoneNamesRecoveryPointBySeq(t *testing.T) {
	const seg = 64 << 10
	vol, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "b", SegmentSize: seg, SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer vol.Close()
	br, err := vol.CreateBackupRegion(engine.RegionDesc{ID: 7, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := NewSendIndexReplica(vol, br, 1, make([]byte, 2*seg))
	if err != nil {
		t.Fatal(err)
	}
	// Primary segment 13, allocated as seq 100: adopted (no records yet).
	if err := rep.Handle(&Command{Kind: CmdFlush, Region: 7, Epoch: 1, Segment: 13, Seq: 100, End: engine.SegmentHeaderSize}); err != nil {
		t.Fatal(err)
	}
	done := func(seq uint64) error {
		if err := rep.Handle(&Command{Kind: CmdCompactionStart, Region: 7, Epoch: 1, Src: 0, Dst: 1}); err != nil {
			t.Fatal(err)
		}
		return rep.Handle(&Command{Kind: CmdCompactionDone, Region: 7, Epoch: 1, Src: 0, Dst: 1, RPSeg: 13, Seq: seq, RPOff: engine.SegmentHeaderSize})
	}
	if err := done(101); !errors.Is(err, ErrOutOfSync) {
		t.Fatalf("compaction-done into segment 13 seq 101 on a backup holding seq 100: %v, want ErrOutOfSync", err)
	}
	if err := done(100); err != nil {
		t.Fatalf("compaction-done into the segment the backup holds: %v", err)
	}
	b := (&Command{Kind: CmdCompactionDone, Region: 7, Epoch: 1, Src: 0, Dst: 1, RPSeg: 13, RPOff: engine.SegmentHeaderSize}).Encode(nil)
	if _, err := replwire.DecodeCommand(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("L0 compaction-done without the seed decoded: %v", err)
	}
}

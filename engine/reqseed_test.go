package engine

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestRequestTableCopiedSurvivesRestart: a completion table copied chunk
// by chunk (RequestTableChunks, MergeRequestTable) to a region that forgot
// its own first (ResetRequestTable) makes every copied outcome a
// duplicate there and the region's own old outcome new; the copy is in
// the region's log, so a restart before its next L0 freeze (no
// checkpoint of its own yet) still knows the copied outcomes. 5000
// clients make a table of ~140 KiB: several chunks at the 16 KiB limit
// used, and several checkpoint records at the 64 KiB segments' record
// size.
func TestRequestTableCopiedSurvivesRestart(t *testing.T) {
	src := mustRegion(t, mustOpen(t, mirrorOpts(vfs.NewMem(), "src")), 1)
	defer src.v.Close()
	const clients = 5000
	id := func(c uint64) RequestID { return RequestID{Client: c << 20, Seq: c, Ack: c} }
	for c := uint64(1); c <= clients; c++ {
		if _, err := src.PutOnce(key(int(c)), []byte("first"), id(c)); err != nil {
			t.Fatal(err)
		}
	}
	// One client with several outcomes above its ack.
	for s := uint64(3); s <= 6; s++ {
		if _, err := src.PutOnce([]byte("multi"), []byte("x"), RequestID{Client: 1, Seq: s, Ack: 3}); err != nil {
			t.Fatal(err)
		}
	}
	want := src.RequestTableLen()
	chunks, err := src.RequestTableChunks(16 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) < 4 {
		t.Fatalf("%d chunks: the table does not cross chunks", len(chunks))
	}

	fs := vfs.NewMem()
	o := mirrorOpts(fs, "dst")
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	stale := RequestID{Client: 9, Seq: 1, Ack: 1}
	if _, err := r.PutOnce([]byte("stale"), []byte("x"), stale); err != nil {
		t.Fatal(err)
	}
	if err := r.ResetRequestTable(); err != nil {
		t.Fatal(err)
	}
	before, err := r.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.MergeRequestTable(append([]byte{reqChunkVersion, 1, 0, 0, 0}, 1, 2)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("malformed chunk: %v, want ErrCorrupt", err)
	}
	if after, _ := r.LogTail(); after.Segment != before.Segment || after.Offset != before.Offset {
		t.Fatalf("a malformed chunk was logged: tail %d:%d -> %d:%d", before.Segment, before.Offset, after.Segment, after.Offset)
	}
	for _, c := range chunks {
		if err := r.MergeRequestTable(c); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.RequestTableLen(); n != want {
		t.Fatalf("%d outcomes copied, the source holds %d", n, want)
	}
	if applied, err := r.PutOnce([]byte("stale"), []byte("y"), stale); err != nil || !applied {
		t.Fatalf("the region's own forgotten outcome: applied %v, %v; want applied", applied, err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = mustOpen(t, o)
	defer v.Close()
	r, _ = v.Region(1)
	if len(r.Levels()) != 0 {
		t.Fatal("the destination compacted: its own checkpoint, not the copy, carries the table")
	}
	if n := r.RequestTableLen(); n != want+1 {
		t.Fatalf("%d outcomes after the restart, want %d", n, want+1)
	}
	for c := uint64(1); c <= clients; c += 97 {
		if applied, err := r.PutOnce(key(int(c)), []byte("again"), id(c)); err != nil || applied {
			t.Fatalf("client %d's retry after the restart: applied %v, %v", c, applied, err)
		}
	}
	if applied, err := r.PutOnce([]byte("multi"), []byte("y"), RequestID{Client: 1, Seq: 5, Ack: 3}); err != nil || applied {
		t.Fatalf("client 1's retry of seq 5: applied %v, %v", applied, err)
	}
	if applied, err := r.PutOnce([]byte("multi"), []byte("y"), RequestID{Client: 1, Seq: 7, Ack: 3}); err != nil || !applied {
		t.Fatalf("client 1's new seq 7: applied %v, %v", applied, err)
	}
}

package engine

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestBackupRegionLog: a backup region adopts a primary's log segment in
// two parts (partial, then full), keeps the log map and the role across a
// restart, and drops a segment when told.
func TestBackupRegionLog(t *testing.T) {
	fs := vfs.NewMem()
	pv, tail, bo, bv, br := backupOfTail(t, fs, fs, 40)
	defer pv.Close()
	image := make([]byte, bv.SegmentSize())
	copy(image, tail.Image)
	half := (tail.Offset + segHeaderSize) / 2
	local, err := br.AdoptLog(tail.Segment, tail.Seq, image, half)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := br.AdoptLog(tail.Segment, tail.Seq, image, tail.Offset); err != nil || again != local {
		t.Fatalf("second part: segment %d (first %d), %v", again, local, err)
	}
	if m := br.LogMap(); len(m) != 1 || m[tail.Segment] != local {
		t.Fatalf("log map %v", m)
	}
	for _, bad := range []int64{0, segHeaderSize - 1, bv.SegmentSize()} {
		if _, err := br.AdoptLog(99, 5, image, bad); !errors.Is(err, ErrBadOptions) {
			t.Errorf("adopt up to %d: %v", bad, err)
		}
	}
	// Writes and primary-only operations are not in a Backup's method
	// set, nor backup operations in a Region's (TestRoleMethodSets).
	err = br.ApplyCompaction(CompactionInfo{Src: 0, Dst: 1}, &InstalledLevel{}, &LogPoint{Segment: local, Offset: tail.Offset + 64})
	if !errors.Is(err, ErrBadOptions) {
		t.Fatalf("recovery point past the adopted end: %v", err)
	}
	if err := br.ApplyCompaction(CompactionInfo{Src: 1, Dst: 2, Move: true}, nil, nil); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("move of an empty level: %v", err)
	}
	// Restart: the role and the log map come back; the records verify
	// with the primary's sequence.
	if err := bv.Close(); err != nil {
		t.Fatal(err)
	}
	bv = mustOpen(t, bo)
	defer bv.Close()
	if _, ok := bv.Region(1); ok {
		t.Fatal("backup region after restart found as a primary")
	}
	br, ok := bv.Backup(1)
	if !ok {
		t.Fatal("backup region after restart: not found as a backup")
	}
	if m := br.LogMap(); m[tail.Segment] != local {
		t.Fatalf("log map after restart %v", m)
	}
	in, err := OpenInspector(fs, "backup", true)
	if err != nil {
		t.Fatal(err)
	}
	var recs int
	if err := in.Log(1, LogPosition{Offset: segHeaderSize}, func(LogRecord) error { recs++; return nil }); err != nil {
		t.Fatal(err)
	}
	in.Close()
	if recs != 40 {
		t.Fatalf("%d records readable in the adopted segment, want 40", recs)
	}
	if err := br.DropLog(tail.Segment); err != nil {
		t.Fatal(err)
	}
	if m := br.LogMap(); len(m) != 0 {
		t.Fatalf("log map after drop %v", m)
	}
}

// backupOfTail puts n pairs into region 1 of a primary volume ("vol" on
// pfs) and creates backup region 1 in a backup volume ("backup" on bfs):
// the primary's log tail to adopt, and the backup.
func backupOfTail(t *testing.T, pfs, bfs vfs.FS, n int) (pv *Volume, tail LogTail, bo Options, bv *Volume, br *Backup) {
	t.Helper()
	pv = mustOpen(t, smallOpts(pfs))
	pr := mustRegion(t, pv, 1)
	for i := range n {
		if err := pr.Put(key(i), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	tail, err := pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	bo = smallOpts(bfs)
	bo.Dir = "backup"
	bv = mustOpen(t, bo)
	if br, err = bv.CreateBackupRegion(RegionDesc{ID: 1}); err != nil {
		t.Fatal(err)
	}
	return pv, tail, bo, bv, br
}

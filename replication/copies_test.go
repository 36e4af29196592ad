package replication

import (
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
)

// Sizes: these tests check when a write is acknowledged (before or after
// its fdatasync, with how many copies) and whether a frozen L0 enters a
// level; neither depends on how full log segments are, so the groups'
// small L0 and 64 KiB segments exercise the same paths as the defaults.

func TestAckRule(t *testing.T) {
	for _, c := range []struct {
		backups, min int
		sync         bool
		refused      string // the error's have/need, "" for none
	}{
		{0, 0, true, ""}, // min_copies unset is 1
		{0, 1, true, ""},
		{0, 2, false, "1 of the 2"},
		{1, 1, false, ""},
		{1, 2, false, ""},
		{1, 3, false, "2 of the 3"},
		{2, 3, false, ""},
		{3, 2, false, ""},
	} {
		sync, err := ackRule(c.backups, c.min)
		switch {
		case c.refused == "" && err != nil, c.refused != "" && (!errors.Is(err, ErrTooFewCopies) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("ackRule(%d, %d): %v, want refused %q", c.backups, c.min, err, c.refused)
		case sync != c.sync:
			t.Errorf("ackRule(%d, %d): sync %v, want %v", c.backups, c.min, sync, c.sync)
		}
	}
}

// crashableRegion opens an async volume on a crashable in-memory file
// system and creates region 7 in it; crash opens a crash clone of the
// file system (unsynced data lost) and returns region 7 there.
func crashableRegion(t *testing.T) (r *engine.Region, crash func() (*engine.Volume, *engine.Region)) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	opts := func(fs vfs.FS) engine.Options {
		return engine.Options{FS: fs, Dir: "p", SegmentSize: mirrorSeg, L0Pairs: 64, SyncMode: engine.SyncModeAsync, GCInterval: -1}
	}
	v, err := engine.Open(opts(mem))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	if r, err = v.CreateRegion(engine.RegionDesc{ID: 7}); err != nil {
		t.Fatal(err)
	}
	return r, func() (*engine.Volume, *engine.Region) {
		t.Helper()
		cv, err := engine.Open(opts(mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})))
		if err != nil {
			t.Fatal(err)
		}
		cr, ok := cv.Region(7)
		if !ok {
			cv.Close()
			t.Fatal("region lost in the crash")
		}
		return cv, cr
	}
}

// TestLonePrimarySyncsBeforeAck: an async primary with no backup (Alone)
// acknowledges a write only once it is on disk: a crash right after the
// acknowledgement (a crash clone of the filesystem, unsynced data lost)
// keeps it. With min_copies 2 it refuses writes, appending nothing, and
// reads go on.
func TestLonePrimarySyncsBeforeAck(t *testing.T) {
	r, crash := crashableRegion(t)
	r.SetReplicator(&Alone{Region: r, MinCopies: 1})
	if !r.WritesWait() {
		t.Fatal("WritesWait false with a lone primary that syncs before its acknowledgements")
	}
	for i := range 10 {
		if err := r.Put(fmt.Appendf(nil, "k%d", i), []byte("acknowledged")); err != nil {
			t.Fatal(err)
		}
	}
	cv, cr := crash()
	for i := range 10 {
		if got, err := cr.Get(fmt.Appendf(nil, "k%d", i)); err != nil || string(got) != "acknowledged" {
			t.Fatalf("k%d after a crash of the lone primary: %q, %v (acknowledged from memory only)", i, got, err)
		}
	}
	cv.Close()

	r.SetReplicator(&Alone{Region: r, MinCopies: 2})
	before, _ := r.LogTail()
	err := r.Put([]byte("refused"), []byte("v"))
	if !errors.Is(err, ErrTooFewCopies) || !strings.Contains(err.Error(), "1 of the 2") {
		t.Fatalf("a write to a lone primary under min_copies 2: %v, want ErrTooFewCopies (1 of 2)", err)
	}
	if after, _ := r.LogTail(); after.Offset != before.Offset || after.Segment != before.Segment {
		t.Fatalf("a refused write was appended: tail %d/%d -> %d/%d", before.Segment, before.Offset, after.Segment, after.Offset)
	}
	if got, err := r.Get([]byte("k3")); err != nil || string(got) != "acknowledged" {
		t.Fatalf("a read under min_copies: %q, %v", got, err)
	}
}

// TestUnsafeAloneAcksFromMemory: a lone primary marked Unsafe (the
// benchmarks' No-Replication) acknowledges an async write without its
// fdatasync, so a crash right after loses it, and still refuses writes
// under min_copies 2.
func TestUnsafeAloneAcksFromMemory(t *testing.T) {
	r, crash := crashableRegion(t)
	a := &Alone{Region: r, MinCopies: 1, Unsafe: true}
	r.SetReplicator(a)
	if r.WritesWait() {
		t.Fatal("WritesWait with an unsafe lone primary in async mode: its writes wait for nothing")
	}
	if err := r.Put([]byte("k"), []byte("from memory")); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := tryGetAnswered(r, []byte("k")); !ok || err != nil || string(got) != "from memory" {
		t.Fatalf("TryGet of the unsynced write: %q, %v, %v (deferred: the probe waits for a sync)", got, ok, err)
	}
	cv, cr := crash()
	if got, err := cr.Get([]byte("k")); err == nil {
		t.Fatalf("the write survived a crash (%q): it was synced before its acknowledgement", got)
	}
	cv.Close()

	r.SetReplicator(&Alone{Region: r, MinCopies: 2, Unsafe: true})
	if err := r.Put([]byte("refused"), []byte("v")); !errors.Is(err, ErrTooFewCopies) {
		t.Fatalf("a write to an unsafe lone primary under min_copies 2: %v, want ErrTooFewCopies", err)
	}
}

// TestShipperMinCopies: a stream acknowledges a write only with MinCopies
// copies, the primary counted and joining backups not: at the threshold it
// accepts; one backup dropped (below it) refuses before appending, reads
// go on; with the backup back (a new stream) it accepts again. A stream
// whose only backup is joining syncs each write on the primary; one with
// a backup does not.
func TestShipperMinCopies(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 17))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	model := g.write(rng, 2, 200, 2400)
	g.settle()
	restream := func(min int, joining ...string) {
		g.shipper.Close()
		g.mirror.Close()
		g.minCopies, g.joining = min, joining
		g.follow(g.pr, 3, g.reps, nil)
		if d := g.shipper.Dropped(); len(d) != 0 {
			t.Fatalf("dropped at attach: %v", d)
		}
	}
	put := func(k string) error { return g.pr.Put([]byte(k), []byte("v-"+k)) }

	restream(3)
	if err := put("at-threshold"); err != nil {
		t.Fatalf("3 copies, min_copies 3: %v", err)
	}
	g.mirror.Drop("b1", errors.New("test: backup 1 late"))
	before, _ := g.pr.LogTail()
	if err := put("below"); !errors.Is(err, ErrTooFewCopies) || !strings.Contains(err.Error(), "2 of the 3") {
		t.Fatalf("2 copies, min_copies 3: %v, want ErrTooFewCopies (2 of 3)", err)
	}
	if after, _ := g.pr.LogTail(); after.Offset != before.Offset || after.Segment != before.Segment {
		t.Fatal("a write refused below min_copies was appended")
	}
	checkContent(t, "primary below min_copies", g.pr, model)
	restream(3) // the backup is back
	if err := put("back"); err != nil {
		t.Fatalf("backup back, min_copies 3: %v", err)
	}

	restream(3, "b1") // a joining backup is no copy
	if err := put("joining"); !errors.Is(err, ErrTooFewCopies) {
		t.Fatalf("a backup and a joining one, min_copies 3: %v, want ErrTooFewCopies", err)
	}
	restream(2, "b1")
	if err := put("joining-2"); err != nil {
		t.Fatalf("a backup and a joining one, min_copies 2: %v", err)
	}

	syncs := func() uint64 { return g.pv.Stats().Syncs }
	restream(1)
	// The volume's fdatasync count is no measure here: the log's preparer
	// syncs the headers of segments it prepares in the background, at any
	// moment. An acknowledged write the put path synced is one the log is
	// durable past; only a compaction's flush (none: L0 is emptied first
	// and five writes cannot fill it) or a sync would move durability past
	// a write's record.
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := put(fmt.Sprintf("async-%d", i)); err != nil {
			t.Fatal(err)
		}
		if end := logEnd(t, g.pr); g.pr.Synced(end) {
			t.Fatalf("async write %d held by backups was synced on the primary before its acknowledgement", i)
		}
	}
	restream(1, "b0", "b1") // only joining backups: the primary is the only copy
	s0 := syncs()
	for i := range 5 {
		if err := put(fmt.Sprintf("alone-%d", i)); err != nil {
			t.Fatal(err)
		}
		if s := syncs(); s == s0 {
			t.Fatalf("write %d acknowledged by a primary whose only backups are joining, without an fdatasync", i)
		} else {
			s0 = s
		}
	}
}

// TestWaitAtEmptyTailHeld: a scan over a non-empty L0 waits until the
// log up to its current position is replicated. Right after an attach
// (or a segment switch) the tail holds no record: that position, the start
// of the tail's record area, names nothing the stream has to deliver, and
// the wait returns at once; it failed as a wait "past the log's tail" (the
// mirror holds only the tail's marker), a server error to the client
// (seen in the fault test's scans after failovers). A write after it is
// waited for as usual.
func TestWaitAtEmptyTailHeld(t *testing.T) {
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil)
	tail, err := g.pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	if tail.Offset != engine.SegmentHeaderSize {
		t.Fatalf("setup: a new region's tail at %d, want its record area's start", tail.Offset)
	}
	shift := uint(0)
	for int64(1)<<shift < mirrorSeg {
		shift++
	}
	if err := g.shipper.WaitReplicated(tail.Index<<shift | uint64(tail.Offset)); err != nil {
		t.Fatalf("waiting for the empty tail's position: %v", err)
	}
	if err := g.pr.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	it := g.pr.Scan(nil, nil)
	defer it.Close()
	if err := it.Err(); err != nil {
		t.Fatalf("a scan over the new write: %v", err)
	}
}

// TestAloneProbe: a lone primary's replicator confirms a position without
// waiting exactly when its log is durable there (engine.ReplicatedProbe),
// and a get of an L0 key not yet durable is deferred by TryGet (ok false),
// answered once it is; a Build-Index backup's confirms every position.
func TestAloneProbe(t *testing.T) {
	v, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "p", SegmentSize: mirrorSeg, L0Pairs: 64, SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	r, err := v.CreateRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Acknowledged by a replicator that only notes its position (async
	// mode): in memory only.
	var rec posRecorder
	r.SetReplicator(&rec)
	if err := r.Put([]byte("k"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	end := rec.pos
	a := &Alone{Region: r, MinCopies: 1}
	r.SetReplicator(a)
	var probe engine.ReplicatedProbe = a
	if end == 0 {
		t.Fatal("no position recorded")
	}
	if probe.Replicated(end) {
		t.Fatal("Replicated before the log was synced")
	}
	if _, ok, err := tryGetDeclined(r, []byte("k")); ok || err != nil {
		t.Fatalf("TryGet of an unsynced L0 key: ok %v err %v, want deferred", ok, err)
	}
	if err := r.SyncTo(end); err != nil {
		t.Fatal(err)
	}
	if !probe.Replicated(end) {
		t.Fatal("not Replicated after SyncTo")
	}
	if got, ok, err := tryGetAnswered(r, []byte("k")); !ok || err != nil || string(got) != "v" {
		t.Fatalf("TryGet after the sync: %q, %v, %v", got, ok, err)
	}
	if !(Follow{}).Replicated(end + 1<<20) {
		t.Fatal("Follow does not confirm")
	}
}

// posRecorder is a Replicator that confirms at once and notes the last
// position it was asked for.
type posRecorder struct{ pos uint64 }

func (p *posRecorder) WaitReplicated(pos uint64) error {
	p.pos = pos
	return nil
}

// logEnd is the region's log position after its last record (a
// LogAppend.End): the tail's index above the offset in it.
func logEnd(t *testing.T, r *engine.Region) uint64 {
	t.Helper()
	tail, err := r.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	return tail.Index<<bits.TrailingZeros64(mirrorSeg) | uint64(tail.Offset)
}

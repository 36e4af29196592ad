package replication

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// A Build-Index backup in sync mode makes each command's records durable
// with one fdatasync before its reply, not one per record: a sealed
// flush of a 2 MiB segment of ~100-byte records is ~18k records, which
// with a sync each takes seconds to tens of seconds on an SSD, against
// a hang watchdog of 4 s (hung.go).

// smallRecordSeg is the default segment size (the regime of the finding).
const smallRecordSeg = engine.DefaultSegmentSize

// tailWatch records where a region's log appends go.
type tailWatch struct {
	engine.NopListener
	seg uint64
	off int64
}

func (w *tailWatch) LogAppended(a engine.LogAppend) { w.seg, w.off = a.Segment, a.Offset }

// smallRecordTail fills the log tail of a fresh primary region (id 1, on
// fs at dir, 2 MiB segments) with ~100-byte records, one in two written
// with a request identity, until it is nearly full; it returns the tail
// (not sealed: the next record would switch segments), what it holds and
// how many of its records carry an identity.
func smallRecordTail(tb testing.TB, fs vfs.FS, dir string) (tail engine.LogTail, model map[string][]byte, ids int) {
	tb.Helper()
	v, err := engine.Open(engine.Options{FS: fs, Dir: dir, SegmentSize: smallRecordSeg, L0Pairs: 1 << 17,
		SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	defer v.Close()
	r, err := v.CreateRegion(engine.RegionDesc{ID: 1})
	if err != nil {
		tb.Fatal(err)
	}
	w := &tailWatch{}
	r.SetListener(w)
	model = map[string][]byte{}
	var first uint64
	for i := 0; w.off < smallRecordSeg-4096; i++ {
		k := fmt.Appendf(nil, "key%08d", i)
		val := bytes.Repeat([]byte{byte('a' + i%26)}, 64)
		if i%2 == 0 {
			_, err = r.PutOnce(k, val, engine.RequestID{Client: uint64(1 + i%7), Seq: uint64(1 + i/14)})
			ids++
		} else {
			err = r.Put(k, val)
		}
		if err != nil {
			tb.Fatal(err)
		}
		if i == 0 {
			first = w.seg
		}
		model[string(k)] = val
	}
	if w.seg != first {
		tb.Fatalf("the primary's tail moved from segment %d to %d", first, w.seg)
	}
	if tail, err = r.LogTail(); err != nil {
		tb.Fatal(err)
	}
	return tail, model, ids
}

// buildSyncBackup opens a sync-mode backup volume (2 MiB segments) at dir
// of fs and a Build-Index replica of region 1 on it.
func buildSyncBackup(tb testing.TB, fs vfs.FS, dir string) (*engine.Volume, *Replica) {
	tb.Helper()
	v, err := engine.Open(engine.Options{FS: fs, Dir: dir, SegmentSize: smallRecordSeg, L0Pairs: 1 << 17,
		SyncMode: engine.SyncModeSync, GCInterval: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { v.Close() })
	r, _, err := v.OpenRegion(engine.RegionDesc{ID: 1})
	if err != nil {
		tb.Fatal(err)
	}
	r.SetReplicator(Follow{})
	rep, err := NewBuildIndexReplica(v, r, 1, make([]byte, 2*smallRecordSeg))
	if err != nil {
		tb.Fatal(err)
	}
	return v, rep
}

// tailFlush is the stream's start at the tail's first record, then its
// sealed flush as a catch-up (the records in Data) at epoch.
func tailFlush(tail engine.LogTail, epoch uint64) (start []*Command, flush *Command) {
	at := replwire.Applied{Position: Position{Log: 1, Index: tail.Index, Segment: tail.Segment, Seq: tail.Seq, Off: engine.SegmentHeaderSize}}
	start = []*Command{
		{Kind: CmdCheck, Region: 1, Epoch: epoch},
		{Kind: CmdApplyFrom, Region: 1, Epoch: epoch, Data: at.Encode()},
	}
	flush = &Command{Kind: CmdFlush, Region: 1, Epoch: epoch, Segment: tail.Segment, Seq: tail.Seq, End: tail.Offset,
		Data: tail.Image[engine.SegmentHeaderSize:tail.Offset], Sealed: true}
	return start, flush
}

// handleCounted applies c and returns the fdatasyncs it took.
func handleCounted(tb testing.TB, v *engine.Volume, rep *Replica, c *Command) uint64 {
	tb.Helper()
	before := v.Stats().Syncs
	if err := rep.Handle(c); err != nil {
		tb.Fatalf("%s: %v", c.Kind, err)
	}
	return v.Stats().Syncs - before
}

// crashedContent reopens a crash clone of fs (unsynced data dropped) and
// checks that region 1 at dir holds model.
func crashedContent(t *testing.T, fs *vfs.MemFS, dir, name string, model map[string][]byte) {
	t.Helper()
	clone := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cv, err := engine.Open(engine.Options{FS: clone, Dir: dir, SegmentSize: smallRecordSeg, L0Pairs: 1 << 17,
		SyncMode: engine.SyncModeSync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	cr, ok := cv.Region(1)
	if !ok {
		t.Fatalf("%s: region 1 is gone after a crash", name)
	}
	checkContent(t, name, cr, model)
}

// maxCommandSyncs bounds the fdatasyncs of one command that applies a
// segment's worth of records: its commit, and the backup's own segment
// switches (its log takes the same records, so it switches at most once
// or twice).
const maxCommandSyncs = 4

// TestBuildIndexSyncOncePerCommand: a sync-mode Build-Index backup applies
// a sealed 2 MiB flush of ~100-byte records (half of them with request
// identities), the delete-per-key emptying of a RESET, and a seed's
// CmdPairs of SegSize/2 with a few fdatasyncs each (one per command, plus
// its own segment switches), not one per record; and each command's
// records are durable when it returns (a crash clone of the backup's disk
// right after holds them), the completion table filled as the primary's.
func TestBuildIndexSyncOncePerCommand(t *testing.T) {
	pfs := vfs.NewMem()
	tail, model, ids := smallRecordTail(t, pfs, "p")
	bfs := vfs.NewCrashableMem()
	v, rep := buildSyncBackup(t, bfs, "b")

	start, flush := tailFlush(tail, 1)
	for _, c := range start {
		handleCounted(t, v, rep, c)
	}
	syncs := handleCounted(t, v, rep, flush)
	t.Logf("sealed flush of %d records (%d bytes): %d fdatasyncs", len(model), tail.Offset, syncs)
	if syncs > maxCommandSyncs {
		t.Errorf("the sealed flush of %d records took %d fdatasyncs, want at most %d", len(model), syncs, maxCommandSyncs)
	}
	if n := rep.Region().RequestTableLen(); n != ids {
		t.Errorf("the completion table holds %d outcomes, the primary's %d", n, ids)
	}
	crashedContent(t, bfs, "b", "the flushed backup after a crash", model)

	// A re-delivery of the same records (a new stream from the same
	// point): applied again or skipped as duplicates, with no wait each.
	start, flush = tailFlush(tail, 2)
	for _, c := range start {
		handleCounted(t, v, rep, c)
	}
	if syncs := handleCounted(t, v, rep, flush); syncs > maxCommandSyncs {
		t.Errorf("re-applying the flush took %d fdatasyncs, want at most %d", syncs, maxCommandSyncs)
	}
	checkContent(t, "re-applied", copyOf(rep), model)

	// A seed: RESET deletes every key (one delete each), then the pairs.
	handleCounted(t, v, rep, &Command{Kind: CmdCheck, Region: 1, Epoch: 3})
	syncs = handleCounted(t, v, rep, &Command{Kind: CmdReset, Region: 1, Epoch: 3})
	t.Logf("reset deleting %d keys: %d fdatasyncs", len(model), syncs)
	if syncs > maxCommandSyncs {
		t.Errorf("the reset's %d deletes took %d fdatasyncs, want at most %d", len(model), syncs, maxCommandSyncs)
	}
	gone := map[string][]byte{}
	for k := range model {
		gone[k] = nil
	}
	crashedContent(t, bfs, "b", "the reset backup after a crash", gone)

	var data []byte
	seeded := map[string][]byte{}
	for i := 0; len(data) < int(smallRecordSeg/2); i++ {
		k, val := fmt.Sprintf("seed%08d", i), bytes.Repeat([]byte{byte('A' + i%26)}, 64)
		data = replwire.EncodePairs(data, []byte(k), val)
		seeded[k] = val
	}
	syncs = handleCounted(t, v, rep, &Command{Kind: CmdPairs, Region: 1, Epoch: 3, Data: data})
	t.Logf("pairs command of %d pairs (%d bytes): %d fdatasyncs", len(seeded), len(data), syncs)
	if syncs > maxCommandSyncs {
		t.Errorf("the %d pairs of one CmdPairs took %d fdatasyncs, want at most %d", len(seeded), syncs, maxCommandSyncs)
	}
	crashedContent(t, bfs, "b", "the seeded backup after a crash", seeded)
}

// BenchmarkBuildIndexSealedFlush applies a sealed 2 MiB flush of ~100-byte
// records to a sync-mode Build-Index backup on a real directory (the
// test's temporary one): the time one CmdFlush takes, against the hang
// watchdog's 4 s.
func BenchmarkBuildIndexSealedFlush(b *testing.B) {
	b.StopTimer()
	tail, model, _ := smallRecordTail(b, vfs.NewMem(), "p")
	for range b.N {
		v, rep := buildSyncBackup(b, vfs.Default, b.TempDir())
		start, flush := tailFlush(tail, 1)
		for _, c := range start {
			handleCounted(b, v, rep, c)
		}
		t0 := time.Now()
		b.StartTimer()
		syncs := handleCounted(b, v, rep, flush)
		b.StopTimer()
		b.ReportMetric(float64(syncs), "fdatasyncs/op")
		b.ReportMetric(float64(len(model)), "records/op")
		b.Logf("sealed flush of %d records: %d fdatasyncs, %v", len(model), syncs, time.Since(t0))
	}
}

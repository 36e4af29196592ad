package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
)

// mirrorFeed is a primary's log listener that mirrors every record.
type mirrorFeed struct {
	engine.NopListener
	m        *Mirror
	seg, seq uint64
	end      int64 // tail bytes appended
	half     int
	err      error
}

func (f *mirrorFeed) WantsRecords() bool { return true }
func (f *mirrorFeed) LogAppended(a engine.LogAppend) {
	if f.err != nil {
		return
	}
	if a.Segment != f.seg {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		f.err = f.m.Switch(ctx, a.Segment)
		cancel()
		f.seg, f.seq, f.half = a.Segment, a.Seq, f.half^1
	}
	if f.err == nil {
		_, f.err = f.m.Append(a.Offset, a.Record)
		f.end = a.Offset + int64(len(a.Record))
	}
}
func (f *mirrorFeed) LogSealed(engine.LogSeal)                                {}
func (f *mirrorFeed) LogFlushed(engine.LogFlush)                              {}
func (f *mirrorFeed) CompactionStarted(engine.CompactionInfo)                 {}
func (f *mirrorFeed) SegmentBuilt(engine.CompactionInfo, engine.BuiltSegment) {}
func (f *mirrorFeed) CompactionDone(engine.CompactionInfo, engine.LevelInfo)  {}

// TestBuildIndexBackup: a primary's records travel by one-sided WRITE into
// a backup's buffer; the backup applies them to its own engine region
// (which logs and compacts on its own). Afterwards both hold the same
// logical content, across many segment switches and compactions.
func TestBuildIndexBackup(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 9))
	opts := func(dir string) engine.Options {
		return engine.Options{FS: vfs.NewMem(), Dir: dir, SegmentSize: mirrorSeg, L0Pairs: 200, GrowthFactor: 2,
			SyncMode: engine.SyncModeAsync, GCInterval: -1}
	}
	pv, err := engine.Open(opts("p"))
	if err != nil {
		t.Fatal(err)
	}
	defer pv.Close()
	bv, err := engine.Open(opts("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer bv.Close()
	pr, _, err := pv.OpenRegion(engine.RegionDesc{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	br, _, err := bv.OpenRegion(engine.RegionDesc{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("bi%d", loopAddrs) }, 1)
	m, err := NewMirror(mirrorSeg, 0, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	feed := &mirrorFeed{m: m} // the mirror starts in half 0; the first record switches to 1
	pr.SetListener(feed)
	var app *Applier
	appHalf := -1
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	model := map[string][]byte{}
	for i := range 6000 {
		k := fmt.Appendf(nil, "k%05d", rng.IntN(1500))
		if rng.IntN(8) == 0 {
			if err := pr.Delete(k); err != nil {
				t.Fatal(err)
			}
			delete(model, string(k))
		} else {
			v := bytes.Repeat([]byte{byte(i)}, 1+rng.IntN(300))
			if err := pr.Put(k, v); err != nil {
				t.Fatal(err)
			}
			model[string(k)] = v
		}
		if feed.err != nil {
			t.Fatal(feed.err)
		}
		// The client's ack: every backup holds the record.
		if err := m.Wait(ctx, m.Tail()); err != nil {
			t.Fatal(err)
		}
		// The backup applies what arrived (a new segment: a new applier).
		if appHalf != feed.half {
			if app == nil {
				app = NewApplier(br, feed.seq, 4096)
			} else {
				app.Next(feed.seq, 4096)
			}
			appHalf = feed.half
		}
		h := int64(feed.half) * mirrorSeg
		if _, err := app.Apply(ends[0].buf.Bytes()[h:h+mirrorSeg], feed.end); err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	if err := br.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	for k := range 1500 {
		key := fmt.Appendf(nil, "k%05d", k)
		pvV, perr := pr.Get(key)
		bvV, berr := br.Get(key)
		want, ok := model[string(key)]
		if !ok {
			if !errors.Is(perr, engine.ErrNotFound) || !errors.Is(berr, engine.ErrNotFound) {
				t.Fatalf("%s deleted: primary %v, backup %v", key, perr, berr)
			}
			continue
		}
		if !bytes.Equal(pvV, want) || !bytes.Equal(bvV, want) {
			t.Fatalf("%s: primary %d bytes (%v), backup %d bytes (%v), want %d", key, len(pvV), perr, len(bvV), berr, len(want))
		}
	}
	st := pv.Stats()
	if st.Compactions == 0 {
		t.Fatalf("no compaction ran on the primary: %+v", st)
	}
}

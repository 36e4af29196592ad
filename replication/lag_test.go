package replication

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tebis-go/tebis/engine"
)

// TestLagBytes: the lag counts from the backup's acknowledgement in the
// tail's generation, or from the end of the unmirrored header.
func TestLagBytes(t *testing.T) {
	h := int64(engine.SegmentHeaderSize)
	for _, c := range []struct {
		appended    int64
		gen, ackGen uint64
		acked, want int64
	}{
		{0, 0, 0, 0, 0},               // nothing appended
		{h + 100, 2, 2, h + 100, 0},   // all completed
		{h + 100, 2, 2, h + 40, 60},   // part completed
		{h + 100, 3, 2, h + 900, 100}, // completions of the previous tail only
		{0, 3, 2, h + 900, 0},         // a new tail, empty
		{h + 100, 2, 2, 0, 100},       // nothing completed yet
	} {
		if got := lagBytes(c.appended, c.gen, c.ackGen, c.acked); got != c.want {
			t.Errorf("lagBytes(%d, %d, %d, %d) = %d, want %d", c.appended, c.gen, c.ackGen, c.acked, got, c.want)
		}
	}
}

// TestShipperBackupStats: after acknowledged writes and a compaction
// both backups are live with no lag, nothing pending and every index
// segment built shipped and rewritten; a backup whose link holds a flush
// shows it pending, the other one nothing.
func TestShipperBackupStats(t *testing.T) {
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	var holding atomic.Bool
	g := newReplGroup(t, 1<<20, []Mode{SendIndex, SendIndex}, map[int]func(*Command) error{1: func(c *Command) error {
		if holding.Load() && c.Kind == CmdFlush {
			select {
			case held <- struct{}{}:
			default:
			}
			<-hold
		}
		return nil
	}})
	built0 := g.pv.Stats().IndexSegmentsBuilt
	for i := range 200 {
		if err := g.pr.Put(fmt.Appendf(nil, "k%04d", i), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := g.shipper.Idle(context.Background()); err != nil {
		t.Fatal(err)
	}
	built := g.pv.Stats().IndexSegmentsBuilt - built0
	st := g.shipper.Backups()
	if len(st) != 2 || built == 0 {
		t.Fatalf("backups %+v, %d index segments built", st, built)
	}
	for i, rep := range g.reps {
		if n := rep.IndexSegmentsRewritten(); n != built {
			t.Fatalf("backup %d rewrote %d index segments, %d were built", i, n, built)
		}
	}
	for _, b := range st {
		if !b.Live || b.LagBytes != 0 || b.CommandsPending != 0 || b.FlushesPending != 0 || b.IndexSegmentsShipped != built {
			t.Fatalf("backup %+v after a compaction of %d index segments, every command applied", b, built)
		}
	}

	holding.Store(true)
	if err := g.pr.Put([]byte("k9999"), []byte("value")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.shipper.Flush(context.Background()) }()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the flush never reached backup 1's link")
	}
	// b0 applies the flush; b1 holds it as long as its link does.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := g.shipper.Backups()
		if st[0].Name != "b0" {
			t.Fatalf("backups not by name: %+v", st)
		}
		if st[0].CommandsPending == 0 || time.Now().After(deadline) {
			for _, b := range st {
				wantFlushes := map[string]int{"b0": 0, "b1": 1}[b.Name]
				if b.FlushesPending != wantFlushes || b.CommandsPending != wantFlushes || !b.Live {
					t.Errorf("backup %+v while b1's link holds a flush: want %d pending", b, wantFlushes)
				}
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestShipperCommandsPending: a backup that takes no commands has them
// queued (BackupStats.CommandsPending counts them); once it takes them
// again, they drain to 0.
func TestShipperCommandsPending(t *testing.T) {
	fs := vfs.NewMem()
	a := newSealStream(t, fs, openSealVolume(t, fs), 7)
	pending := func() (int, int) {
		bs := a.shipper.Backups()
		if len(bs) != 1 || bs[0].Name != "b0" {
			t.Fatalf("backups %+v, want b0 alone", bs)
		}
		return bs[0].CommandsPending, len(bs)
	}
	if n, _ := pending(); n != 0 {
		t.Fatalf("an idle stream has %d commands pending", n)
	}
	pl := newPausedLink(a.link.Link)
	a.link.Link = pl
	pl.set(true)
	t.Cleanup(func() { pl.set(false) }) // before the stream closes
	val := bytes.Repeat([]byte("x"), 2000)
	wrote := make(chan error, 1)
	go func() { // through seals: each enqueues a flush of the sealed segment
		for i := range 200 {
			if err := a.r.Put(fmt.Appendf(nil, "k%08d", i), val); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := pending(); n == 0; n, _ = pending() {
		if time.Now().After(deadline) {
			t.Fatal("no command queued for a paused backup after 10 s of writes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	pl.set(false)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.shipper.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := pending(); n != 0 {
		t.Fatalf("%d commands pending after the backup caught up", n)
	}
}

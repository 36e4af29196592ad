package region

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tebis-go/tebis/replication"
)

// TestFailedReattachRefusesWrites: a serving region re-attaches (its
// epoch grew) while its only backup is gone. The old stream is retired
// and the new attach fails: from then on no write is acknowledged (they
// were, with no replicator, by the writers the quiesce let go), until an
// attach succeeds.
func TestFailedReattachRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	m := pairMap(dir)
	start := staticServers(t, dir, m, 300*time.Millisecond)
	b := start("b")
	p := start("p")
	defer p.Close()
	er := p.state.Load().hosted(1)
	deadline := time.Now().Add(10 * time.Second)
	for p.state.Load().attaching(1) {
		if time.Now().After(deadline) {
			t.Fatal("region 1 never attached to its backup")
		}
		time.Sleep(10 * time.Millisecond)
		_ = p.attachAll()
	}
	if err := er.Put([]byte("k1"), []byte("v1")); err != nil {
		t.Fatalf("put through the attached stream: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := m.Clone()
	m2.Version, m2.Regions[0].Epoch = 2, 2
	if err := p.install(m2); err == nil {
		t.Fatal("the re-attach to a stopped backup succeeded")
	}
	if !p.state.Load().attaching(1) {
		t.Fatal("region 1 serves after its re-attach failed")
	}
	err := er.Put([]byte("k2"), []byte("v2"))
	if !errors.Is(err, replication.ErrNoBackups) {
		t.Fatalf("a write after the failed re-attach: %v, want ErrNoBackups (acknowledged without its backup)", err)
	}
}

// TestReattachHandsQueuedCompactionToBackup: a serving region re-attaches
// (its epoch grew: its group changed, as when a failed-over primary's
// server comes back and joins) right after a compaction whose commands
// its backup has not applied yet (the backup is slow). The re-attach
// retires the old stream, which hands them to the backup before the new
// stream's hello: the backup passes the new stream's check and is not
// seeded. Closing the old stream at once discarded them, and the backup,
// left with the old level and recovery point, was seeded whole.
//
// Sizes: what is exercised is the end of a stream with commands queued,
// which no segment or L0 size changes (64 KiB segments, an L0 of 64
// pairs: a few hundred puts make levels and a compaction).
func TestReattachHandsQueuedCompactionToBackup(t *testing.T) {
	dir := t.TempDir()
	m := pairMap(dir)
	core, logs := observer.New(zapcore.InfoLevel)
	start := staticServersWith(t, dir, m, 2*time.Second, core, func(c *Config) {
		c.ReplicationCredits = 1 << 10 // the compaction never waits for the slow backup
	})
	b := start("b")
	p := start("p")
	defer p.Close()
	waitAttached(t, p, 1)
	er := p.state.Load().hosted(1)
	put := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if err := er.Put(fmt.Appendf(nil, "%s%05d", prefix, i), fmt.Appendf(nil, "%s-value-%05d", prefix, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := er.Compact(); err != nil {
			t.Fatal(err)
		}
		if err := er.WaitIdle(); err != nil {
			t.Fatal(err)
		}
	}
	put("a", 300)
	sh := p.streamOf(1).shipper
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sh.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// The backup applies no command until released (its handler waits for
	// replMu): the next compaction's commands stay queued at the primary.
	b.replMu.Lock()
	released := false
	release := func() {
		if !released {
			released = true
			b.replMu.Unlock()
		}
	}
	defer release()
	put("b", 100)
	bk := b.regions[1].backup // replMu is held
	bs, boff, _ := bk.rep.Backup().LogRecoveryPoint()
	ps, poff, _ := er.LogRecoveryPoint()
	if bs.Segment == ps.Segment && bs.Seq == ps.Seq && boff == poff {
		t.Fatal("setup: the backup applied the compaction before the re-attach")
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		release()
	}()
	m2 := m.Clone()
	m2.Version, m2.Regions[0].Epoch = 2, 2
	if err := p.install(m2); err != nil {
		t.Fatalf("re-attach: %v", err)
	}
	waitAttached(t, p, 1)
	if n := logs.FilterMessage("backup out of sync: seeding it").Len(); n != 0 {
		t.Fatalf("the re-attach seeded the backup whole (%d times): %v", n, logs.FilterMessage("backup out of sync: seeding it").All()[0].ContextMap())
	}
	if got, want := bk.rep.Backup().Levels(), er.Levels(); len(got) != len(want) {
		t.Fatalf("backup levels %+v, the primary's %+v", got, want)
	}
	if err := er.Put([]byte("after"), []byte("reattach")); err != nil {
		t.Fatalf("a put through the new stream: %v", err)
	}
}

// waitAttached waits until s serves region id attached (bounded).
func waitAttached(t *testing.T, s *Server, id uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.state.Load().attaching(id) {
		if time.Now().After(deadline) {
			t.Fatalf("region %d never attached to its backup", id)
		}
		time.Sleep(10 * time.Millisecond)
		_ = s.attachAll()
	}
}

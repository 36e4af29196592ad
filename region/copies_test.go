package region

import (
	"errors"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/replication"
)

// TestMinCopiesAndLonePrimary: an async primary of a map with min_copies
// 2. With its backup in the stream it accepts writes without an
// fdatasync each; when the map leaves it without backups (the master's
// answer to a dead backup) it refuses writes with ErrTooFewCopies and
// serves reads; with the backup back it accepts again. With min_copies 1
// the same lone primary accepts, and syncs every write before its
// acknowledgement.
func TestMinCopiesAndLonePrimary(t *testing.T) {
	dir := t.TempDir()
	m := pairMap(dir)
	m.MinCopies = 2
	start := staticServers(t, dir, m, 2*time.Second)
	b := start("b")
	defer b.Close()
	p := start("p")
	defer p.Close()
	attached := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for p.state.Load().attaching(1) {
			if time.Now().After(deadline) {
				t.Fatal("region 1 never attached to its backup")
			}
			time.Sleep(10 * time.Millisecond)
			_ = p.attachAll()
		}
	}
	attached()
	er := p.state.Load().hosted(1)
	syncs := func() uint64 { return p.vol.Stats().Syncs }
	s0 := syncs()
	for _, k := range []string{"k1", "k2", "k3"} {
		if err := er.Put([]byte(k), []byte("v")); err != nil {
			t.Fatalf("put with 2 copies, min_copies 2: %v", err)
		}
	}
	if s := syncs(); s != s0 {
		t.Fatalf("async writes held by a backup: %d fdatasyncs, want none", s-s0)
	}

	install := func(m *regionmap.Map) {
		t.Helper()
		if err := p.install(m); err != nil {
			t.Fatal(err)
		}
	}
	alone := m.Clone()
	alone.Version, alone.Regions[0].Epoch, alone.Regions[0].Backups = 2, 2, nil
	install(alone)
	if err := er.Put([]byte("k4"), []byte("v")); !errors.Is(err, replication.ErrTooFewCopies) {
		t.Fatalf("put with 1 copy, min_copies 2: %v, want ErrTooFewCopies", err)
	}
	if err := er.Put([]byte("k4"), []byte("v")); engineReply(err).Status != wire.StatusUnavailable {
		t.Fatalf("ErrTooFewCopies answered with status %d, want UNAVAILABLE", engineReply(err).Status)
	}
	if v, err := er.Get([]byte("k1")); err != nil || string(v) != "v" {
		t.Fatalf("a read under min_copies: %q, %v", v, err)
	}

	back := m.Clone()
	back.Version, back.Regions[0].Epoch = 3, 3
	install(back)
	attached()
	if err := er.Put([]byte("k5"), []byte("v")); err != nil {
		t.Fatalf("put with the backup back, min_copies 2: %v", err)
	}

	lone := alone.Clone()
	lone.Version, lone.Regions[0].Epoch, lone.MinCopies = 4, 4, 1
	install(lone)
	for _, k := range []string{"k6", "k7", "k8"} {
		s0 := syncs()
		if err := er.Put([]byte(k), []byte("v")); err != nil {
			t.Fatalf("put to a lone primary, min_copies 1: %v", err)
		}
		if syncs() == s0 {
			t.Fatalf("%s acknowledged by a lone async primary without an fdatasync", k)
		}
	}
}

package region

import (
	"errors"
	"testing"
	"time"

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
	er := p.state.Load().hosted[1]
	deadline := time.Now().Add(10 * time.Second)
	for p.state.Load().attaching[1] {
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
	if !p.state.Load().attaching[1] {
		t.Fatal("region 1 serves after its re-attach failed")
	}
	err := er.Put([]byte("k2"), []byte("v2"))
	if !errors.Is(err, replication.ErrNoBackups) {
		t.Fatalf("a write after the failed re-attach: %v, want ErrNoBackups (acknowledged without its backup)", err)
	}
}

package region

import (
	"errors"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/replication"
)

// twoServers starts p (primary of region 1) and b (its backup) from a
// static map and waits until region 1 is attached on p.
func twoServers(t *testing.T) (p, b *Server, m *regionmap.Map) {
	t.Helper()
	dir := t.TempDir()
	m = pairMap(dir)
	start := staticServers(t, dir, m, 2*time.Second)
	b = start("b")
	p = start("p")
	deadline := time.Now().Add(10 * time.Second)
	for p.state.Load().attaching(1) {
		if time.Now().After(deadline) {
			t.Fatal("region 1 never attached to its backup")
		}
		time.Sleep(10 * time.Millisecond)
		_ = p.attachAll()
	}
	if err := p.state.Load().hosted(1).Put([]byte("k1"), []byte("v1")); err != nil {
		t.Fatalf("put through the attached stream: %v", err)
	}
	return p, b, m
}

// TestDeposedPrimaryRefusesRoutedWrites: a map moves region 1's primary
// away from p. A put routed by p before the new routing was published
// reaches the region's engine handle after its stream closed: it must be
// refused, not acknowledged with no backup holding it (the stream used to
// be closed first, leaving the region with no replicator). Handed back to
// p with no backups, the region serves alone again.
func TestDeposedPrimaryRefusesRoutedWrites(t *testing.T) {
	p, _, m := twoServers(t)
	er := p.state.Load().hosted(1) // what a request routed before the move holds
	m2 := m.Clone()
	m2.Version, m2.Regions[0].Epoch, m2.Regions[0].Primary, m2.Regions[0].Backups = 2, 2, "b", nil
	if err := p.install(m2); err != nil {
		t.Fatal(err)
	}
	if p.state.Load().hosted(1) != nil {
		t.Fatal("region 1 still hosted by p after the map moved it")
	}
	err := er.Put([]byte("k2"), []byte("v2"))
	if err == nil {
		t.Fatal("a put routed before the move was acknowledged by the deposed primary (unreplicated)")
	}
	if !errors.Is(err, replication.ErrStreamClosed) {
		t.Fatalf("put on the deposed region: %v, want ErrStreamClosed", err)
	}
	if _, err := er.Get([]byte("k1")); !errors.Is(err, replication.ErrStreamClosed) {
		t.Fatalf("L0 read on the deposed region: %v, want ErrStreamClosed", err)
	}
	m3 := m2.Clone()
	m3.Version, m3.Regions[0].Epoch, m3.Regions[0].Primary = 3, 3, "p"
	if err := p.install(m3); err != nil {
		t.Fatal(err)
	}
	er3 := p.state.Load().hosted(1)
	if er3 == nil || p.state.Load().attaching(1) {
		t.Fatal("region 1 not served by p again")
	}
	if err := er3.Put([]byte("k3"), []byte("v3")); err != nil {
		t.Fatalf("region 1 handed back with no backups refuses writes: %v", err)
	}
}

// TestFencedPrimaryRefusesRoutedWrites: p's session expired (fence). A put
// routed before the fence reaches the engine handle after: it is refused,
// not acknowledged with no replication wait.
func TestFencedPrimaryRefusesRoutedWrites(t *testing.T) {
	p, _, _ := twoServers(t)
	er := p.state.Load().hosted(1)
	p.fence()
	if len(p.state.Load().hostedIDs()) != 0 {
		t.Fatal("p still hosts regions after the fence")
	}
	err := er.Put([]byte("k2"), []byte("v2"))
	if err == nil {
		t.Fatal("a put routed before the fence was acknowledged by the fenced primary (unreplicated)")
	}
	if !errors.Is(err, replication.ErrStreamClosed) {
		t.Fatalf("put on the fenced region: %v, want ErrStreamClosed", err)
	}
}

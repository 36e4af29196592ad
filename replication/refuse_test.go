package replication

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/tebis-go/tebis/internal/testseed"
)

// TestShipperCloseRefusesLaterWrites: once a region's stream is closed (a
// deposed primary's stopDeposed, a fencing server, a re-attach retiring
// the old stream), a write appended afterwards is refused, never
// acknowledged with no backup holding it; and the refusal is the region's
// replicator until someone installs another (a new stream, or an explicit
// nil for a region meant to serve alone).
func TestShipperCloseRefusesLaterWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 31))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	g.write(rng, 2, 50, 400)
	g.settle()
	if err := g.pr.Put([]byte("attached"), []byte("v")); err != nil {
		t.Fatalf("a write through the attached stream: %v", err)
	}
	g.shipper.Close()
	err := g.pr.Put([]byte("after-close"), []byte("v"))
	if err == nil {
		t.Fatal("a write appended after its stream closed was acknowledged (no backup holds it)")
	}
	if !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("a write after the close: %v, want ErrStreamClosed", err)
	}
	if err := g.pr.Delete([]byte("attached")); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("a delete after the close: %v, want ErrStreamClosed", err)
	}
	// Closing again, or closing an older stream after a newer one attached,
	// must not replace the newer replicator.
	newer := Refuse{Err: ErrNoBackups}
	g.pr.SetReplicator(newer)
	g.shipper.Close()
	if err := g.pr.Put([]byte("k"), []byte("v")); !errors.Is(err, ErrNoBackups) {
		t.Fatalf("a closed stream replaced its successor: %v", err)
	}
}

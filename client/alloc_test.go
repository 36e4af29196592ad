package client_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
	"go.uber.org/zap"
)

// TestCallAllocations bounds what a get and a put allocate in the
// client, against a ring server that answers every get with one value
// and acknowledges every put: a get allocates its request's encoding and
// its reply's payload (the caller's to keep), a put its request's head;
// nothing else (routing closures, retry bookkeeping, status checks).
func TestCallAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("allocation counts under the race detector are not a build's")
	}
	value := []byte("the value")
	rs, err := ring.Listen(ring.ServerConfig{
		Transport: &rdma.Shm{}, Addr: filepath.Join(t.TempDir(), "s.sock"), Inline: true, Log: zap.NewNop(),
		Handlers: map[uint16]ring.HandlerFunc{
			wire.TypeGet: func(*ring.ServerRequest) ring.Reply { return ring.Reply{Payload: value} },
			wire.TypePut: func(*ring.ServerRequest) ring.Reply { return ring.Reply{} },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.Open(ctx, client.Config{Map: regionmap.Static{M: regionmap.Single(regionmap.Server{Name: "a", Shm: rs.Addr()})}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	key := []byte("key")
	var got []byte
	getAllocs := testing.AllocsPerRun(200, func() {
		if got, err = cl.Get(ctx, key); err != nil {
			t.Fatal(err)
		}
	})
	if string(got) != string(value) {
		t.Fatalf("get: %q, want %q", got, value)
	}
	putAllocs := testing.AllocsPerRun(200, func() {
		if err := cl.Put(ctx, key, value); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("allocations per call: get %v, put %v", getAllocs, putAllocs)
	if getAllocs > 2 {
		t.Errorf("get: %v allocations, want at most 2 (its request's encoding, its reply's payload)", getAllocs)
	}
	if putAllocs > 1 {
		t.Errorf("put: %v allocations, want at most 1 (its request's head)", putAllocs)
	}
}

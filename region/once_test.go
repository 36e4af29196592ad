package region

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/replication"
)

// firstWaitFails is a Replicator whose first wait runs then (another
// client's write applied, while the first write is appended but
// unacknowledged) and fails as a lost backup does: the server answers UNAVAILABLE for a
// write it has appended. Later waits succeed.
type firstWaitFails struct {
	calls atomic.Int32
	then  func()
}

func (f *firstWaitFails) WaitReplicated(uint64) error {
	if f.calls.Add(1) == 1 {
		f.then()
		return fmt.Errorf("%w: injected", replication.ErrNoBackups)
	}
	return nil
}

// TestClientRetryAfterUnavailableNotAppliedTwice: client 1 puts A; the
// server appends it, another client's put of B completes, and the server
// answers client 1 UNAVAILABLE (its replication wait failed). Client 1
// retries. The retry must not apply A again: the key's history is A, B,
// not A, B, A. The same for a delete.
func TestClientRetryAfterUnavailableNotAppliedTwice(t *testing.T) {
	dir := t.TempDir()
	m := &regionmap.Map{Version: 1, Replication: "send-index",
		Servers: []regionmap.Server{{Name: "p", Shm: filepath.Join(dir, "p.sock")}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Epoch: 1}}}
	mapFile := filepath.Join(dir, "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm, cfg.MapFile = "p", filepath.Join(dir, "p"), "", filepath.Join(dir, "p.sock"), mapFile
	cfg.SegmentSize, cfg.SyncMode = 64<<10, "sync"
	s, err := Start(cfg, zaptest.NewLogger(t).Named("p"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	er := s.state.Load().hosted(1)
	if er == nil {
		t.Fatal("region 1 not hosted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(id uint64) *client.Client {
		c, err := client.Open(ctx, client.Config{Map: regionmap.Static{M: m}, Transport: "shm", ClientID: id})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := open(1), open(2)

	for _, tc := range []struct {
		name  string
		first func() error // client 1's write, answered UNAVAILABLE once
		other func() error // client 2's write in between
		want  string       // the value at the end ("": deleted)
	}{
		{"put", func() error { return c1.Put(ctx, []byte("k"), []byte("A")) },
			func() error { return c2.Put(ctx, []byte("k"), []byte("B")) }, "B"},
		{"delete", func() error { return c1.Delete(ctx, []byte("k")) },
			func() error { return c2.Put(ctx, []byte("k"), []byte("C")) }, "C"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var otherErr error
			otherDone := make(chan struct{})
			// Client 2's write is applied while client 1's waits; its
			// acknowledgement may queue behind that wait (the region's
			// acknowledger), so the wait returns once it is applied.
			rep := &firstWaitFails{then: func() {
				go func() {
					defer close(otherDone)
					otherErr = tc.other()
				}()
				for i := 0; i < 10000; i++ {
					if v, err := er.Get([]byte("k")); err == nil && string(v) == tc.want {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}}
			er.SetReplicator(rep)
			defer er.SetReplicator(nil)
			if err := tc.first(); err != nil {
				t.Fatalf("client 1's write: %v", err)
			}
			<-otherDone
			if otherErr != nil {
				t.Fatalf("client 2's write: %v", otherErr)
			}
			if n := rep.calls.Load(); n < 3 {
				t.Fatalf("%d replication waits: the first write was not retried", n)
			}
			got, err := c2.Get(ctx, []byte("k"))
			if err != nil || string(got) != tc.want {
				t.Fatalf("after the retry: %q, %v; want %q (the retry applied client 1's write again)", got, err, tc.want)
			}
		})
	}
}

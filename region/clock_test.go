package region_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/region"
)

// The server's timing on an injected clock (region.WithClock): a fake
// clock that only the test moves decides when the server retries, probes
// and stops serving.

// fakeEpoch is where the tests' fake clocks start: far from the system
// clock, so that a reading of one clock compared with the other's is
// wrong by years, not by a few milliseconds.
var fakeEpoch = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// refusing is a view of a fabric whose dials to the addresses refused
// fail, as to a server that is not listening, until healed; it counts the
// dials.
type refusing struct {
	rdma.Transport
	dials atomic.Int32

	mu      sync.Mutex
	refused map[string]bool
}

func (r *refusing) Dial(ctx context.Context, addr string, cfg rdma.ConnConfig) (rdma.QP, error) {
	r.dials.Add(1)
	r.mu.Lock()
	refused := r.refused[addr]
	r.mu.Unlock()
	if refused {
		return nil, fmt.Errorf("refusing: dial %s: %w", addr, rdma.ErrRejected)
	}
	return r.Transport.Dial(ctx, addr, cfg)
}

// heal lets the dials to addr through.
func (r *refusing) heal(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.refused, addr)
}

// TestInprocReattachOnClockTick: a standalone primary whose attach to its
// backup failed (its dials refused) is retried on the re-attach tick of
// the server's clock, and on nothing else: with the backup reachable
// again the region stays unavailable while the clock stands still; once
// the clock passes the tick (1 s) the region attaches and serves.
func TestInprocReattachOnClockTick(t *testing.T) {
	dir := t.TempDir()
	m := &regionmap.Map{Version: 1, Servers: []regionmap.Server{{Name: "p", TCP: "p"}, {Name: "b", TCP: "b"}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Backups: []string{"b"}, Epoch: 1}}}
	mapFile := filepath.Join(dir, "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		t.Fatal(err)
	}
	fabric := rdma.NewLoopback()
	start := func(name string, opts ...region.Option) *region.Server {
		t.Helper()
		cfg := region.DefaultConfig()
		cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm, cfg.MapFile = name, "/"+name, name, "", mapFile
		cfg.SegmentSize, cfg.L0Pairs, cfg.SyncMode = 64<<10, 64, "async"
		// How long an attach dials (on the system clock) before it fails:
		// short, the failure is the starting point.
		cfg.ReplicationConnect = region.Duration(300 * time.Millisecond)
		s, err := region.Start(cfg, zaptest.NewLogger(t).Named(name),
			append([]region.Option{region.WithFS(newMem()), region.WithListenTransport(fabric)}, opts...)...)
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	start("b")
	clk := clockwork.NewFakeClockAt(fakeEpoch)
	dial := &refusing{Transport: fabric, refused: map[string]bool{"b": true}}
	start("p", region.WithDialTransport(dial), region.WithClock(clk)) // its attach failed: Start waited for it
	dials := dial.dials.Load()
	if dials == 0 {
		t.Fatal("p never dialed its backup")
	}
	cl, err := client.Open(ctxFor(t, 5*time.Second), client.Config{Map: regionmap.Static{M: m}, DialTransport: fabric, Retries: 2, RetryWindow: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	unavailable := func(what string) {
		t.Helper()
		if _, err := cl.Get(ctxFor(t, 5*time.Second), []byte("k")); !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("%s: get: %v, want unavailable (not attached)", what, err)
		}
	}
	unavailable("the attach failed")

	// p's two tickers (the health poll's, the re-attach's) wait on its
	// clock; nothing else does (a failed dial's pause was stopped).
	if err := clk.BlockUntilContext(ctxFor(t, 5*time.Second), 2); err != nil {
		t.Fatalf("p's re-attach ticker never waited on its clock: %v", err)
	}
	dial.heal("b")
	unavailable("the backup reachable, the clock standing still")
	if n := dial.dials.Load(); n != dials {
		t.Fatalf("p dialed its backup again (%d dials, %d before) while its clock stood still: the re-attach is not timed on its clock", n, dials)
	}

	clk.Advance(time.Second) // the re-attach tick
	waitFor(t, 5*time.Second, "region 1 to serve after the re-attach tick", func() bool {
		_, err := cl.Get(ctxFor(t, 5*time.Second), []byte("k"))
		return errors.Is(err, client.ErrNotFound)
	})
	if err := cl.Put(ctxFor(t, 5*time.Second), []byte("k"), []byte("v")); err != nil {
		t.Fatalf("put after the re-attach: %v", err)
	}
	if got, err := cl.Get(ctxFor(t, 5*time.Second), []byte("k")); err != nil || string(got) != "v" {
		t.Fatalf("get after the re-attach: %q, %v", got, err)
	}
	if n := dial.dials.Load(); n == dials {
		t.Fatal("the region serves without a new dial of its backup")
	}
}

// TestInprocLeaseLapsesOnClock: the read contract (docs/failover.md) on
// the servers' and the coordinator's clock: a primary cut off from
// ZooKeeper renews its lease no more, and answers reads and takes writes
// while the clock stands within LeaseFraction x the session timeout of
// its last renewal's send, however long that takes on the system clock;
// once the clock reaches that end, reads and writes get UNAVAILABLE (read
// lease lapsed).
func TestInprocLeaseLapsesOnClock(t *testing.T) {
	clk := clockwork.NewFakeClockAt(fakeEpoch)
	c := startInprocClusterOn(t, 1, 3, clk) // one server: every region served alone, nothing dialed
	cl := c.openClient(c.coord.Source(), 2)
	m, _ := c.coord.Map()
	key, _ := keyOf(m, 1, 0)
	c.putAcked(cl, key, "v1")
	get := func(what string) error {
		t.Helper()
		got, err := cl.Get(ctxFor(t, 5*time.Second), []byte(key))
		if err == nil && string(got) != "v1" {
			t.Fatalf("%s: get %s = %q, want v1", what, key, got)
		}
		return err
	}

	zk := c.nodes["rs1"].zk
	zk.cut(false)
	waitFor(t, 5*time.Second, "the lease renewals to stop", func() bool { return zk.renewing.Load() == 0 })
	// The clock has not moved since the last renewal was sent: the lease
	// ends half a session timeout from now on it.
	lease := time.Duration(float64(inprocSessionTimeout) * coord.LeaseFraction)
	if err := get("cut off, the clock standing still"); err != nil {
		t.Fatalf("cut off, the clock standing still: %v, want the value (the lease holds)", err)
	}
	clk.Advance(lease - time.Nanosecond)
	if err := get("just before the lease ends"); err != nil {
		t.Fatalf("just before the lease ends: %v, want the value", err)
	}
	if err := cl.Put(ctxFor(t, 5*time.Second), []byte(key), []byte("v1")); err != nil {
		t.Fatalf("put just before the lease ends: %v", err)
	}

	clk.Advance(time.Nanosecond)
	lapsed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "read lease lapsed") {
			t.Fatalf("%s once the lease ended: %v, want UNAVAILABLE (read lease lapsed)", what, err)
		}
	}
	lapsed("get", get("the lease ended"))
	lapsed("put", cl.Put(ctxFor(t, 5*time.Second), []byte(key), []byte("v2")))
	// Its /readyz says why.
	resp, err := http.Get("http://" + c.nodes["rs1"].srv.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "read lease lapsed") {
		t.Fatalf("/readyz once the lease ended: %d %q, want 503 naming the lease", resp.StatusCode, body)
	}
}

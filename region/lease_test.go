package region

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/retry"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// pausingClock is a fake clock that, once armed, jumps ahead by pause
// after the given number of further readings (a process paused between
// two of them).
type pausingClock struct {
	mu    sync.Mutex
	now   time.Time
	after int // readings before the jump; <0: not armed
	pause time.Duration
}

func (c *pausingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.after == 0 {
		c.now = c.now.Add(c.pause)
	}
	if c.after >= 0 {
		c.after--
	}
	return c.now
}

func (c *pausingClock) arm(after int, pause time.Duration) {
	c.mu.Lock()
	c.after, c.pause = after, pause
	c.mu.Unlock()
}

// leasedServer starts a standalone server (primary of region 1, no
// backups) and gives it a lease on clk, as a managed server has, held for
// LeaseFraction of a 1 s session from now.
// edit, if given, changes the configuration first.
func leasedServer(t *testing.T, clk coord.Clock, edit ...func(*Config)) (*Server, *coord.Lease) {
	t.Helper()
	dir := t.TempDir()
	m := &regionmap.Map{Version: 1, Servers: []regionmap.Server{{Name: "p", Shm: filepath.Join(dir, "p.sock")}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Epoch: 1}}}
	mapFile := filepath.Join(dir, "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm, cfg.MapFile = "p", filepath.Join(dir, "p"), "", filepath.Join(dir, "p.sock"), mapFile
	cfg.SegmentSize, cfg.L0Pairs, cfg.SyncMode = 64<<10, 64, "async"
	for _, e := range edit {
		e(&cfg)
	}
	s, err := Start(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	l := coord.NewLease(clk)
	l.SetSessionTimeout(time.Second)
	if !l.Confirm(l.Begin()) {
		t.Fatal("the lease does not hold after a renewal")
	}
	s.lease.Store(l)
	return s, l
}

func call(s *Server, typ uint16, payload []byte) ring.Reply {
	return s.handlers()[typ](&ring.ServerRequest{Header: ring.Header{Type: typ, Region: 1}, Payload: payload})
}

// callShort runs the type's ShortFunc as a spinner would; a reply it
// takes with Later is waited for (10 s at most).
func callShort(s *Server, typ uint16, payload []byte) (ring.Reply, bool) {
	later := make(chan ring.Reply, 1)
	req := ring.NewShortRequest(ring.Header{Type: typ, Region: 1}, payload, func(r ring.Reply) { later <- r })
	rep, ok := s.shortHandlers()[typ](req)
	if ok && req.TookLater() {
		select {
		case rep = <-later:
		case <-time.After(10 * time.Second):
			return ring.Reply{Status: wire.StatusInternal, Payload: []byte("test: no reply taken with Later in 10 s")}, true
		}
	}
	return rep, ok
}

// callShortAnswered is callShort tried again, 1000 times at most a
// millisecond apart, while the ShortFunc declines: a ShortFunc may decline
// whenever a lock it needs is held for a moment by another goroutine
// (engine.Region.TryGet), which a test must not read as a refusal.
func callShortAnswered(s *Server, typ uint16, payload []byte) (rep ring.Reply, ok bool) {
	retry.Until(1000, time.Millisecond, func() bool {
		rep, ok = callShort(s, typ, payload)
		return ok
	})
	return rep, ok
}

func getReq(key string) []byte {
	return (&wire.KeyRequest{MapVersion: 1, Key: []byte(key)}).Encode(nil)
}

// TestLeaseGatesRequests: a managed primary answers reads (get, multi-get,
// scan) and accepts writes only while its lease holds; once it lapses (a
// pause past it), every one gets StatusUnavailable.
func TestLeaseGatesRequests(t *testing.T) {
	clk := &pausingClock{now: time.Unix(1000, 0), after: -1}
	s, l := leasedServer(t, clk)
	reqs := map[string]struct {
		typ     uint16
		payload []byte
	}{
		"put":        {wire.TypePut, (&wire.PutRequest{MapVersion: 1, Key: []byte("k"), Value: []byte("v2")}).Encode(nil)},
		"get":        {wire.TypeGet, getReq("k")},
		"get absent": {wire.TypeGet, getReq("absent")},
		"multi-get":  {wire.TypeMultiGet, (&wire.MultiGetRequest{MapVersion: 1, Keys: [][]byte{[]byte("k")}}).Encode(nil)},
		"scan":       {wire.TypeScan, (&wire.ScanRequest{MapVersion: 1, Limit: 10, MaxBytes: 1 << 20}).Encode(nil)},
		"delete":     {wire.TypeDelete, (&wire.DeleteRequest{MapVersion: 1, Key: []byte("k")}).Encode(nil)},
	}
	if rep := call(s, wire.TypePut, (&wire.PutRequest{MapVersion: 1, Key: []byte("k"), Value: []byte("v1")}).Encode(nil)); rep.Status != 0 {
		t.Fatalf("put with the lease held: status %d %s", rep.Status, rep.Payload)
	}
	for name, q := range reqs {
		if rep := call(s, q.typ, q.payload); rep.Status != 0 && rep.Status != wire.StatusNotFound {
			t.Fatalf("%s with the lease held: status %d %s", name, rep.Status, rep.Payload)
		}
	}
	// The spinner's get (the put is durable: a lone primary's is) answers.
	for _, key := range []string{"k", "absent"} {
		if rep, ok := callShortAnswered(s, wire.TypeGet, getReq(key)); !ok || (rep.Status != 0 && rep.Status != wire.StatusNotFound) {
			t.Fatalf("short get %q with the lease held: answered %v, status %d %s", key, ok, rep.Status, rep.Payload)
		}
	}
	clk.arm(0, 600*time.Millisecond) // past the 500 ms lease
	for name, q := range reqs {
		if rep := call(s, q.typ, q.payload); rep.Status != wire.StatusUnavailable {
			t.Errorf("%s after the lease lapsed: status %d %q, want UNAVAILABLE", name, rep.Status, rep.Payload)
		}
	}
	// Refused at routing, before any lock is tried: never declined.
	for _, key := range []string{"k", "absent"} {
		if rep, ok := callShort(s, wire.TypeGet, getReq(key)); !ok || rep.Status != wire.StatusUnavailable {
			t.Errorf("short get %q after the lease lapsed: answered %v, status %d %q, want UNAVAILABLE", key, ok, rep.Status, rep.Payload)
		}
	}
	if l.Holds() {
		t.Fatal("the lease still holds")
	}
}

// TestLeaseCheckedAfterRead: the server is paused between routing a read
// (the lease held) and answering it; by then a new primary may have
// overwritten the value: the answer is UNAVAILABLE, not the value.
func TestLeaseCheckedAfterRead(t *testing.T) {
	clk := &pausingClock{now: time.Unix(1000, 0), after: -1}
	s, _ := leasedServer(t, clk)
	if rep := call(s, wire.TypePut, (&wire.PutRequest{MapVersion: 1, Key: []byte("k"), Value: []byte("old")}).Encode(nil)); rep.Status != 0 {
		t.Fatalf("put: status %d %s", rep.Status, rep.Payload)
	}
	for name, q := range map[string]struct {
		typ     uint16
		payload []byte
	}{
		"get":        {wire.TypeGet, getReq("k")},
		"get absent": {wire.TypeGet, getReq("absent")},
		"multi-get":  {wire.TypeMultiGet, (&wire.MultiGetRequest{MapVersion: 1, Keys: [][]byte{[]byte("k")}}).Encode(nil)},
		"scan":       {wire.TypeScan, (&wire.ScanRequest{MapVersion: 1, Limit: 10, MaxBytes: 1 << 20}).Encode(nil)},
	} {
		t.Run(name, func(t *testing.T) {
			l := s.lease.Load()
			if !l.Confirm(l.Begin()) {
				t.Fatal("renewal")
			}
			clk.arm(1, 600*time.Millisecond) // the routing check reads the clock, then the pause
			rep := call(s, q.typ, q.payload)
			if rep.Status != wire.StatusUnavailable {
				t.Fatalf("answered %d %q after a pause that outlasted the lease, want UNAVAILABLE", rep.Status, rep.Payload)
			}
			if q.typ != wire.TypeGet {
				return
			}
			// The same on the spinner's path. A try the ShortFunc declines
			// (a lock held a moment) may already have spent the armed
			// reading, so every try renews the lease and arms the pause
			// again: the one answered has been paused after routing.
			var short ring.Reply
			var ok bool
			retry.Until(1000, time.Millisecond, func() bool {
				if !l.Confirm(l.Begin()) {
					t.Fatal("renewal")
				}
				clk.arm(1, 600*time.Millisecond)
				short, ok = callShort(s, q.typ, q.payload)
				return ok
			})
			if !ok || short.Status != wire.StatusUnavailable {
				t.Fatalf("short get answered %v, %d %q after a pause that outlasted the lease, want UNAVAILABLE", ok, short.Status, short.Payload)
			}
		})
	}
}

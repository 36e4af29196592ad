package region

import (
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

func putReq(key, value string) []byte {
	return (&wire.PutRequest{MapVersion: 1, Key: []byte(key), Value: []byte(value)}).Encode(nil)
}

// TestShortPut: the spinner takes puts in every mode, and they are
// applied: answered at once when the region's writes do not wait (async
// mode, a lone primary acknowledging from memory: UnsafeLoneAck), later
// (ring.Later) once the group commit holds them otherwise. A lapsed
// lease refuses them there as on a worker.
func TestShortPut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   string
		unsafe bool
	}{
		{"async, acknowledged from memory", "async", true},
		{"async, a lone primary that syncs", "async", false},
		{"sync", "sync", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &pausingClock{now: time.Unix(1000, 0), after: -1}
			s, _ := leasedServer(t, clk, func(c *Config) { c.SyncMode, c.UnsafeLoneAck = tc.mode, tc.unsafe })
			// A decline may also come from a passing holder of the region
			// lock: the put is tried again.
			rep, ok := callShortAnswered(s, wire.TypePut, putReq("k", "v1"))
			if !ok {
				t.Fatalf("short put declined 1000 times (status %d %s)", rep.Status, rep.Payload)
			}
			if get := call(s, wire.TypeGet, getReq("k")); rep.Status != 0 || get.Status != 0 || string(get.Payload) != "v1" {
				t.Fatalf("short put: status %d %s; then get: status %d %q, want v1", rep.Status, rep.Payload, get.Status, get.Payload)
			}
			clk.arm(0, 600*time.Millisecond) // past the 500 ms lease
			if rep, ok := callShort(s, wire.TypePut, putReq("k", "v2")); !ok || rep.Status != wire.StatusUnavailable {
				t.Fatalf("short put after the lease lapsed: answered %v, status %d %q, want UNAVAILABLE", ok, rep.Status, rep.Payload)
			}
		})
	}
}

// TestShortPutDeclinedWhereRepliesMayWait: a put that would be answered
// later is left to a worker when its connection's replies may wait for
// the client (ring.ServerRequest.CanReplyLater false): the region's
// acknowledger must not wait on one client.
func TestShortPutDeclinedWhereRepliesMayWait(t *testing.T) {
	clk := &pausingClock{now: time.Unix(1000, 0), after: -1}
	s, _ := leasedServer(t, clk, func(c *Config) { c.SyncMode = "sync" })
	req := ring.NewShortRequest(ring.Header{Type: wire.TypePut, Region: 1}, putReq("k", "v1"), nil)
	if rep, ok := s.shortHandlers()[wire.TypePut](req); ok {
		t.Fatalf("short put answered (status %d %s), want declined", rep.Status, rep.Payload)
	}
	if get := call(s, wire.TypeGet, getReq("k")); get.Status != wire.StatusNotFound {
		t.Fatalf("a declined short put left the key readable: status %d %q", get.Status, get.Payload)
	}
}

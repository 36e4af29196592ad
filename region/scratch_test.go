package region

import (
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/retry"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// TestTryGetRepliesFromScratch: the spinner's get reads the value into
// the scratch the spinner lends it, so its reply aliases that buffer and
// the get allocates less than one without it.
func TestTryGetRepliesFromScratch(t *testing.T) {
	clk := &pausingClock{now: time.Unix(1000, 0), after: -1}
	s, _ := leasedServer(t, clk)
	want := "a value read into the scratch"
	if rep := call(s, wire.TypePut, (&wire.PutRequest{MapVersion: 1, Key: []byte("k"), Value: []byte(want)}).Encode(nil)); rep.Status != 0 {
		t.Fatalf("put: status %d %s", rep.Status, rep.Payload)
	}
	payload := getReq("k")
	get := s.shortHandlers()[wire.TypeGet]
	try := func(scratch []byte) (ring.Reply, bool) {
		var rep ring.Reply
		var ok bool
		retry.Until(1000, time.Millisecond, func() bool { // a decline (a lock held for a moment) is retried
			req := ring.NewShortRequest(ring.Header{Type: wire.TypeGet, Region: 1}, payload, nil)
			req.Scratch = scratch
			rep, ok = get(req)
			return ok
		})
		return rep, ok
	}
	scratch := make([]byte, 0, ring.ScratchSize)
	rep, ok := try(scratch)
	if !ok || rep.Status != 0 || string(rep.Payload) != want {
		t.Fatalf("get: %v status %d %q, want %q", ok, rep.Status, rep.Payload, want)
	}
	full := scratch[:cap(scratch)]
	in := false
	for i := range full {
		in = in || &full[i] == &rep.Payload[0]
	}
	if !in {
		t.Fatal("the get's reply is not in the scratch it was lent")
	}
	with := testing.AllocsPerRun(100, func() { _, _ = try(scratch) })
	without := testing.AllocsPerRun(100, func() { _, _ = try(nil) })
	t.Logf("allocations per get: %v with the scratch, %v without", with, without)
	if with >= without {
		t.Fatalf("%v allocations per get with the scratch, %v without: want fewer", with, without)
	}
}

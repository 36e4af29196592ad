package region

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// callWithin is call with the client's largest reply (MaxReply) set.
func callWithin(s *Server, typ uint16, payload []byte, maxReply int) ring.Reply {
	return s.handlers()[typ](&ring.ServerRequest{Header: ring.Header{Type: typ, Region: 1}, Payload: payload, MaxReply: maxReply})
}

// TestReplyBounds: a multi-get or scan builds no reply larger than the
// client's reply ring can take: a multi-get over it is TOO_LARGE (the
// client splits it), a scan asking for more stops there with MORE.
func TestReplyBounds(t *testing.T) {
	clk := &pausingClock{now: time.Unix(1000, 0), after: -1}
	s, _ := leasedServer(t, clk)
	var keys [][]byte
	val := bytes.Repeat([]byte{'v'}, 1000)
	for i := range 20 {
		k := fmt.Appendf(nil, "k%03d", i)
		keys = append(keys, k)
		if rep := call(s, wire.TypePut, (&wire.PutRequest{MapVersion: 1, Key: k, Value: val}).Encode(nil)); rep.Status != 0 {
			t.Fatalf("put: status %d %s", rep.Status, rep.Payload)
		}
	}
	const limit = 8 << 10 // 8 values fit, 20 do not
	mg := (&wire.MultiGetRequest{MapVersion: 1, Keys: keys}).Encode(nil)
	if rep := callWithin(s, wire.TypeMultiGet, mg, limit); rep.Status != wire.StatusTooLarge {
		t.Errorf("multi-get of 20 KB within %d bytes: status %d (%d bytes), want TOO_LARGE", limit, rep.Status, len(rep.Payload))
	}
	if rep := callWithin(s, wire.TypeMultiGet, (&wire.MultiGetRequest{MapVersion: 1, Keys: keys[:7]}).Encode(nil), limit); rep.Status != 0 || len(rep.Payload) > limit {
		t.Errorf("multi-get of 7 KB within %d bytes: status %d, %d bytes", limit, rep.Status, len(rep.Payload))
	}
	scan := (&wire.ScanRequest{MapVersion: 1, Limit: 1 << 30, MaxBytes: 1 << 30}).Encode(nil)
	rep := callWithin(s, wire.TypeScan, scan, limit)
	if rep.Status != 0 || len(rep.Payload) > limit {
		t.Fatalf("scan asking for 1 GiB within %d bytes: status %d, %d bytes", limit, rep.Status, len(rep.Payload))
	}
	sr, err := wire.DecodeScanReply(rep.Payload)
	if err != nil || sr.Flags != wire.ScanMore || len(sr.Pairs) == 0 || len(sr.Pairs) == len(keys) {
		t.Fatalf("scan reply: flags %d, %d pairs, %v; want MORE and some of %d", sr.Flags, len(sr.Pairs), err, len(keys))
	}
}

package ring

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
)

// TestMaxPayload: the largest payload fits half a ring, one more byte
// does not.
func TestMaxPayload(t *testing.T) {
	for _, n := range []int{MinRing, MinRing + HeaderSize, 16 << 10, DefaultRing, DefaultRing + HeaderSize, MaxRing} {
		p := MaxPayload(n)
		if MsgSize(p) > n/2 || MsgSize(p+1) <= n/2 {
			t.Errorf("ring %d: MaxPayload %d takes %d, one more byte %d, half %d", n, p, MsgSize(p), MsgSize(p+1), n/2)
		}
	}
}

// TestServerRequestMaxReply: a handler learns the largest reply the
// client's reply ring can take, and a reply of that size arrives.
func TestServerRequestMaxReply(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		const reqRing, repRing = 16 << 10, 32 << 10
		var seen atomic.Int64
		s, _ := start(t, e, ServerConfig{Handlers: map[uint16]HandlerFunc{typeSized: func(r *ServerRequest) Reply {
			seen.Store(int64(r.MaxReply))
			return Reply{Payload: make([]byte, binary.LittleEndian.Uint32(r.Payload))}
		}}})
		c := dial(t, e, s, ClientConfig{RequestRing: reqRing, ReplyRing: repRing})
		rep, err := call(t, c, Request{Type: typeSized, Payload: binary.LittleEndian.AppendUint32(nil, uint32(MaxPayload(repRing)))})
		if err != nil || len(rep.Payload) != MaxPayload(repRing) {
			t.Fatalf("reply of MaxPayload: %d bytes, %v", len(rep.Payload), err)
		}
		if got := seen.Load(); got != int64(MaxPayload(repRing)) {
			t.Fatalf("MaxReply %d, want %d", got, MaxPayload(repRing))
		}
	})
}

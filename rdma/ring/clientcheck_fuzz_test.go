package ring

import (
	"bytes"
	"testing"

	"github.com/tebis-go/tebis/rdma"
)

// FuzzClientCheck: a client reading whatever a server wrote into a reply
// slot never panics or reads past the slot, and delivers a reply only
// with the payload its header announced.
func FuzzClientCheck(f *testing.F) {
	reply := func(h Header, payload []byte) []byte {
		b := make([]byte, MsgSize(len(payload)))
		encode(b, h, payload, nil)
		return b
	}
	f.Add(reply(Header{Type: TypeFirstApp, Flags: FlagReply, ReqID: 1}, []byte("value")), uint8(0), uint8(4))
	f.Add(reply(Header{Type: TypeFirstApp, Flags: FlagReply, ReqID: 1}, nil), uint8(3), uint8(1))
	f.Add(reply(Header{Type: TypeFirstApp, Flags: FlagReply, ReqID: 1, Status: StatusTooSmall, Aux: 8192}, nil), uint8(1), uint8(1))
	f.Add(reply(Header{Type: TypeFirstApp, Flags: FlagReply, ReqID: 2}, []byte("not mine")), uint8(0), uint8(2))
	f.Add(reply(Header{Type: TypeFirstApp, Flags: FlagReply, ReqID: 1}, bytes.Repeat([]byte{7}, 300)), uint8(0), uint8(2))
	mr, err := rdma.Register(MinRing)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, pre, slots uint8) {
		buf := mr.Bytes()
		clear(buf)
		c := &Client{repMR: mr, rep: spans{size: MinRing}, pending: map[uint64]*Call{}, space: make(chan struct{})}
		if _, _, ok := c.rep.reserve(uint64(pre%(MinRing/HeaderSize)) * HeaderSize); !ok {
			return
		}
		slotSize := (int(slots)%(MinRing/2/HeaderSize) + 1) * HeaderSize
		at, _, ok := c.rep.reserve(uint64(slotSize))
		if !ok {
			return
		}
		// retried: a TOO_SMALL reply is delivered, not sent again.
		call := &Call{Req: Request{Type: TypeFirstApp}, Done: make(chan *Call, 1), id: 1, slot: at, slotSize: slotSize, retried: true}
		c.pending[1], c.bySlot = call, []*Call{call}
		off := int(at % MinRing)
		copy(buf[off:off+slotSize], b)
		done, err := c.check(call)
		if err != nil || !done {
			return
		}
		var got *Call
		select {
		case got = <-call.Done:
		default:
			t.Fatal("a completed call was not delivered")
		}
		n := len(got.Reply.Payload)
		if MsgSize(n) > slotSize {
			t.Fatalf("a %d-byte payload from a %d-byte slot", n, slotSize)
		}
		if n > 0 && !bytes.Equal(got.Reply.Payload, b[HeaderSize:HeaderSize+n]) {
			t.Fatal("the payload is not the slot's bytes")
		}
		if !bytes.Equal(buf[off:off+MsgSize(n)], make([]byte, MsgSize(n))) {
			t.Fatal("the consumed reply was not cleared")
		}
	})
}

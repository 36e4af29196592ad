package ring

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// tornMessage encodes a message and writes it into b the way Go's memmove
// (the shm transport's copy) leaves it midway through a copy of more than
// 256 bytes: everything but the first 32 bytes and the last word, so the
// header's magic and checksum are visible and the checksum fails.
func tornMessage(b []byte, h Header, payload []byte) []byte {
	msg := make([]byte, MsgSize(len(payload)))
	encode(msg, h, payload, nil)
	copy(b[32:len(msg)-8], msg[32:len(msg)-8])
	return msg
}

// finish lands the rest of a torn message: its first bytes, then its last
// word.
func finish(b, msg []byte) {
	copy(b[:32], msg[:32])
	rdma.StoreWord(b, len(msg)-8, tailMagic^rdma.LoadWord(msg, 8))
}

func register(t *testing.T, n int) *rdma.MR {
	t.Helper()
	mr, err := rdma.Register(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Deregister() })
	return mr
}

// TestTornHeaderWaits: a request whose header does not verify yet because
// its first bytes land last is a message still arriving. A writer stalled
// mid-copy (a loaded machine) for longer than a second but less than the
// arrival bound must not get its connection closed; past the bound it is
// malformed.
func TestTornHeaderWaits(t *testing.T) {
	s := newServer(ServerConfig{}, nil)
	t.Cleanup(func() { s.Close() })
	mr := register(t, MinRing)
	c := &sconn{s: s, reqMR: mr, repMR: register(t, MinRing), reqSize: MinRing, repSize: MinRing}
	ring := mr.Bytes()
	payload := bytes.Repeat([]byte{0xA5}, 300)
	msg := tornMessage(ring, Header{Type: typeEcho, ReqID: 7, ReplySize: HeaderSize}, payload)
	if _, ok, err := c.poll(); ok || err != nil {
		t.Fatalf("torn header: ok %v err %v, want waiting", ok, err)
	}
	// The writer has been stalled mid-copy for two seconds.
	c.waitFrom = time.Now().Add(-2 * time.Second)
	if _, ok, err := c.poll(); ok || err != nil {
		t.Fatalf("torn header after 2s: ok %v err %v, want waiting", ok, err)
	}
	finish(ring, msg)
	tk, ok, err := c.poll()
	if !ok || err != nil || tk.c == nil || tk.req.ReqID != 7 || !bytes.Equal(tk.req.Payload, payload) {
		t.Fatalf("whole message: ok %v err %v req %+v", ok, err, tk.req.Header)
	}
	if !c.waitFrom.IsZero() || c.rp != len(msg) {
		t.Fatalf("after consuming: rp %d waitFrom %v", c.rp, c.waitFrom)
	}

	// A header that never verifies is still malformed past the bound.
	tornMessage(ring[c.rp:], Header{Type: typeEcho, ReqID: 8, ReplySize: HeaderSize}, payload)
	if _, ok, err := c.poll(); ok || err != nil {
		t.Fatalf("second torn header: ok %v err %v, want waiting", ok, err)
	}
	c.waitFrom = time.Now().Add(-DefaultArriveWait - time.Second)
	if _, _, err := c.poll(); !errors.Is(err, errChecksum) {
		t.Fatalf("torn header past the bound: %v, want %v", err, errChecksum)
	}
}

// TestTornReplyWaits: the client side of TestTornHeaderWaits, for a reply
// whose header's first bytes land last.
func TestTornReplyWaits(t *testing.T) {
	mr := register(t, MinRing)
	c := &Client{cfg: ClientConfig{ArriveWait: DefaultArriveWait}, repMR: mr, rep: spans{size: MinRing}, pending: map[uint64]*Call{}, space: make(chan struct{})}
	payload := bytes.Repeat([]byte{0x5A}, 1000)
	slotSize := MsgSize(len(payload))
	at, _, _ := c.rep.reserve(uint64(slotSize))
	call := &Call{Req: Request{Type: typeEcho}, Done: make(chan *Call, 1), id: 3, slot: at, slotSize: slotSize}
	c.pending[3], c.bySlot = call, []*Call{call}
	buf := mr.Bytes()
	msg := tornMessage(buf, Header{Type: typeEcho, Flags: FlagReply, ReqID: 3}, payload)
	if done, err := c.check(call); done || err != nil {
		t.Fatalf("torn reply: done %v err %v, want waiting", done, err)
	}
	call.badSince = time.Now().Add(-2 * time.Second)
	if done, err := c.check(call); done || err != nil {
		t.Fatalf("torn reply after 2s: done %v err %v, want waiting", done, err)
	}
	finish(buf, msg)
	if done, err := c.check(call); !done || err != nil {
		t.Fatalf("whole reply: done %v err %v", done, err)
	}
	if got := <-call.Done; got.Err != nil || !bytes.Equal(got.Reply.Payload, payload) {
		t.Fatalf("reply: err %v, %d bytes", got.Err, len(got.Reply.Payload))
	}

	// Past the bound a header that does not verify breaks the client.
	at, _, _ = c.rep.reserve(uint64(slotSize))
	call = &Call{Req: Request{Type: typeEcho}, Done: make(chan *Call, 1), id: 4, slot: at, slotSize: slotSize}
	c.pending[4], c.bySlot = call, []*Call{call}
	tornMessage(buf[at%MinRing:], Header{Type: typeEcho, Flags: FlagReply, ReqID: 4}, payload)
	if done, err := c.check(call); done || err != nil {
		t.Fatalf("second torn reply: done %v err %v, want waiting", done, err)
	}
	call.badSince = time.Now().Add(-DefaultArriveWait - time.Second)
	if _, err := c.check(call); !errors.Is(err, errChecksum) {
		t.Fatalf("torn reply past the bound: %v, want %v", err, errChecksum)
	}
}

// TestStalledWriterShm: over shm, a client that lands a request the way
// memmove does (all but the header's first 32 bytes, then the rest) and is
// stalled for 1.5 s in between gets its request served, not its connection
// closed as malformed (it was, with a one-second bound for a header that
// does not verify).
func TestStalledWriterShm(t *testing.T) {
	e := envs[1]
	if e.name != "shm" {
		t.Fatalf("envs[1] is %s", e.name)
	}
	s, _ := start(t, e, ServerConfig{})
	r, err := rawDial(t, e, s, connParams{reqRing: DefaultRing, repRing: DefaultRing}.encode())
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{0x42}, 2<<10)
	n := MsgSize(len(payload))
	msg := make([]byte, n)
	encode(msg, Header{Type: typeEcho, ReqID: 1, ReplySize: uint32(n)}, payload, nil)
	r.write(t, 32, msg[32:n-8])
	time.Sleep(1500 * time.Millisecond)
	r.write(t, 0, msg[:32])
	r.write(t, n-8, msg[n-8:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep := r.rep.Bytes()
	for rdma.LoadWord(rep, n-8) != tailMagic^1 {
		if ctx.Err() != nil {
			t.Fatalf("no reply; stats %+v", s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	if h, err := decodeHeader(rep[:HeaderSize], n); err != nil || h.ReqID != 1 || !bytes.Equal(rep[HeaderSize:HeaderSize+int(h.Len)], payload) {
		t.Fatalf("reply %+v: %v", h, err)
	}
	if st := s.Stats(); st.Malformed != 0 || st.Conns != 1 {
		t.Fatalf("stats %+v", st)
	}
}

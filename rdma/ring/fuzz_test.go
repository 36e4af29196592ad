package ring

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/rdma"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite testdata (seed corpora and golden messages)")

// seedMessages are valid and broken ring images the fuzz targets start from.
func seedMessages() [][]byte {
	msg := func(h Header, payload []byte) []byte {
		b := make([]byte, MsgSize(len(payload)))
		encode(b, h, payload, nil)
		return b
	}
	req := msg(Header{Type: TypeFirstApp, ReqID: 7, ReplyOff: 128, ReplySize: 256, Region: 3, Epoch: 2}, []byte("payload"))
	noop := make([]byte, HeaderSize)
	(&Header{Type: TypeNoop, Len: 4096 - HeaderSize}).put(noop)
	flipped := bytes.Clone(req)
	flipped[5] ^= 1
	noTail := bytes.Clone(req)
	noTail[len(noTail)-1] ^= 0xFF
	two := append(msg(Header{Type: TypeFirstApp, ReqID: 1, ReplySize: 64}, nil), req...)
	return [][]byte{req, noop, flipped, noTail, two, bytes.Repeat([]byte{0xEE}, 64), {}}
}

// FuzzDecodeHeader: no input panics; a header that decodes re-encodes to
// the same bytes.
func FuzzDecodeHeader(f *testing.F) {
	for _, m := range seedMessages() {
		f.Add(m, 4096)
	}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		h, err := decodeHeader(b, limit)
		if err != nil {
			return
		}
		out := make([]byte, HeaderSize)
		h.put(out)
		if !bytes.Equal(out[:42], b[:42]) || !bytes.Equal(out[44:52], b[44:52]) || !bytes.Equal(out[56:64], b[56:64]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", out, b[:HeaderSize])
		}
		if h.Type != TypeNoop && MsgSize(int(h.Len)) > limit {
			t.Fatalf("accepted a %d-byte payload with %d bytes left", h.Len, limit)
		}
	})
}

// FuzzServerPoll: the server's ring poller over arbitrary ring contents
// never panics, never hands out a payload outside the ring, and either
// consumes, waits or reports a malformed message.
func FuzzServerPoll(f *testing.F) {
	for _, m := range seedMessages() {
		f.Add(m, uint16(0))
	}
	mr, err := rdma.Register(MinRing)
	if err != nil {
		f.Fatal(err)
	}
	rep, err := rdma.Register(MinRing)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, at uint16) {
		ring := mr.Bytes()
		clear(ring)
		pos := int(at) % (MinRing / HeaderSize) * HeaderSize
		copy(ring[pos:], b)
		c := &sconn{s: &Server{}, reqMR: mr, repMR: rep, reqSize: MinRing, repSize: MinRing, rp: pos}
		for range 8 {
			tk, ok, err := c.poll()
			if err != nil || !ok {
				return
			}
			if c.rp < 0 || c.rp >= MinRing || c.rp%HeaderSize != 0 {
				t.Fatalf("rendezvous point %d", c.rp)
			}
			if tk.c != nil {
				if int(tk.req.Len) != len(tk.req.Payload) || len(tk.req.Payload) > MinRing/1 {
					t.Fatalf("payload %d bytes for length %d", len(tk.req.Payload), tk.req.Len)
				}
				if int(tk.req.ReplyOff)+int(tk.req.ReplySize) > MinRing {
					t.Fatalf("reply slot %d+%d past the ring", tk.req.ReplyOff, tk.req.ReplySize)
				}
			}
		}
	})
}

// FuzzConnParams: connection parameters decode or fail cleanly.
func FuzzConnParams(f *testing.F) {
	f.Add(connParams{reqRing: DefaultRing, repRing: DefaultRing}.encode())
	f.Add([]byte("junk"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodeConnParams(b)
		if err == nil && (checkRing(int(p.reqRing)) != nil || checkRing(int(p.repRing)) != nil) {
			t.Fatalf("accepted rings %d/%d", p.reqRing, p.repRing)
		}
	})
}

// TestGoldenMessages pins the wire bytes of a request, a reply, a NOOP and
// a too-small reply (docs/protocol.md) to testdata/golden/messages.hex.
func TestGoldenMessages(t *testing.T) {
	var sb strings.Builder
	dump := func(name string, h Header, payload []byte) {
		b := make([]byte, MsgSize(len(payload)))
		if h.Type == TypeNoop {
			b = b[:HeaderSize]
			h.put(b)
		} else {
			encode(b, h, payload, nil)
		}
		fmt.Fprintf(&sb, "# %s\n", name)
		for i := 0; i < len(b); i += 16 {
			fmt.Fprintf(&sb, "%s\n", hex.EncodeToString(b[i:i+16]))
		}
	}
	dump("request: type 16, id 7, reply slot 128+256, region 3, epoch 2, payload \"get:k1\"",
		Header{Type: 16, ReqID: 7, ReplyOff: 128, ReplySize: 256, Region: 3, Epoch: 2}, []byte("get:k1"))
	dump("reply to it: status 0, payload \"v1\"", Header{Type: 16, Flags: FlagReply, ReqID: 7, Region: 3, Epoch: 2}, []byte("v1"))
	dump("noop filling 192 bytes", Header{Type: TypeNoop, Len: 128}, nil)
	dump("too-small reply: needs 4224 bytes", Header{Type: 16, Flags: FlagReply, ReqID: 8, Status: StatusTooSmall, Aux: 4224}, nil)
	path := filepath.Join("testdata", "golden", "messages.hex")
	if *updateCorpus {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-corpus to create it)", err)
	}
	if string(want) != sb.String() {
		t.Fatalf("wire bytes changed:\n%s\nwant:\n%s", sb.String(), want)
	}
}

// TestSeedCorpus writes the fuzz seed corpora into testdata/fuzz with
// -update-corpus; otherwise it checks they exist.
func TestSeedCorpus(t *testing.T) {
	for i, m := range seedMessages() {
		for _, target := range []struct {
			name string
			arg  string
		}{{"FuzzDecodeHeader", "int(4096)"}, {"FuzzServerPoll", "uint16(0)"}} {
			path := filepath.Join("testdata", "fuzz", target.name, fmt.Sprintf("seed-%d", i))
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n%s\n", m, target.arg)
			if *updateCorpus {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("seed corpus missing: %v (run with -update-corpus)", err)
			}
		}
	}
}

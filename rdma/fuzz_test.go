package rdma

import (
	"bytes"
	"testing"
)

// FuzzDecodeHello: connection set-up messages decode or fail cleanly, and
// what decodes re-encodes to the same bytes.
func FuzzDecodeHello(f *testing.F) {
	f.Add(hello{kind: helloRequest, mrs: []RemoteMR{{Addr: 1 << 32, Key: 7, Len: 4096}}, private: []byte("p")}.encode())
	f.Add(hello{kind: helloReject}.encode())
	f.Add([]byte("TBRD"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHello(b)
		if err != nil {
			return
		}
		if out := h.encode(); !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", out, b)
		}
	})
}

// FuzzDecodeFrame: TCP frame headers decode or fail cleanly.
func FuzzDecodeFrame(f *testing.F) {
	b := make([]byte, frameHeader)
	(&frame{typ: frameWrite, n: 64, addr: 1 << 32, key: 9, off: 128}).put(b)
	f.Add(b)
	f.Add(make([]byte, frameHeader))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < frameHeader {
			return
		}
		fr, err := decodeFrame(b)
		if err != nil {
			return
		}
		if fr.typ != frameWrite && fr.n != 0 || fr.n > maxFrameData {
			t.Fatalf("accepted %+v", fr)
		}
		out := make([]byte, frameHeader)
		fr.put(out)
		if !bytes.Equal(out, b[:frameHeader]) {
			t.Fatalf("re-encoding differs")
		}
	})
}

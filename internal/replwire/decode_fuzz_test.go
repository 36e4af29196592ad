package replwire

import (
	"bytes"
	"slices"
	"testing"

	"github.com/tebis-go/tebis/engine"
)

// Fuzz targets for the decoders of what a peer sends a region server: a
// primary's replication hello, and the data of the commands and answers
// a stream carries (state, rebase pairs, Build-Index positions and pairs)
// and the tail marker a primary WRITEs into a backup's buffer. Each must
// refuse malformed bytes with an error, never panic, and whatever it
// accepts must encode back to the same bytes.

func FuzzDecodeHello(f *testing.F) {
	f.Add(Hello{Region: 3, Epoch: 7, SegSize: 2 << 20}.Encode())
	f.Add([]byte("TBRP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHello(b)
		if err == nil && !bytes.Equal(h.Encode(), b) {
			t.Fatalf("hello %x decoded as %+v, which encodes as %x", b, h, h.Encode())
		}
	})
}

func FuzzDecodeState(f *testing.F) {
	f.Add(State{}.Encode())
	f.Add(State{Logs: []engine.LogSegment{{Segment: 4, Seq: 9, End: 4096}, {Segment: 5, Seq: 10}},
		Levels: []Level{{Height: 2, Segments: 3, Root: 77, Pairs: 100, KVBytes: 5000, Nodes: 12}},
		RP:     RecoveryPoint{Segment: 4, Seq: 9, Offset: 128}}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := DecodeState(b)
		if err == nil && !bytes.Equal(st.Encode(), b) {
			t.Fatalf("state %x decoded as %+v, which encodes as %x", b, st, st.Encode())
		}
	})
}

func FuzzDecodeRebase(f *testing.F) {
	f.Add(EncodeRebase([]RebasePair{{Old: 1, Seq: 2, New: 3}, {Old: 4, Seq: 5, New: 6}}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := DecodeRebase(b)
		if err == nil && !bytes.Equal(EncodeRebase(ps), b) {
			t.Fatalf("rebase data %x decoded as %+v", b, ps)
		}
	})
}

// FuzzDecodeBuildData: a Build-Index stream's position, applied point and
// pairs.
func FuzzDecodeBuildData(f *testing.F) {
	p := Position{Log: 9, Index: 1, Segment: 4, Seq: 8, Off: 4096}
	f.Add(p.Encode())
	f.Add(Applied{Position: p, Sealed: true}.Encode())
	f.Add(EncodePairs(EncodePairs(nil, []byte("k1"), []byte("v1")), []byte("k2"), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, err := DecodePosition(b); err == nil && !bytes.Equal(p.Encode(), b) {
			t.Fatalf("position %x decoded as %+v", b, p)
		}
		if a, ok, err := DecodeApplied(b); err == nil && ok && !bytes.Equal(a.Encode(), b) {
			t.Fatalf("applied point %x decoded as %+v", b, a)
		} else if err == nil && !ok && len(b) != 0 {
			t.Fatalf("applied point %x: no point and no error", b)
		}
		var again []byte
		if err := DecodePairs(b, func(k, v []byte) error {
			if len(k) == 0 {
				t.Fatalf("pairs %x: an empty key accepted", b)
			}
			again = EncodePairs(again, k, v)
			return nil
		}); err == nil && !bytes.Equal(again, b) {
			t.Fatalf("pairs %x re-encode as %x", b, again)
		}
	})
}

func FuzzDecodeMarker(f *testing.F) {
	half := make([]byte, engine.SegmentHeaderSize)
	copy(half, Marker{Region: 1, Segment: 5, Seq: 6, Index: 2}.Encode())
	f.Add(half)
	f.Add([]byte("TBMT"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, ok := DecodeMarker(b)
		if !ok {
			return
		}
		if m.Segment == 0 || !bytes.Equal(m.Encode(), b[:markerSize]) {
			t.Fatalf("marker %x decoded as %+v", b[:markerSize], m)
		}
		c := slices.Clone(b)
		ClearMarker(c)
		if _, ok := DecodeMarker(c); ok {
			t.Fatal("a cleared marker still decodes")
		}
	})
}

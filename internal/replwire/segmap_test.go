package replwire

import (
	"bytes"
	"errors"
	"maps"
	"testing"
)

func TestSegMapEncoding(t *testing.T) {
	m := map[uint64]uint64{7: 11, 5: 9}
	b := EncodeSegMap(m)
	want := []byte{2, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 0, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding %x, want %x", b, want)
	}
	back, err := DecodeSegMap(b)
	if err != nil || !maps.Equal(back, m) {
		t.Fatalf("round trip: %v %v", back, err)
	}
	// A pair listed twice counts once.
	if back, err := DecodeSegMap(append(append([]byte{3}, b[1:]...), b[20:]...)); err != nil || !maps.Equal(back, m) {
		t.Fatalf("a repeated pair: %v %v", back, err)
	}
	pairs := func(ps ...uint64) []byte {
		out := []byte{byte(len(ps) / 2), 0, 0, 0}
		for _, p := range ps {
			out = append(out, byte(p), 0, 0, 0, 0, 0, 0, 0)
		}
		return out
	}
	for _, b := range [][]byte{nil, {1, 0, 0, 0}, append(EncodeSegMap(nil), 1),
		pairs(0, 3), pairs(3, 0), pairs(5, 9, 5, 10), pairs(5, 9, 6, 9)} {
		if _, err := DecodeSegMap(b); !errors.Is(err, ErrBadEncoding) {
			t.Fatalf("decode %x: %v", b, err)
		}
	}
}

func FuzzDecodeSegMap(f *testing.F) {
	f.Add(EncodeSegMap(map[uint64]uint64{1: 2, 3: 4}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeSegMap(b)
		if err == nil && !bytes.Equal(EncodeSegMap(m), b) && len(m) > 0 {
			// Encode sorts; an unsorted input decodes but re-encodes sorted.
			if again, err := DecodeSegMap(EncodeSegMap(m)); err != nil || !maps.Equal(again, m) {
				t.Fatalf("re-decode: %v", err)
			}
		}
	})
}

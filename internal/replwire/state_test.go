package replwire

import (
	"encoding/binary"
	"errors"
	"runtime"
	"testing"
)

// levelState is the encoding of a state with no log segments and n
// levels claiming segs index segments each.
func levelState(n int, segs uint32) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, 0)
	b = le.AppendUint32(b, uint32(n))
	for range n {
		b = le.AppendUint32(b, 1)    // height
		b = le.AppendUint32(b, segs) // segment count
		b = append(b, make([]byte, 32)...)
	}
	return append(b, make([]byte, 24)...) // no recovery point
}

// allocated returns the bytes a call of f allocates on the heap, on
// average over 100 calls (other goroutines may add to it, never take
// away).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 100 {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / 100
}

// TestDecodeStateAllocatesByBytes: a level's segment count is not backed
// by bytes in the message, so decoding allocates by the message's size,
// not by the counts it claims.
func TestDecodeStateAllocatesByBytes(t *testing.T) {
	one := levelState(1, maxCmdSeg)
	if len(one) > 80 {
		t.Fatalf("setup: %d bytes", len(one))
	}
	var st State
	var err error
	if n := allocated(func() { st, err = DecodeState(one) }); n > 1<<10 {
		t.Errorf("decoding a %d-byte state allocated %d bytes", len(one), n)
	}
	if err != nil || len(st.Levels) != 1 || st.Levels[0].Segments != maxCmdSeg {
		t.Fatalf("decoded %+v, %v; want one level of %d segments", st, err, maxCmdSeg)
	}
	many := levelState(1000, maxCmdSeg) // 40 KB claiming 65 M segments
	if n := allocated(func() { st, err = DecodeState(many) }); n > 256<<10 {
		t.Errorf("decoding a %d-byte state allocated %d bytes", len(many), n)
	}
	if err != nil || len(st.Levels) != 1000 {
		t.Fatalf("decoded %d levels, %v; want 1000", len(st.Levels), err)
	}
	if _, err := DecodeState(levelState(1, maxCmdSeg+1)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a level of %d segments: %v, want %v", maxCmdSeg+1, err, ErrMalformed)
	}
}

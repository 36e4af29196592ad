package replwire

import (
	"encoding/binary"

	"github.com/tebis-go/tebis/engine"
)

// A tail marker names the primary log segment a buffer half mirrors. The
// primary writes it at offset 0 of the half (the segment header's place,
// which records never use) before the segment's first record, so a
// backup promoted after its primary died knows which half holds the tail
// and with which seed its records verify.
//
//	0 "TBMT"  4 u32 zero  8 u64 region  16 u64 segment  24 u64 seq
//	32 u64 index (the segment's position in the primary's log)
const markerSize = 40

var markerMagic = [4]byte{'T', 'B', 'M', 'T'}

// Marker is a decoded tail marker.
type Marker struct {
	Region, Segment, Seq, Index uint64
}

// Encode returns the marker's bytes.
func (m Marker) Encode() []byte {
	b := make([]byte, markerSize)
	copy(b, markerMagic[:])
	binary.LittleEndian.PutUint64(b[8:], m.Region)
	binary.LittleEndian.PutUint64(b[16:], m.Segment)
	binary.LittleEndian.PutUint64(b[24:], m.Seq)
	binary.LittleEndian.PutUint64(b[32:], m.Index)
	return b
}

// DecodeMarker reads the marker of a buffer half (ok false: none).
func DecodeMarker(half []byte) (m Marker, ok bool) {
	if len(half) < engine.SegmentHeaderSize || [4]byte(half[:4]) != markerMagic || binary.LittleEndian.Uint32(half[4:]) != 0 {
		return Marker{}, false
	}
	m = Marker{Region: binary.LittleEndian.Uint64(half[8:]), Segment: binary.LittleEndian.Uint64(half[16:]), Seq: binary.LittleEndian.Uint64(half[24:]),
		Index: binary.LittleEndian.Uint64(half[32:])}
	return m, m.Segment != 0
}

// ClearMarker erases a buffer half's marker: DecodeMarker finds none
// there afterwards.
func ClearMarker(half []byte) { clear(half[:markerSize]) }

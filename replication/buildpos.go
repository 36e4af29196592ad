package replication

import (
	"encoding/binary"
	"fmt"
)

// Build-Index positions. A Build-Index backup applies its primary's log
// records to a region of its own, so what it holds is a point of one
// primary's log: everything before it is applied. Segment numbers and
// record seeds are only unique within one primary's volume, so a point
// also names the log (Log: an identity the primary draws for each
// primaryship of a region, never reused) and the segment's index in it.

// Position is a point of a primary's log: segment Segment (records sealed
// with Seq) at index Index of log Log, offset Off.
type Position struct {
	Log, Index, Segment, Seq uint64
	Off                      int64
}

const positionSize = 40

// Encode is the position's encoding (CmdApplyFrom data, a Build-Index
// backup's answer to CmdCheck): u64 log, u64 index, u64 segment, u64 seq,
// i64 offset, little-endian.
func (p Position) Encode() []byte {
	le := binary.LittleEndian
	b := le.AppendUint64(nil, p.Log)
	b = le.AppendUint64(b, p.Index)
	b = le.AppendUint64(b, p.Segment)
	b = le.AppendUint64(b, p.Seq)
	return le.AppendUint64(b, uint64(p.Off))
}

// DecodePosition parses Position.Encode's bytes.
func DecodePosition(b []byte) (Position, error) {
	if len(b) != positionSize {
		return Position{}, fmt.Errorf("%w: position of %d bytes", ErrMalformed, len(b))
	}
	le := binary.LittleEndian
	p := Position{Log: le.Uint64(b), Index: le.Uint64(b[8:]), Segment: le.Uint64(b[16:]), Seq: le.Uint64(b[24:]), Off: int64(le.Uint64(b[32:]))}
	if p.Log == 0 || p.Segment == 0 || p.Off < 0 {
		return Position{}, fmt.Errorf("%w: position %+v", ErrMalformed, p)
	}
	return p, nil
}

// Handover is what a promoted Build-Index backup keeps of its old
// primary's log so that the other backups, which may have applied less of
// it, can be caught up: the buffer halves it replayed (in the old
// primary's terms) and the point of its own log where the replay ended.
// The new primary's first streams use it (ShipperConfig.Handover).
type Handover struct {
	Log    uint64      // the old primary's log identity
	Halves []HalfImage // oldest first
	// At is the promoted region's own log tail after the replay (Log is
	// the new primary's, set by its shipper): the old primary's records
	// above, and the promoted region's own records before At, make up
	// the region's state at At.
	At Position
}

// HalfImage is one replayed buffer half: the old primary's segment Segment
// (records sealed with Seq, at Index in its log), valid records up to End.
type HalfImage struct {
	Index, Segment, Seq uint64
	End                 int64
	Image               []byte
}

// EncodePairs appends key/value pairs as CmdPairs data: per pair u32 key
// length, u32 value length, key, value.
func EncodePairs(b []byte, key, value []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(value)))
	b = append(b, key...)
	return append(b, value...)
}

// decodePairs calls f for every pair of CmdPairs data (key and value alias
// b), stopping at f's first error.
func decodePairs(b []byte, f func(key, value []byte) error) error {
	le := binary.LittleEndian
	for len(b) > 0 {
		if len(b) < 8 {
			return fmt.Errorf("%w: pairs: %d trailing bytes", ErrMalformed, len(b))
		}
		kl, vl := int(le.Uint32(b)), int(le.Uint32(b[4:]))
		if kl == 0 || kl > len(b)-8 || vl > len(b)-8-kl {
			return fmt.Errorf("%w: pairs: key %d value %d bytes in %d", ErrMalformed, kl, vl, len(b))
		}
		if err := f(b[8:8+kl], b[8+kl:8+kl+vl]); err != nil {
			return err
		}
		b = b[8+kl+vl:]
	}
	return nil
}

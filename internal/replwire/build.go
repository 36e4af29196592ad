package replwire

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

// Encode is the position's encoding: u64 log, u64 index, u64 segment,
// u64 seq, i64 offset, little-endian.
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

// Applied is a Build-Index backup's point: its answer to CmdCheck and
// CmdApplyFrom's data. Sealed: the segment was flushed sealed up to the
// position (the next one starts at its header). Encoded as the position
// followed by one byte (1: sealed); a backup that holds no known point
// (new, restarted, or reset) answers CmdCheck with no bytes.
type Applied struct {
	Position
	Sealed bool
}

// Encode is the point's encoding.
func (a Applied) Encode() []byte {
	b := a.Position.Encode()
	if a.Sealed {
		return append(b, 1)
	}
	return append(b, 0)
}

// DecodeApplied parses a Build-Index backup's point (ok false: b is
// empty, the backup holds no known point).
func DecodeApplied(b []byte) (a Applied, ok bool, err error) {
	if len(b) == 0 {
		return Applied{}, false, nil
	}
	if len(b) != positionSize+1 || b[positionSize] > 1 {
		return Applied{}, false, fmt.Errorf("%w: applied point of %d bytes", ErrMalformed, len(b))
	}
	p, err := DecodePosition(b[:positionSize])
	if err != nil {
		return Applied{}, false, err
	}
	return Applied{Position: p, Sealed: b[positionSize] == 1}, true, nil
}

// EncodePairs appends a key/value pair to CmdPairs data b: u32 key
// length, u32 value length, key, value.
func EncodePairs(b []byte, key, value []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(value)))
	b = append(b, key...)
	return append(b, value...)
}

// DecodePairs calls f for every pair of CmdPairs data (key and value
// alias b), stopping at f's first error. Malformed data (an empty key, a
// length past the end) is ErrMalformed, after f saw the pairs before it.
func DecodePairs(b []byte, f func(key, value []byte) error) error {
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

package replwire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// ErrBadEncoding: an encoded segment map does not decode.
var ErrBadEncoding = errors.New("replication: malformed segment map")

// EncodeSegMap encodes a segment map (a primary's segment numbers to a
// backup's, what a backup persists so that it still translates after a
// restart): count u32, then primary u64, local u64 pairs sorted by
// primary; little-endian.
func EncodeSegMap(m map[uint64]uint64) []byte {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+16*len(keys)), uint32(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, k)
		b = binary.LittleEndian.AppendUint64(b, m[k])
	}
	return b
}

// DecodeSegMap parses EncodeSegMap's bytes. It refuses segment 0 on
// either side, a primary segment mapped to two local ones and a local
// segment mapped from two primary ones (ErrBadEncoding); a pair listed
// twice counts once.
func DecodeSegMap(b []byte) (map[uint64]uint64, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadEncoding, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(len(b)-4) != uint64(n)*16 {
		return nil, fmt.Errorf("%w: %d pairs in %d bytes", ErrBadEncoding, n, len(b))
	}
	to, from := map[uint64]uint64{}, map[uint64]uint64{}
	for i := range int(n) {
		o := 4 + 16*i
		primary, local := binary.LittleEndian.Uint64(b[o:]), binary.LittleEndian.Uint64(b[o+8:])
		if primary == 0 || local == 0 {
			return nil, fmt.Errorf("%w: segment 0 (%d -> %d)", ErrBadEncoding, primary, local)
		}
		if cur, ok := to[primary]; ok {
			if cur == local {
				continue
			}
			return nil, fmt.Errorf("%w: primary segment %d maps to %d and %d", ErrBadEncoding, primary, cur, local)
		}
		if src, ok := from[local]; ok {
			return nil, fmt.Errorf("%w: local segment %d holds primary segments %d and %d", ErrBadEncoding, local, src, primary)
		}
		to[primary], from[local] = local, primary
	}
	return to, nil
}

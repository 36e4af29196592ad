package engine

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

// PointerMap translates a device pointer of a shipped segment. value is
// true for leaf value pointers (into the log) and false for child nodes.
type PointerMap func(p uint64, value bool) (uint64, error)

// RewriteIndexSegment rewrites, in place, an index segment image built by
// another volume: every child and value pointer goes through m, every node
// is re-sealed for the new segment sequence, and the header names newSeg.
// It returns the log segments the leaves now point into (sorted).
//
// Each node is verified as decodeNode verifies it (checksum, header, entry
// bounds, keys in order; ErrCorrupt otherwise) before it is rewritten, so
// that a bad image is refused here rather than re-sealed as valid. On
// error the image is partly rewritten and must be discarded.
func (v *Volume) RewriteIndexSegment(data []byte, newSeg, newSeq uint64, m PointerMap) ([]uint64, error) {
	h, err := decodeSegHeader(data, newSeg)
	if err != nil {
		return nil, err
	}
	if h.Kind != segKindIndex || (len(data)-segHeaderSize)%v.g.nodeSize != 0 {
		return nil, fmt.Errorf("%w: segment %d: not an index segment image", ErrCorrupt, h.SegNo)
	}
	var refs segSet
	for off := segHeaderSize; off < len(data); off += v.g.nodeSize {
		b := data[off : off+v.g.nodeSize]
		if err := rewriteNode(b, v.g.ptr(h.SegNo, int64(off)), v.g, h.Seq, newSeq, m, &refs); err != nil {
			return nil, err
		}
	}
	h.SegNo, h.Seq = newSeg, newSeq
	h.encode(data)
	return refs.list(), nil
}

// rewriteNode translates the pointers of one encoded node in place and
// re-seals it for newSeq, adding the leaves' log segments to refs.
func rewriteNode(b []byte, p ptr, g geometry, seq, newSeq uint64, m PointerMap, refs *segSet) error {
	nh, err := checkNode(b, p, g, seq)
	if err != nil {
		return err
	}
	es := newEntries(b, p, g, nh)
	for range nh.count {
		at, _, err := es.next()
		if err != nil {
			return err
		}
		slot := b[at+es.ptrAt:]
		np, err := m(binary.LittleEndian.Uint64(slot), nh.leaf)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(slot, np)
		if nh.leaf {
			refs.add(g.seg(np))
		}
	}
	binary.LittleEndian.PutUint32(b[0:], nodeCRC(newSeq, b[4:]))
	return nil
}

// segSet is a set of segment numbers: a bitmap for the numbers a volume
// has (dense from 0), a map beyond maxDenseSeg so that a wild number
// cannot make the bitmap huge.
type segSet struct {
	bits   []uint64
	sparse map[uint64]struct{}
}

const maxDenseSeg = 1 << 22 // a 512 KiB bitmap: 8 TiB of 2 MiB segments

func (s *segSet) add(seg uint64) {
	if seg >= maxDenseSeg {
		if s.sparse == nil {
			s.sparse = map[uint64]struct{}{}
		}
		s.sparse[seg] = struct{}{}
		return
	}
	w := int(seg / 64)
	if w >= len(s.bits) {
		s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
	}
	s.bits[w] |= 1 << (seg % 64)
}

// list returns the set's members in increasing order.
func (s *segSet) list() []uint64 {
	var out []uint64
	for w, x := range s.bits {
		for x != 0 {
			out = append(out, uint64(w)*64+uint64(bits.TrailingZeros64(x)))
			x &= x - 1
		}
	}
	big := make([]uint64, 0, len(s.sparse))
	for seg := range s.sparse {
		big = append(big, seg)
	}
	slices.Sort(big)
	return append(out, big...)
}

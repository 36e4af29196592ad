package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// On-disk format constants. docs/format.md describes the layouts.
const (
	segMagic      = 0x47534254 // "TBSG" little-endian
	formatVersion = 1
	// segHeaderSize is the space reserved at the start of every segment for
	// its header; data (log records or nodes) starts after it.
	segHeaderSize = 4096
	// SegmentHeaderSize is segHeaderSize for other packages: a log
	// segment's first record starts there.
	SegmentHeaderSize = segHeaderSize
	// segHeaderLen is the encoded header's length inside that space.
	segHeaderLen = 64
)

// Segment kinds.
const (
	segKindLog   = 1
	segKindIndex = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ptr is a device pointer: segment number << shift | offset in segment.
// shift is log2(segment size): 21 for the default 2 MiB segments. 0 is nil.
type ptr = uint64

// geometry converts between device pointers, segments and file offsets.
type geometry struct {
	segSize  int64
	shift    uint
	nodeSize int
}

func newGeometry(segSize int64, nodeSize int) geometry {
	shift := uint(0)
	for int64(1)<<shift < segSize {
		shift++
	}
	return geometry{segSize: segSize, shift: shift, nodeSize: nodeSize}
}

func (g geometry) ptr(seg uint64, off int64) ptr   { return seg<<g.shift | uint64(off) }
func (g geometry) seg(p ptr) uint64                { return p >> g.shift }
func (g geometry) off(p ptr) int64                 { return int64(p & (uint64(g.segSize) - 1)) }
func (g geometry) fileOff(seg uint64) int64        { return int64(seg) * g.segSize }
func (g geometry) filePtrOff(p ptr) int64          { return int64(p>>g.shift)*g.segSize + g.off(p) }
func (g geometry) nodesPerSegment() int            { return int((g.segSize - segHeaderSize) / int64(g.nodeSize)) }
func (g geometry) maxRecord() int                  { return int(g.segSize-segHeaderSize) - 1 }
func (g geometry) String() string                  { return fmt.Sprintf("seg=%d node=%d", g.segSize, g.nodeSize) }
func (g geometry) rebase(p ptr, newSeg uint64) ptr { return g.ptr(newSeg, g.off(p)) }

// segHeader starts every segment.
type segHeader struct {
	Kind       uint8
	Level      uint8  // index segments: the level the segment belongs to
	Height     uint8  // index segments: the greatest node height inside
	Region     uint64 // owning region
	PrimarySeg uint64 // the primary's segment this one mirrors (own number if local)
	Seq        uint64 // allocation sequence number, unique per volume
	SegNo      uint64 // this segment's number
}

// encode writes the header into b[:segHeaderLen].
func (h segHeader) encode(b []byte) {
	clear(b[:segHeaderLen])
	binary.LittleEndian.PutUint32(b[0:], segMagic)
	b[4] = formatVersion
	b[5] = h.Kind
	b[6] = h.Level
	b[7] = h.Height
	binary.LittleEndian.PutUint64(b[8:], h.Region)
	binary.LittleEndian.PutUint64(b[16:], h.PrimarySeg)
	binary.LittleEndian.PutUint64(b[24:], h.Seq)
	binary.LittleEndian.PutUint64(b[32:], h.SegNo)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
}

// decodeSegHeader parses and verifies a header; seg names the segment in
// errors.
func decodeSegHeader(b []byte, seg uint64) (segHeader, error) {
	if len(b) < segHeaderLen {
		return segHeader{}, fmt.Errorf("%w: segment %d: short header (%d bytes)", ErrCorrupt, seg, len(b))
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != segMagic {
		return segHeader{}, fmt.Errorf("%w: segment %d: bad magic %#x", ErrCorrupt, seg, m)
	}
	if want, got := binary.LittleEndian.Uint32(b[60:]), crc32.Checksum(b[:60], castagnoli); want != got {
		return segHeader{}, fmt.Errorf("%w: segment %d: header checksum mismatch", ErrCorrupt, seg)
	}
	if b[4] != formatVersion {
		return segHeader{}, fmt.Errorf("%w: segment %d: unknown format version %d", ErrCorrupt, seg, b[4])
	}
	h := segHeader{
		Kind:       b[5],
		Level:      b[6],
		Height:     b[7],
		Region:     binary.LittleEndian.Uint64(b[8:]),
		PrimarySeg: binary.LittleEndian.Uint64(b[16:]),
		Seq:        binary.LittleEndian.Uint64(b[24:]),
		SegNo:      binary.LittleEndian.Uint64(b[32:]),
	}
	if h.Kind != segKindLog && h.Kind != segKindIndex {
		return segHeader{}, fmt.Errorf("%w: segment %d: unknown kind %d", ErrCorrupt, seg, h.Kind)
	}
	return h, nil
}

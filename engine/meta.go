package engine

import (
	"encoding/binary"
	"fmt"
)

// Metadata keys in the volume's pebble store (docs/format.md):
//
//	v/super                     volume superblock (segment size, node size, format)
//	v/seq                       next segment sequence number
//	r/<id>/desc                 region descriptor
//	r/<id>/rp                   L0 recovery point (log position)
//	r/<id>/log/<idx>            value-log segment idx of the region
//	r/<id>/lvl/<n>              level n's descriptor (absent: empty level)
//	r/<id>/role                 "backup" for a Send-Index backup region, "follower" for a
//	                            Build-Index backup's (absent: primary)
//
// <id>, <idx> and <n> are 8-byte big-endian so keys sort numerically.
var (
	keySuper = []byte("v/super")
	keySeq   = []byte("v/seq")
)

func regionPrefix(id uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte("r/"), id)
}

func regionKey(id uint64, suffix string) []byte {
	return append(append(regionPrefix(id), '/'), suffix...)
}

func logKey(id, idx uint64) []byte {
	return binary.BigEndian.AppendUint64(regionKey(id, "log/"), idx)
}

func levelKey(id uint64, n int) []byte {
	return binary.BigEndian.AppendUint64(regionKey(id, "lvl/"), uint64(n))
}

// enc appends fixed-width little-endian fields.
type enc struct{ b []byte }

func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) bytes(v []byte) {
	e.u32(uint32(len(v)))
	e.b = append(e.b, v...)
}

// dec reads what enc wrote; the first short read sets err.
type dec struct {
	b    []byte
	err  error
	what string
}

// end reports an error if bytes are left over.
func (d *dec) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: metadata %s has %d trailing bytes", ErrCorrupt, d.what, len(d.b))
	}
	return d.err
}

func (d *dec) need(n int) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < n {
		d.err = fmt.Errorf("%w: metadata %s truncated", ErrCorrupt, d.what)
		return false
	}
	return true
}

func (d *dec) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *dec) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *dec) bytes() []byte {
	n := int(d.u32())
	if !d.need(n) {
		return nil
	}
	v := append([]byte(nil), d.b[:n]...)
	d.b = d.b[n:]
	return v
}

// logSeg is one value-log segment of a region.
type logSeg struct {
	idx      uint64 // position in the region's log (0, 1, 2, ...)
	seg      uint64 // segment number on the volume
	seq      uint64 // the segment's sequence number
	end      int64  // offset after the last record once sealed; 0 while tail
	garbage  int64  // bytes of dead records (estimate, persisted at compactions)
	primary  uint64 // backup regions: the primary's segment this one holds (0: local)
	recSeq   uint64 // backup regions: the primary segment's sequence, the records' checksum seed
	dropped  bool   // freed from the log's list; in memory only
	endSaved bool   // end is persisted; in memory only
	// savedGarbage is garbage as a compaction (or recovery) last persisted
	// or read it; in memory only. Region.write charges garbage outside
	// compactions, to segments whose end may be persisted already.
	savedGarbage int64
}

// recordSeq is the seed of the segment's record checksums: its own
// sequence, or for a segment adopted from a primary, the primary's.
func (l *logSeg) recordSeq() uint64 {
	if l.recSeq != 0 {
		return l.recSeq
	}
	return l.seq
}

// encode writes the descriptor; the adopted-segment fields only when set,
// so a primary's descriptors keep their original 32-byte form.
func (l logSeg) encode() []byte {
	var e enc
	e.u64(l.seg)
	e.u64(l.seq)
	e.u64(uint64(l.end))
	e.u64(uint64(l.garbage))
	if l.primary != 0 || l.recSeq != 0 {
		e.u64(l.primary)
		e.u64(l.recSeq)
	}
	return e.b
}

func decodeLogSeg(idx uint64, b []byte) (logSeg, error) {
	d := dec{b: b, what: "log segment"}
	l := logSeg{idx: idx, seg: d.u64(), seq: d.u64(), end: int64(d.u64()), garbage: int64(d.u64())}
	if d.err == nil && len(d.b) > 0 {
		l.primary, l.recSeq = d.u64(), d.u64()
	}
	return l, d.end()
}

// segRef names an allocated segment by number and sequence.
type segRef struct{ seg, seq uint64 }

// levelDesc describes one on-device level: a B+tree in its own segments.
type levelDesc struct {
	root    ptr // nil for an empty level
	height  int // height of the root (0: the root is a leaf)
	pairs   int64
	kvBytes int64 // bytes of keys and values the level indexes
	nodes   int64
	segs    []segRef
	logRefs []uint64 // log segments (numbers) that leaves point into

	logRefSet map[uint64]struct{} // logRefs as a set, built once
}

func (l *levelDesc) indexRefs() {
	l.logRefSet = make(map[uint64]struct{}, len(l.logRefs))
	for _, s := range l.logRefs {
		l.logRefSet[s] = struct{}{}
	}
}

func (l *levelDesc) encode() []byte {
	var e enc
	e.u64(l.root)
	e.u32(uint32(l.height))
	e.u64(uint64(l.pairs))
	e.u64(uint64(l.kvBytes))
	e.u64(uint64(l.nodes))
	e.u32(uint32(len(l.segs)))
	for _, s := range l.segs {
		e.u64(s.seg)
		e.u64(s.seq)
	}
	e.u32(uint32(len(l.logRefs)))
	for _, s := range l.logRefs {
		e.u64(s)
	}
	return e.b
}

func decodeLevelDesc(b []byte) (*levelDesc, error) {
	d := dec{b: b, what: "level"}
	l := &levelDesc{root: d.u64(), height: int(d.u32()), pairs: int64(d.u64()), kvBytes: int64(d.u64()), nodes: int64(d.u64())}
	n := int(d.u32())
	if d.err == nil && n > len(d.b)/16 {
		return nil, fmt.Errorf("%w: metadata level segment count %d", ErrCorrupt, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		l.segs = append(l.segs, segRef{seg: d.u64(), seq: d.u64()})
	}
	m := int(d.u32())
	if d.err == nil && m > len(d.b)/8 {
		return nil, fmt.Errorf("%w: metadata level log-ref count %d", ErrCorrupt, m)
	}
	for i := 0; i < m && d.err == nil; i++ {
		l.logRefs = append(l.logRefs, d.u64())
	}
	l.indexRefs()
	return l, d.end()
}

// RegionDesc describes a region: its id and key range [Start, End). A nil
// Start or End is unbounded.
type RegionDesc struct {
	ID    uint64
	Start []byte
	End   []byte
	Epoch uint64
}

func (r RegionDesc) encode() []byte {
	var e enc
	e.u64(r.ID)
	e.u64(r.Epoch)
	e.bytes(r.Start)
	if r.End == nil {
		e.u32(0)
	} else {
		e.u32(1)
		e.bytes(r.End)
	}
	return e.b
}

func decodeRegionDesc(b []byte) (RegionDesc, error) {
	d := dec{b: b, what: "region"}
	r := RegionDesc{ID: d.u64(), Epoch: d.u64(), Start: d.bytes()}
	if len(r.Start) == 0 {
		r.Start = nil
	}
	switch d.u32() {
	case 0:
	case 1:
		r.End = d.bytes()
	default:
		if d.err == nil {
			d.err = fmt.Errorf("%w: metadata region end flag", ErrCorrupt)
		}
	}
	return r, d.end()
}

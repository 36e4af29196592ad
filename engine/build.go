package engine

import (
	"fmt"
	"sort"
)

// builder writes one level's B+tree bottom-up and left to right from keys
// given in ascending order. Nodes of all heights share one stream of
// segments, so every node's children lie in the same or an earlier segment:
// segments come out children-first. onSegment runs for each finished
// segment before the next one starts.
type builder struct {
	v         *Volume
	g         geometry
	region    uint64
	level     int
	onSegment func(BuiltSegment) error

	seg       segRef
	segBuf    []byte
	segOff    int64
	segHeight int
	writers   []*nodeWriter // per height
	emitted   []int64       // nodes emitted per height
	desc      levelDesc
	logRefs   map[uint64]struct{}
	allocated []segRef
	lastKey   []byte
	// direct: the region is a follower, its segments written past the
	// page cache (Volume.writeSpan).
	direct bool
}

func newBuilder(v *Volume, region uint64, level int, direct bool, onSegment func(BuiltSegment) error) *builder {
	return &builder{v: v, g: v.g, region: region, level: level, direct: direct, onSegment: onSegment,
		logRefs: map[uint64]struct{}{}}
}

// add appends the next key; keys must ascend strictly.
func (b *builder) add(key []byte, e entry) error {
	if b.desc.pairs > 0 && string(key) <= string(b.lastKey) {
		return fmt.Errorf("engine: builder: key %q after %q", key, b.lastKey)
	}
	b.lastKey = append(b.lastKey[:0], key...)
	w := b.writer(0)
	if !w.fits(len(key)) {
		if err := b.emit(0, true); err != nil {
			return err
		}
	}
	w.addLeaf(key, e)
	b.desc.pairs++
	b.desc.kvBytes += int64(len(key)) + int64(e.vlen)
	b.logRefs[b.g.seg(e.ptr)] = struct{}{}
	return nil
}

func (b *builder) writer(h int) *nodeWriter {
	for len(b.writers) <= h {
		b.writers = append(b.writers, newNodeWriter(b.g.nodeSize, len(b.writers) == 0, len(b.writers)))
		b.emitted = append(b.emitted, 0)
	}
	return b.writers[h]
}

// emit writes the node being filled at height h into the segment stream and,
// if toParent, adds it to its parent.
func (b *builder) emit(h int, toParent bool) error {
	w := b.writers[h]
	if b.segBuf == nil || b.segOff+int64(b.g.nodeSize) > b.g.segSize {
		if err := b.nextSegment(); err != nil {
			return err
		}
	}
	p := b.g.ptr(b.seg.seg, b.segOff)
	copy(b.segBuf[b.segOff:], w.seal(b.seg.seq))
	b.segOff += int64(b.g.nodeSize)
	b.segHeight = max(b.segHeight, h)
	b.emitted[h]++
	b.desc.nodes++
	first := append([]byte(nil), w.first...)
	w.reset()
	if !toParent {
		b.desc.root, b.desc.height = p, h
		return nil
	}
	parent := b.writer(h + 1)
	if !parent.fits(len(first)) {
		if err := b.emit(h+1, true); err != nil {
			return err
		}
	}
	parent.addChild(first, p)
	return nil
}

// nextSegment finishes the current segment and starts a new one.
func (b *builder) nextSegment() error {
	if err := b.finishSegment(); err != nil {
		return err
	}
	s, err := b.v.allocSegment()
	if err != nil {
		return err
	}
	b.allocated = append(b.allocated, s)
	b.seg, b.segOff, b.segHeight = s, segHeaderSize, 0
	if b.segBuf == nil {
		b.segBuf = alignedBytes(int(b.g.segSize)) // aligned: a follower writes it direct
	}
	clear(b.segBuf)
	return nil
}

func (b *builder) finishSegment() error {
	if b.segBuf == nil || b.segOff == segHeaderSize {
		return nil
	}
	segHeader{Kind: segKindIndex, Level: uint8(b.level), Height: uint8(b.segHeight), Region: b.region,
		PrimarySeg: b.seg.seg, Seq: b.seg.seq, SegNo: b.seg.seg}.encode(b.segBuf)
	data := b.segBuf[:b.segOff]
	if err := b.v.writeSpan(b.segBuf, b.g.fileOff(b.seg.seg), 0, b.segOff, IOCompaction, b.direct, true); err != nil {
		return err
	}
	b.desc.segs = append(b.desc.segs, b.seg)
	if b.onSegment != nil {
		if err := b.onSegment(BuiltSegment{Segment: b.seg.seg, Seq: b.seg.seq, Data: data}); err != nil {
			return err
		}
	}
	b.segOff = segHeaderSize
	return nil
}

// finish writes the remaining nodes and the root and syncs the device. The
// level is not installed: the caller commits it.
func (b *builder) finish() (*levelDesc, error) {
	if b.desc.pairs > 0 {
		for h := 0; ; h++ {
			above := h+1 < len(b.writers)
			if !above && b.emitted[h] == 0 {
				if err := b.emit(h, false); err != nil {
					return nil, err
				}
				break
			}
			if err := b.emit(h, true); err != nil {
				return nil, err
			}
		}
	}
	if err := b.finishSegment(); err != nil {
		return nil, err
	}
	if len(b.desc.segs) > 0 {
		if err := b.v.syncData(); err != nil {
			return nil, err
		}
	}
	for s := range b.logRefs {
		b.desc.logRefs = append(b.desc.logRefs, s)
	}
	sort.Slice(b.desc.logRefs, func(i, j int) bool { return b.desc.logRefs[i] < b.desc.logRefs[j] })
	b.desc.indexRefs()
	return &b.desc, nil
}

// abort releases the segments of an unfinished or uncommitted build.
func (b *builder) abort() {
	for _, s := range b.allocated {
		b.v.alloc.release(s.seg)
	}
	b.allocated = nil
}

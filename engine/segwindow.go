package engine

// segWindow serves one merge input's lower node reads from whole segments,
// each read with one call, for volumes whose compactions bypass the page
// cache: with readahead off, a merge reading node by node would issue one
// device read per node. A level's nodes come children-first in one stream of
// segments, so a leaf's parent lies in the leaf's segment or a later one:
// the window keeps the last two segments it read, the parent's and its
// leaves'.
//
// Only leaves and their parents go through it (the iterator knows a child's
// height from its parent's); higher nodes are few and spread over the level,
// and are read alone. A window belongs to one iterator (one goroutine) and
// is valid while the level it reads is pinned by the merge's version.
type segWindow struct {
	v    *Volume
	used map[uint64]int64 // segment -> bytes the level's builder wrote in it
	bufs [2]windowSeg
	next int
}

type windowSeg struct {
	seg  uint64
	data []byte
}

// newSegWindow prepares a window over level l's segments. Every segment but
// the last is full (the builder starts a segment only when a node no longer
// fits); the last holds the rest of l.nodes.
func newSegWindow(v *Volume, l *levelDesc) *segWindow {
	w := &segWindow{v: v, used: make(map[uint64]int64, len(l.segs))}
	per := int64(v.g.nodesPerSegment())
	for i, s := range l.segs {
		n := per
		if i == len(l.segs)-1 {
			n = l.nodes - per*int64(len(l.segs)-1)
		}
		if n <= 0 || n > per { // not a builder's layout: read the segment whole
			n = per
		}
		w.used[s.seg] = segHeaderSize + n*int64(v.g.nodeSize)
	}
	return w
}

// node reads the node at p through the window. A pointer outside the
// level's segments, or past what its segment holds, is read alone: the
// node's own checks then judge it.
func (w *segWindow) node(p ptr, cat IOCategory) (*node, error) {
	g := w.v.g
	seg, off := g.seg(p), g.off(p)
	used, ok := w.used[seg]
	if !ok || off < segHeaderSize || off+int64(g.nodeSize) > used {
		return w.v.readNode(p, cat)
	}
	if w.v.cache != nil {
		if n, ok := w.v.cache.Get(p); ok && n.segSeq == w.v.alloc.seqOf(seg) {
			return n, nil
		}
	}
	data, err := w.segment(seg, used, cat)
	if err != nil {
		return nil, err
	}
	// A copy: decoded nodes alias their bytes, and the buffer is reused.
	buf := make([]byte, g.nodeSize)
	copy(buf, data[off:])
	seq := w.v.alloc.seqOf(seg)
	n, err := decodeNode(buf, p, g, seq)
	if err != nil {
		return nil, err
	}
	n.segSeq = seq
	return n, nil
}

// segment returns the first used bytes of seg, reading them if the window
// does not hold them.
func (w *segWindow) segment(seg uint64, used int64, cat IOCategory) ([]byte, error) {
	for _, b := range w.bufs {
		if b.data != nil && b.seg == seg {
			return b.data, nil
		}
	}
	b := &w.bufs[w.next]
	w.next = (w.next + 1) % len(w.bufs)
	if cap(b.data) < int(used) {
		b.data = make([]byte, w.v.g.segSize)
	}
	b.seg, b.data = 0, b.data[:used]
	if err := w.v.readAt(b.data, w.v.g.fileOff(seg), cat); err != nil {
		b.data = b.data[:0]
		return nil, err
	}
	b.seg = seg
	return b.data, nil
}

package engine

import (
	"bytes"
	"fmt"
)

// readNode reads and verifies the node at p. Lookups go through the node
// cache; compaction and GC reads use it but do not fill it.
func (v *Volume) readNode(p ptr, cat IOCategory) (*node, error) {
	seg, off := v.g.seg(p), v.g.off(p)
	if seg == 0 || off < segHeaderSize || (off-segHeaderSize)%int64(v.g.nodeSize) != 0 || off+int64(v.g.nodeSize) > v.g.segSize {
		return nil, fmt.Errorf("%w: segment %d offset %d: invalid node pointer", ErrCorrupt, seg, off)
	}
	seq := v.alloc.seqOf(seg)
	if v.cache != nil {
		if n, ok := v.cache.Get(p); ok && n.segSeq == seq {
			return n, nil
		}
	}
	buf := make([]byte, v.g.nodeSize)
	if err := v.readAt(buf, v.g.filePtrOff(p), cat); err != nil {
		return nil, err
	}
	n, err := decodeNode(buf, p, v.g, seq)
	if err != nil {
		return nil, err
	}
	n.segSeq = seq
	if v.cache != nil && cat == IOIndex {
		v.cache.Set(p, n, int64(v.g.nodeSize))
	}
	return n, nil
}

// child reads the i-th child of n and checks its height.
func (v *Volume) child(n *node, i int, cat IOCategory) (*node, error) {
	return v.childVia(n, i, cat, v.readNode)
}

// childVia is child with its read.
func (v *Volume) childVia(n *node, i int, cat IOCategory, read func(ptr, IOCategory) (*node, error)) (*node, error) {
	c, err := read(n.ptrs[i], cat)
	if err != nil {
		return nil, err
	}
	if c.height != n.height-1 {
		return nil, fmt.Errorf("%w: segment %d offset %d: node height %d under a node of height %d",
			ErrCorrupt, v.g.seg(n.ptrs[i]), v.g.off(n.ptrs[i]), c.height, n.height)
	}
	return c, nil
}

// levelGet looks key up in one level.
func (v *Volume) levelGet(l *levelDesc, key []byte, cat IOCategory) (entry, bool, error) {
	if l == nil || l.root == 0 {
		return entry{}, false, nil
	}
	n, err := v.readNode(l.root, cat)
	if err != nil {
		return entry{}, false, err
	}
	for !n.leaf {
		i, _ := n.search(key)
		if n, err = v.child(n, i, cat); err != nil {
			return entry{}, false, err
		}
	}
	i, found := n.search(key)
	if !found {
		return entry{}, false, nil
	}
	return n.entry(i), true, nil
}

// levelIter walks one level in key order.
type levelIter struct {
	v     *Volume
	cat   IOCategory
	end   []byte
	stack []levelFrame
	err   error
	ok    bool
	win   *segWindow // merges on a volume bypassing the page cache
}

type levelFrame struct {
	n *node
	i int
}

// newLevelIter positions at the first key >= start (start nil: the first).
func newLevelIter(v *Volume, l *levelDesc, start, end []byte, cat IOCategory) *levelIter {
	it := &levelIter{v: v, cat: cat, end: end}
	if l == nil || l.root == 0 {
		return it
	}
	read := v.readNode
	if cat == IOCompaction && v.opts.CompactionBypassCache {
		it.win = newSegWindow(v, l)
		if l.height <= 1 {
			read = it.win.node
		}
	}
	n, err := read(l.root, cat)
	if err != nil {
		it.err = err
		return it
	}
	for {
		i := 0
		if start != nil {
			i, _ = n.search(start)
		}
		it.stack = append(it.stack, levelFrame{n: n, i: i})
		if n.leaf {
			break
		}
		if n, err = it.child(n, i); err != nil {
			it.err = err
			return it
		}
	}
	it.ok = true
	top := &it.stack[len(it.stack)-1]
	if top.i >= len(top.n.keys) {
		top.i = len(top.n.keys) - 1
		it.next()
	}
	it.checkEnd()
	return it
}

func (it *levelIter) valid() bool { return it.ok && it.err == nil }

func (it *levelIter) key() []byte {
	f := it.stack[len(it.stack)-1]
	return f.n.keys[f.i]
}

func (it *levelIter) entry() entry {
	f := it.stack[len(it.stack)-1]
	return f.n.entry(f.i)
}

func (it *levelIter) checkEnd() {
	if it.ok && it.end != nil && bytes.Compare(it.key(), it.end) >= 0 {
		it.ok = false
	}
}

func (it *levelIter) next() {
	if !it.ok {
		return
	}
	// Climb to the first ancestor with a right sibling, then descend left.
	d := len(it.stack) - 1
	for d >= 0 && it.stack[d].i+1 >= len(it.stack[d].n.keys) {
		d--
	}
	if d < 0 {
		it.ok = false
		return
	}
	it.stack[d].i++
	for d < len(it.stack)-1 {
		c, err := it.child(it.stack[d].n, it.stack[d].i)
		if err != nil {
			it.err, it.ok = err, false
			return
		}
		d++
		it.stack[d] = levelFrame{n: c, i: 0}
	}
	it.checkEnd()
}

func (it *levelIter) error() error { return it.err }

// child reads n's i-th child, leaves and their parents through the
// iterator's window if it has one.
func (it *levelIter) child(n *node, i int) (*node, error) {
	if it.win != nil && n.height <= 2 {
		return it.v.childVia(n, i, it.cat, it.win.node)
	}
	return it.v.child(n, i, it.cat)
}

package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
)

// Node layout (nodeSize bytes):
//
//	crc u32 | type u8 | height u8 | count u16 | used u16 | reserved [6]
//	entries...
//
// leaf entry:     flags u8 | keyLen u16 | valLen u32 | valuePtr u64 | key
// internal entry: keyLen u16 | childPtr u64 | key   (key = child's first key)
//
// The checksum is crc32c over the segment's sequence number (u64) followed
// by bytes [4, nodeSize): a node left over from an earlier use of the
// segment never verifies.
const (
	nodeHeaderLen    = 16
	nodeLeaf         = 1
	nodeInternal     = 2
	leafEntryFixed   = 15
	internalEntryFix = 10
	flagTombstone    = 1
)

// entry is what an index (L0 or a level) holds for a key.
type entry struct {
	ptr  ptr    // the log record
	vlen uint32 // value length (record size is derivable)
	tomb bool
}

// recSize is the log record size this entry points to.
func (e entry) recSize(keyLen int) int { return recordSize(keyLen, int(e.vlen)) }

// node is a decoded B+tree node. Keys alias the node's buffer.
type node struct {
	leaf    bool
	height  int
	keys    [][]byte
	ptrs    []ptr    // leaf: value pointers; internal: children
	vlens   []uint32 // leaf only
	flags   []uint8  // leaf only
	segSeq  uint64   // sequence of the segment it was read from (cache check)
	encoded []byte
}

// search returns, for a leaf, the index of key and whether it is present;
// for an internal node, the child whose range holds key.
func (n *node) search(key []byte) (int, bool) {
	i := sort.Search(len(n.keys), func(i int) bool { return bytes.Compare(n.keys[i], key) >= 0 })
	if n.leaf {
		return i, i < len(n.keys) && bytes.Equal(n.keys[i], key)
	}
	if i < len(n.keys) && bytes.Equal(n.keys[i], key) {
		return i, true
	}
	if i > 0 {
		i--
	}
	return i, false
}

func (n *node) entry(i int) entry {
	return entry{ptr: n.ptrs[i], vlen: n.vlens[i], tomb: n.flags[i]&flagTombstone != 0}
}

// nodeWriter accumulates entries into one node buffer.
type nodeWriter struct {
	buf    []byte
	leaf   bool
	height int
	count  int
	used   int
	first  []byte // copy of the first key
}

func newNodeWriter(size int, leaf bool, height int) *nodeWriter {
	return &nodeWriter{buf: make([]byte, size), leaf: leaf, height: height, used: nodeHeaderLen}
}

func (w *nodeWriter) reset() {
	clear(w.buf)
	w.count, w.used, w.first = 0, nodeHeaderLen, w.first[:0]
}

func entrySize(leaf bool, keyLen int) int {
	if leaf {
		return leafEntryFixed + keyLen
	}
	return internalEntryFix + keyLen
}

func (w *nodeWriter) fits(keyLen int) bool { return w.used+entrySize(w.leaf, keyLen) <= len(w.buf) }

func (w *nodeWriter) addLeaf(key []byte, e entry) {
	b := w.buf[w.used:]
	if e.tomb {
		b[0] = flagTombstone
	}
	binary.LittleEndian.PutUint16(b[1:], uint16(len(key)))
	binary.LittleEndian.PutUint32(b[3:], e.vlen)
	binary.LittleEndian.PutUint64(b[7:], e.ptr)
	copy(b[leafEntryFixed:], key)
	w.added(key, leafEntryFixed)
}

func (w *nodeWriter) addChild(key []byte, child ptr) {
	b := w.buf[w.used:]
	binary.LittleEndian.PutUint16(b[0:], uint16(len(key)))
	binary.LittleEndian.PutUint64(b[2:], child)
	copy(b[internalEntryFix:], key)
	w.added(key, internalEntryFix)
}

func (w *nodeWriter) added(key []byte, fixed int) {
	if w.count == 0 {
		w.first = append(w.first[:0], key...)
	}
	w.count++
	w.used += fixed + len(key)
}

// nodeCRC is a node's checksum in a segment with sequence segSeq.
func nodeCRC(segSeq uint64, body []byte) uint32 { return recordCRC(segSeq, body) }

// seal writes the header and checksum for a segment with sequence segSeq;
// buf is then the encoded node.
func (w *nodeWriter) seal(segSeq uint64) []byte {
	b := w.buf
	if w.leaf {
		b[4] = nodeLeaf
	} else {
		b[4] = nodeInternal
	}
	b[5] = uint8(w.height)
	binary.LittleEndian.PutUint16(b[6:], uint16(w.count))
	binary.LittleEndian.PutUint16(b[8:], uint16(w.used))
	binary.LittleEndian.PutUint32(b[0:], nodeCRC(segSeq, b[4:]))
	return b
}

// nodeHead is a node's verified header.
type nodeHead struct {
	leaf        bool
	height      int
	count, used int
}

func corruptNode(g geometry, p ptr, why string) error {
	return fmt.Errorf("%w: segment %d offset %d: node %s", ErrCorrupt, g.seg(p), g.off(p), why)
}

// checkNode verifies a node's checksum (for a segment of sequence segSeq)
// and the consistency of its header.
func checkNode(b []byte, p ptr, g geometry, segSeq uint64) (nodeHead, error) {
	if len(b) < nodeHeaderLen {
		return nodeHead{}, corruptNode(g, p, "short")
	}
	if binary.LittleEndian.Uint32(b[0:]) != nodeCRC(segSeq, b[4:]) {
		return nodeHead{}, corruptNode(g, p, "checksum mismatch")
	}
	typ := b[4]
	h := nodeHead{leaf: typ == nodeLeaf, height: int(b[5]),
		count: int(binary.LittleEndian.Uint16(b[6:])), used: int(binary.LittleEndian.Uint16(b[8:]))}
	if (typ != nodeLeaf && typ != nodeInternal) || h.used > len(b) || h.used < nodeHeaderLen || h.count == 0 {
		return nodeHead{}, corruptNode(g, p, "header invalid")
	}
	if h.leaf != (h.height == 0) {
		return nodeHead{}, corruptNode(g, p, "type does not match height")
	}
	return h, nil
}

// entries walks the entries of a node whose header checkNode verified,
// checking each entry's bounds and the keys' order (node.go's layout:
// leaf flags u8 | keyLen u16 | valLen u32 | valuePtr u64 | key; internal
// keyLen u16 | childPtr u64 | key).
type entries struct {
	b                   []byte
	g                   geometry
	p                   ptr
	used                int
	fixed, lenAt, ptrAt int // an entry's fixed part; where its key length and pointer are
	pos                 int
	prev                []byte
}

func newEntries(b []byte, p ptr, g geometry, h nodeHead) entries {
	e := entries{b: b, g: g, p: p, used: h.used, fixed: internalEntryFix, lenAt: 0, ptrAt: 2, pos: nodeHeaderLen}
	if h.leaf {
		e.fixed, e.lenAt, e.ptrAt = leafEntryFixed, 1, 7
	}
	return e
}

// next returns the offset of the next entry and its key.
func (e *entries) next() (at int, key []byte, err error) {
	if e.pos+e.fixed > e.used {
		return 0, nil, corruptNode(e.g, e.p, "entry overruns node")
	}
	kl := int(binary.LittleEndian.Uint16(e.b[e.pos+e.lenAt:]))
	if kl == 0 || e.pos+e.fixed+kl > e.used {
		return 0, nil, corruptNode(e.g, e.p, "key overruns node")
	}
	key = e.b[e.pos+e.fixed : e.pos+e.fixed+kl]
	if e.prev != nil && bytes.Compare(e.prev, key) >= 0 {
		return 0, nil, corruptNode(e.g, e.p, "keys out of order")
	}
	at, e.prev, e.pos = e.pos, key, e.pos+e.fixed+kl
	return at, key, nil
}

// decodeNode verifies and parses an encoded node read from p, in a segment
// with sequence segSeq.
func decodeNode(b []byte, p ptr, g geometry, segSeq uint64) (*node, error) {
	h, err := checkNode(b, p, g, segSeq)
	if err != nil {
		return nil, err
	}
	n := &node{leaf: h.leaf, height: h.height, encoded: b,
		keys: make([][]byte, h.count), ptrs: make([]ptr, h.count)}
	if n.leaf {
		n.vlens = make([]uint32, h.count)
		n.flags = make([]uint8, h.count)
	}
	es := newEntries(b, p, g, h)
	for i := range h.count {
		at, key, err := es.next()
		if err != nil {
			return nil, err
		}
		n.keys[i], n.ptrs[i] = key, binary.LittleEndian.Uint64(b[at+es.ptrAt:])
		if n.leaf {
			n.flags[i] = b[at]
			n.vlens[i] = binary.LittleEndian.Uint32(b[at+3:])
		}
	}
	return n, nil
}

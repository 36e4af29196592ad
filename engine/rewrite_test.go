package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand"
	"slices"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestSeqCRC: the table-driven seed checksum equals crc32 over the
// sequence's 8 little-endian bytes, and a record checksum allocates
// nothing.
func TestSeqCRC(t *testing.T) {
	rng := rand.New(rand.NewSource(testSeed(t)))
	for i := 0; i < 10000; i++ {
		seq := rng.Uint64() >> uint(rng.Intn(64))
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], seq)
		if got, want := seqCRC(seq), crc32.Update(0, castagnoli, b[:]); got != want {
			t.Fatalf("seq %#x: %#x, want %#x", seq, got, want)
		}
	}
	body := make([]byte, 100)
	if n := testing.AllocsPerRun(100, func() { recordCRC(7, body) }); n != 0 {
		t.Fatalf("recordCRC allocates %.0f times", n)
	}
}

// rewriteByDecoding is the reference rewriter: every node decoded in full
// (decodeNode's checks), its pointers patched, re-sealed.
func rewriteByDecoding(v *Volume, data []byte, newSeg, newSeq uint64, m PointerMap) ([]uint64, error) {
	h, err := decodeSegHeader(data, newSeg)
	if err != nil {
		return nil, err
	}
	refs := map[uint64]bool{}
	for off := segHeaderSize; off < len(data); off += v.g.nodeSize {
		b := data[off : off+v.g.nodeSize]
		n, err := decodeNode(b, v.g.ptr(h.SegNo, int64(off)), v.g, h.Seq)
		if err != nil {
			return nil, err
		}
		pos := nodeHeaderLen
		for i := range n.keys {
			slot := pos + 2
			if n.leaf {
				slot = pos + 7
			}
			np, err := m(n.ptrs[i], n.leaf)
			if err != nil {
				return nil, err
			}
			binary.LittleEndian.PutUint64(b[slot:], np)
			if n.leaf {
				refs[v.g.seg(np)] = true
			}
			pos += entrySize(n.leaf, len(n.keys[i]))
		}
		binary.LittleEndian.PutUint32(b[0:], nodeCRC(newSeq, b[4:]))
	}
	h.SegNo, h.Seq = newSeg, newSeq
	h.encode(data)
	out := make([]uint64, 0, len(refs))
	for s := range refs {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// shippedLevel compacts random puts and deletes into L1 and returns the segments the compaction shipped.
func shippedLevel(t *testing.T, seed int64) (*Volume, []BuiltSegment) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 100000
	v := mustOpen(t, o)
	t.Cleanup(func() { v.Close() })
	r := mustRegion(t, v, 1)
	rec := &shipRecorder{}
	r.SetListener(rec)
	for i := 0; i < 12000; i++ {
		k := fmt.Appendf(nil, "k%0*d", 1+rng.Intn(30), rng.Intn(10000))
		var err error
		if rng.Intn(8) == 0 {
			err = r.Delete(k)
		} else {
			err = r.Put(k, bytes.Repeat([]byte{byte(i)}, rng.Intn(200)))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if len(rec.segs) < 3 {
		t.Fatalf("%d segments shipped", len(rec.segs))
	}
	return v, rec.segs
}

// TestRewriteMatchesDecoding: on a real compaction's segments (leaves,
// internal nodes, keys of many lengths), the in-place rewriter
// produces the same bytes and log references as decoding every node, and
// the result decodes in the new segment.
func TestRewriteMatchesDecoding(t *testing.T) {
	v, segs := shippedLevel(t, testSeed(t))
	m := func(p uint64, value bool) (uint64, error) {
		if value {
			return v.g.rebase(p, v.g.seg(p)*7+3), nil
		}
		return v.g.rebase(p, v.g.seg(p)+100), nil
	}
	internal := 0
	for _, s := range segs {
		got, want := bytes.Clone(s.Data), bytes.Clone(s.Data)
		gotRefs, err := v.RewriteIndexSegment(got, 500, 9, m)
		if err != nil {
			t.Fatal(err)
		}
		wantRefs, err := rewriteByDecoding(v, want, 500, 9, m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || !slices.Equal(gotRefs, wantRefs) {
			t.Fatalf("segment %d: rewrites differ (refs %v, want %v)", s.Segment, gotRefs, wantRefs)
		}
		for off := segHeaderSize; off < len(got); off += v.g.nodeSize {
			n, err := decodeNode(got[off:off+v.g.nodeSize], v.g.ptr(500, int64(off)), v.g, 9)
			if err != nil {
				t.Fatalf("rewritten node at %d: %v", off, err)
			}
			if !n.leaf {
				internal++
			}
		}
	}
	if internal == 0 {
		t.Fatal("no internal node rewritten")
	}
}

// TestRewriteRefusesCorruptNodes: a flipped byte; with the checksum
// re-sealed, an entry or a key past the node's used bytes, a zero key
// length, keys out of order, a bad header: ErrCorrupt, never an image
// re-sealed as valid; a failing map's error is returned as it is.
func TestRewriteRefusesCorruptNodes(t *testing.T) {
	v, segs := shippedLevel(t, testSeed(t))
	id := func(p uint64, _ bool) (uint64, error) { return p, nil }
	seal := func(img []byte, off int) {
		binary.LittleEndian.PutUint32(img[off:], nodeCRC(segs[0].Seq, img[off+4:off+v.g.nodeSize]))
	}
	off := segHeaderSize + v.g.nodeSize // the second node
	for name, corrupt := range map[string]func([]byte){
		"flipped byte": func(b []byte) { b[off+100] ^= 1 },
		"count past used": func(b []byte) {
			binary.LittleEndian.PutUint16(b[off+6:], binary.LittleEndian.Uint16(b[off+6:])+1)
			seal(b, off)
		},
		"key past used": func(b []byte) {
			binary.LittleEndian.PutUint16(b[off+8:], binary.LittleEndian.Uint16(b[off+8:])-1)
			seal(b, off)
		},
		"zero key length": func(b []byte) {
			// One entry left, its key length 0: only the zero check sees it.
			kl := int(binary.LittleEndian.Uint16(b[off+nodeHeaderLen+1:])) // a leaf's first key
			binary.LittleEndian.PutUint16(b[off+6:], 1)
			binary.LittleEndian.PutUint16(b[off+8:], uint16(nodeHeaderLen+leafEntryFixed+kl))
			b[off+nodeHeaderLen+1], b[off+nodeHeaderLen+2] = 0, 0
			seal(b, off)
		},
		"keys out of order": func(b []byte) {
			kl := int(binary.LittleEndian.Uint16(b[off+nodeHeaderLen+1:]))
			first := b[off+nodeHeaderLen+leafEntryFixed:]
			copy(first[:kl], bytes.Repeat([]byte{0xff}, kl))
			seal(b, off)
		},
		"bad type": func(b []byte) { b[off+4] = 9; seal(b, off) },
	} {
		img := bytes.Clone(segs[0].Data)
		corrupt(img)
		if _, err := v.RewriteIndexSegment(img, 500, 9, id); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", name, err)
		}
	}
	errMap := errors.New("no mapping")
	if _, err := v.RewriteIndexSegment(bytes.Clone(segs[0].Data), 500, 9, func(uint64, bool) (uint64, error) { return 0, errMap }); !errors.Is(err, errMap) {
		t.Fatalf("failing map: %v", err)
	}
}

// TestSegSet: members come back sorted and once, dense and sparse alike.
func TestSegSet(t *testing.T) {
	var s segSet
	in := []uint64{5, 64, 1, maxDenseSeg + 3, 5, 63, 4000, maxDenseSeg, 1 << 40, 0}
	for _, x := range in {
		s.add(x)
	}
	want := []uint64{0, 1, 5, 63, 64, 4000, maxDenseSeg, maxDenseSeg + 3, 1 << 40}
	if got := s.list(); !slices.Equal(got, want) {
		t.Fatalf("list %v, want %v", got, want)
	}
	if len(s.bits) > 4000/64+1 {
		t.Fatalf("bitmap of %d words for members up to 4000", len(s.bits))
	}
}

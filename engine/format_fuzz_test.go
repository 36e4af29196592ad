package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"reflect"
	"testing"
)

// Fuzz targets for the on-disk decoders (docs/format.md). `go test` runs
// their seed corpora (valid encodings built here, plus testdata/fuzz);
// `make fuzz` or
//
//	go test ./engine -run '^$' -fuzz FuzzDecodeNode -fuzztime 30s
//
// explores (add -fuzzminimizetime 2s to spend the time exploring rather
// than minimizing new inputs, which is slow here).
//
// Decoders read bytes from the device, so on any input they must not panic
// and must report failure as ErrCorrupt (or ok == false). Because nodes,
// records and headers are checksummed, random inputs almost never get past
// the checksum; each target therefore also decodes a copy of the input with
// the checksum recomputed, which lets the fuzzer reach the structural
// checks behind it.

// fuzzGeo is the geometry decodeNode is given (it only names the node's
// segment and offset in errors).
var fuzzGeo = newGeometry(DefaultSegmentSize, DefaultNodeSize)

// fuzzNodePtr is where fuzzed nodes claim to come from.
var fuzzNodePtr = fuzzGeo.ptr(9, segHeaderSize)

// fzBuildLeaf and fzBuildInternal encode nodes of the given size with nodeWriter.
func fzBuildLeaf(size int, keys []string, tombEvery int) []byte {
	w := newNodeWriter(size, true, 0)
	for i, k := range keys {
		if !w.fits(len(k)) {
			break
		}
		e := entry{ptr: fuzzGeo.ptr(uint64(3+i%4), int64(segHeaderSize+37*i)), vlen: uint32(100 * i)}
		if tombEvery > 0 && i%tombEvery == 0 {
			e.tomb, e.vlen = true, 0
		}
		w.addLeaf([]byte(k), e)
	}
	return append([]byte(nil), w.seal(0)...)
}

func fzBuildInternal(size, height int, keys []string) []byte {
	w := newNodeWriter(size, false, height)
	for i, k := range keys {
		if !w.fits(len(k)) {
			break
		}
		w.addChild([]byte(k), fuzzGeo.ptr(uint64(10+i/8), int64(segHeaderSize+i%8*DefaultNodeSize)))
	}
	return append([]byte(nil), w.seal(0)...)
}

func fzKeys(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + string(rune('a'+i%26)) + string(bytes.Repeat([]byte{'0' + byte(i/26%10)}, 1+i%3))
	}
	// Make them strictly ascending whatever the pattern above produced.
	for i := 1; i < n; i++ {
		if out[i] <= out[i-1] {
			out[i] = out[i-1] + "~"
		}
	}
	return out
}

// fzFixNodeCRC returns a copy of b with its checksum recomputed.
func fzFixNodeCRC(b []byte) []byte {
	c := append([]byte(nil), b...)
	if len(c) >= nodeHeaderLen {
		binary.LittleEndian.PutUint32(c, nodeCRC(0, c[4:]))
	}
	return c
}

// fzCheckNode verifies the invariants of a decoded node against its bytes
// and returns the node re-encoded through nodeWriter into len(b) bytes.
func fzCheckNode(t *testing.T, b []byte, n *node) []byte {
	t.Helper()
	count := len(n.keys)
	if count == 0 || len(n.ptrs) != count || count != int(binary.LittleEndian.Uint16(b[6:])) {
		t.Fatalf("decoded %d keys and %d pointers; header count %d", count, len(n.ptrs), binary.LittleEndian.Uint16(b[6:]))
	}
	if n.leaf != (n.height == 0) || n.leaf != (b[4] == nodeLeaf) || n.height != int(b[5]) {
		t.Fatalf("leaf=%v height=%d from type %d height byte %d", n.leaf, n.height, b[4], b[5])
	}
	if n.leaf && (len(n.vlens) != count || len(n.flags) != count) {
		t.Fatalf("leaf with %d vlens, %d flags for %d keys", len(n.vlens), len(n.flags), count)
	}
	used := int(binary.LittleEndian.Uint16(b[8:]))
	end := nodeHeaderLen
	for i, k := range n.keys {
		if len(k) == 0 {
			t.Fatalf("key %d is empty", i)
		}
		if i > 0 && bytes.Compare(n.keys[i-1], k) >= 0 {
			t.Fatalf("keys %d and %d not ascending: %q, %q", i-1, i, n.keys[i-1], k)
		}
		end += entrySize(n.leaf, len(k))
	}
	if end > used || used > len(b) {
		t.Fatalf("entries end at %d, used %d, node %d bytes", end, used, len(b))
	}
	w := newNodeWriter(len(b), n.leaf, n.height)
	for i, k := range n.keys {
		if !w.fits(len(k)) {
			t.Fatalf("re-encoding: entry %d does not fit", i)
		}
		if n.leaf {
			w.addLeaf(k, n.entry(i))
		} else {
			w.addChild(k, n.ptrs[i])
		}
	}
	return w.seal(0)
}

// fzNodeCanonical reports whether b is what nodeWriter produces for the node
// it decodes to: reserved header bytes zero, no flag bits but tombstone,
// entries ending exactly at used, and zeros after used. decodeNode checks
// none of these (the checksum covers them).
func fzNodeCanonical(b []byte, n *node) bool {
	if !formatAllZero(b[10:nodeHeaderLen]) {
		return false
	}
	end := nodeHeaderLen
	for i, k := range n.keys {
		end += entrySize(n.leaf, len(k))
		if n.leaf && n.flags[i]&^flagTombstone != 0 {
			return false
		}
	}
	return end == int(binary.LittleEndian.Uint16(b[8:])) && formatAllZero(b[end:])
}

func fzSameNode(a, b *node) bool {
	if a.leaf != b.leaf || a.height != b.height || len(a.keys) != len(b.keys) {
		return false
	}
	for i := range a.keys {
		if !bytes.Equal(a.keys[i], b.keys[i]) || a.ptrs[i] != b.ptrs[i] {
			return false
		}
		if a.leaf && a.entry(i) != b.entry(i) {
			return false
		}
	}
	return true
}

// fzWantCorrupt fails unless err is a corruption error.
func fzWantCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: decoded without error", what)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: error %v does not wrap ErrCorrupt", what, err)
	}
}

// FuzzDecodeNode decodes b padded with zeros to size bytes (at most 8 KiB):
// nodes are mostly zero padding, and short inputs keep the fuzzer (in
// particular its minimization of interesting inputs) fast while nodes keep
// their real size. size 0 decodes b as is.
func FuzzDecodeNode(f *testing.F) {
	addNode := func(node []byte) {
		used := int(binary.LittleEndian.Uint16(node[8:]))
		f.Add(node[:used], uint16(len(node)))
	}
	addNode(fzBuildLeaf(DefaultNodeSize, []string{"apple", "banana", "cherry"}, 2))
	addNode(fzBuildInternal(DefaultNodeSize, 1, []string{"apple", "kiwi"}))
	addNode(fzBuildLeaf(8192, fzKeys(8, "user"), 3))
	addNode(fzBuildInternal(DefaultNodeSize, 3, fzKeys(12, "k")))
	f.Add(fzBuildLeaf(128, fzKeys(8, ""), 3), uint16(0)) // full
	f.Add(fzBuildLeaf(64, []string{"k"}, 1), uint16(0))
	f.Add(fzBuildInternal(96, 2, []string{"a", "bb", "ccc"}), uint16(0))
	f.Add(fzBuildLeaf(160, []string{string(bytes.Repeat([]byte{0xff}, 120))}, 0), uint16(0))
	f.Add(make([]byte, nodeHeaderLen), uint16(DefaultNodeSize))
	f.Add([]byte{}, uint16(0))
	f.Fuzz(func(t *testing.T, b []byte, size uint16) {
		// Sizes above two default nodes add cost, not coverage.
		if n := min(int(size), 2*DefaultNodeSize); len(b) < n {
			b = append(b, make([]byte, n-len(b))...)
		}
		n, err := decodeNode(b, fuzzNodePtr, fuzzGeo, 0)
		if err != nil {
			fzWantCorrupt(t, "node", err)
		} else {
			// A node that passes its checksum as read re-encodes exactly.
			if enc := fzCheckNode(t, b, n); !bytes.Equal(enc, b) {
				t.Fatalf("node does not re-encode to its bytes:\n got %x\nwant %x", enc, b)
			}
			// Single-bit flips are detected: every bit of the header and
			// entries, and of a sample of the padding.
			c := append([]byte(nil), b...)
			used := int(binary.LittleEndian.Uint16(b[8:]))
			for _, i := range fzFlipSample(len(c), used+16) {
				for bit := range 8 {
					c[i] ^= 1 << bit
					_, err := decodeNode(c, fuzzNodePtr, fuzzGeo, 0)
					fzWantCorrupt(t, "node with a flipped bit", err)
					c[i] ^= 1 << bit
				}
			}
		}
		// With the checksum made valid, the structural checks alone.
		fixed := fzFixNodeCRC(b)
		n, err = decodeNode(fixed, fuzzNodePtr, fuzzGeo, 0)
		if err != nil {
			fzWantCorrupt(t, "node with valid checksum", err)
			return
		}
		enc := fzCheckNode(t, fixed, n)
		if fzNodeCanonical(fixed, n) && !bytes.Equal(enc, fixed) {
			t.Fatalf("canonical node does not re-encode to its bytes:\n got %x\nwant %x", enc, fixed)
		}
		m, err := decodeNode(enc, fuzzNodePtr, fuzzGeo, 0)
		if err != nil {
			t.Fatalf("re-encoded node does not decode: %v", err)
		}
		if !fzSameNode(n, m) {
			t.Fatal("re-encoded node decodes to another node")
		}
	})
}

// fzFlipSample returns the byte positions of an n-byte encoding whose bits
// the bit-flip checks flip: all of the first dense bytes, then a sample
// (every 61st byte and the last), which bounds the work per input.
func fzFlipSample(n, dense int) []int {
	var out []int
	for i := 0; i < n; i++ {
		if i < dense || i%61 == 0 || i == n-1 {
			out = append(out, i)
		}
	}
	return out
}

// fzFixRecordCRC returns a copy of b whose record (per its length fields, if
// they fit in b) has a valid checksum for seq.
func fzFixRecordCRC(b []byte, seq uint64) []byte {
	c := append([]byte(nil), b...)
	if len(c) < recHeaderLen {
		return c
	}
	n := uint64(recHeaderLen) + uint64(binary.LittleEndian.Uint16(c[5:])) + uint64(binary.LittleEndian.Uint32(c[7:]))
	if n <= uint64(len(c)) {
		binary.LittleEndian.PutUint32(c, recordCRC(seq, c[4:n]))
	}
	return c
}

// fzCheckRecord verifies a decoded record against its bytes and other
// sequence seeds and, if flips, that every single-bit flip is detected.
func fzCheckRecord(t *testing.T, b []byte, seq uint64, r record, flips bool) {
	t.Helper()
	switch {
	case r.Kind != recPut && r.Kind != recDelete && r.Kind != recTable:
		t.Fatalf("decoded kind %d", r.Kind)
	case r.Kind == recTable && (len(r.Key) != 0 || r.ID != RequestID{}):
		t.Fatalf("decoded checkpoint with key of %d bytes, id %+v", len(r.Key), r.ID)
	case r.Kind != recTable && (len(r.Key) == 0 || len(r.Key) > MaxKeySize):
		t.Fatalf("decoded key of %d bytes", len(r.Key))
	case r.ID.Client != 0 && (r.ID.Seq == 0 || r.ID.Ack > r.ID.Seq):
		t.Fatalf("decoded request id %+v", r.ID)
	}
	if r.Size != recordSize(len(r.Key), payloadLen(r.ID, r.Value)) || int(r.Payload) != payloadLen(r.ID, r.Value) || r.Size > len(b) {
		t.Fatalf("size %d for key %d value %d id %+v in %d bytes", r.Size, len(r.Key), len(r.Value), r.ID, len(b))
	}
	enc := make([]byte, r.Size)
	encodeRecord(enc, seq, r.Kind, r.ID, r.Key, r.Value)
	if !bytes.Equal(enc, b[:r.Size]) {
		t.Fatalf("record does not re-encode to its bytes:\n got %x\nwant %x", enc, b[:r.Size])
	}
	// A record from another allocation of the segment does not verify.
	// CRC-32C detects every error burst of up to 32 bits, so these seeds
	// (which differ from seq in such a burst) are always rejected; other
	// seeds are rejected with probability 1-2^-32.
	others := []uint64{seq ^ 1, seq ^ 1<<63, seq ^ 1<<31, seq ^ 0xffffffff}
	if (seq^(seq+1))>>32 == 0 {
		others = append(others, seq+1)
	}
	for _, other := range others {
		if _, ok := decodeRecord(b, other); ok {
			t.Fatalf("record written with sequence %d decodes with sequence %d", seq, other)
		}
	}
	// Single-bit flips inside the record are detected. A flip in a length
	// field changes the checksummed range, so detection there is
	// probabilistic (1-2^-32): only valid inputs as given (the seeds, in
	// practice) are checked, which keeps long fuzz runs free of chance
	// collisions.
	if flips {
		c := append([]byte(nil), b...)
		for _, i := range fzFlipSample(r.Size, 256) {
			for bit := range 8 {
				c[i] ^= 1 << bit
				if _, ok := decodeRecord(c, seq); ok {
					t.Fatalf("record with bit %d of byte %d flipped still decodes", bit, i)
				}
				c[i] ^= 1 << bit
			}
		}
	}
}

func FuzzDecodeRecord(f *testing.F) {
	addID := func(seq uint64, kind uint8, id RequestID, key, value []byte, trailer []byte) {
		b := make([]byte, recordSize(len(key), payloadLen(id, value)))
		encodeRecord(b, seq, kind, id, key, value)
		f.Add(append(b, trailer...), seq)
	}
	add := func(seq uint64, kind uint8, key, value []byte, trailer []byte) {
		addID(seq, kind, RequestID{}, key, value, trailer)
	}
	addID(42, recPut, RequestID{Client: 9, Seq: 3, Ack: 2}, []byte("user42"), []byte("hello"), nil)
	addID(42, recDelete, RequestID{Client: 9, Seq: 3, Ack: 3}, []byte("user42"), nil, []byte{0})
	addID(5, recTable, RequestID{}, nil, goldenTable().encodeChunks(maxCheckpointChunk)[0], nil)
	addID(5, recTable, RequestID{}, nil, newReqTable().encodeChunks(maxCheckpointChunk)[0], []byte{1, 2})
	// A put with an identity whose ack is above its seq (malformed).
	addID(3, recPut, RequestID{Client: 1, Seq: 1, Ack: 2}, []byte("k"), nil, nil)
	add(42, recPut, []byte("user42"), []byte("hello"), nil)
	add(42, recDelete, []byte("user42"), nil, nil)
	add(1, recPut, []byte("k"), nil, []byte{0, 0, 0, 0})
	add(7, recPut, []byte("key"), bytes.Repeat([]byte{0xa5}, 60), make([]byte, 20))
	add(1<<40+3, recPut, []byte("\x00\xff"), []byte("v"), nil)
	add(^uint64(0), recDelete, []byte{0}, nil, nil)
	f.Add([]byte{}, uint64(0))
	f.Add(make([]byte, 64), uint64(1))
	f.Fuzz(func(t *testing.T, b []byte, seq uint64) {
		if r, ok := decodeRecord(b, seq); ok {
			fzCheckRecord(t, b, seq, r, true)
		}
		// With the checksum made valid, decodeRecord accepts exactly the
		// well-formed records.
		fixed := fzFixRecordCRC(b, seq)
		r, ok := decodeRecord(fixed, seq)
		wellFormed := fzRecordWellFormed(fixed)
		if ok != wellFormed {
			t.Fatalf("decodeRecord ok=%v for a record that is well-formed=%v: %x", ok, wellFormed, fixed[:min(len(fixed), 32)])
		}
		if ok {
			fzCheckRecord(t, fixed, seq, r, false)
		}
	})
}

// fzRecordWellFormed is the record grammar of docs/format.md, written
// independently of decodeRecord: kinds 1-5, a key of 1..MaxKeySize bytes
// (none for kind 5), a payload of at least a request id for kinds 3 and 4
// (exactly one for 4) whose client is non-zero, seq non-zero and ack at
// most seq, and the whole record inside b.
func fzRecordWellFormed(b []byte) bool {
	if len(b) < recHeaderLen || b[4] < 1 || b[4] > 5 {
		return false
	}
	kind := b[4]
	kl := int(binary.LittleEndian.Uint16(b[5:]))
	pl := uint64(binary.LittleEndian.Uint32(b[7:]))
	n := uint64(recHeaderLen) + uint64(kl) + pl
	if n > uint64(len(b)) {
		return false
	}
	if kind == 5 {
		return kl == 0
	}
	if kl < 1 || kl > MaxKeySize {
		return false
	}
	if kind == 3 || kind == 4 {
		if pl < 24 || (kind == 4 && pl != 24) {
			return false
		}
		p := b[recHeaderLen+kl:]
		c, sq, ack := binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:]), binary.LittleEndian.Uint64(p[16:])
		return c != 0 && sq != 0 && ack <= sq
	}
	return true
}

// TestFormatFuzzRecordLimits checks the key length bounds of decodeRecord
// with records too long to be fuzz seeds (large seeds make the fuzzer's
// minimization slow).
func TestFormatFuzzRecordLimits(t *testing.T) {
	for _, tc := range []struct {
		keyLen, valLen int
		ok             bool
	}{{MaxKeySize, 0, true}, {MaxKeySize, 3000, true}, {MaxKeySize + 1, 0, false}, {1<<16 - 1, 1, false}} {
		key := bytes.Repeat([]byte("K"), tc.keyLen)
		b := make([]byte, recordSize(tc.keyLen, tc.valLen))
		encodeRecord(b, 99, recPut, RequestID{}, key, make([]byte, tc.valLen))
		r, ok := decodeRecord(b, 99)
		if ok != tc.ok {
			t.Fatalf("key %d bytes, value %d bytes: ok=%v, want %v", tc.keyLen, tc.valLen, ok, tc.ok)
		}
		if ok {
			fzCheckRecord(t, b, 99, r, true)
		}
		if _, ok := decodeRecord(b[:len(b)-1], 99); ok {
			t.Fatalf("key %d bytes, value %d bytes: truncated record decodes", tc.keyLen, tc.valLen)
		}
	}
}

// fzFixHeaderCRC returns a copy of b with the header checksum recomputed.
func fzFixHeaderCRC(b []byte) []byte {
	c := append([]byte(nil), b...)
	if len(c) >= segHeaderLen {
		binary.LittleEndian.PutUint32(c[60:], crc32.Checksum(c[:60], castagnoli))
	}
	return c
}

func FuzzDecodeSegHeader(f *testing.F) {
	for _, h := range []segHeader{
		{Kind: segKindLog, Region: 7, PrimarySeg: 3, Seq: 42, SegNo: 3},
		{Kind: segKindIndex, Level: 2, Height: 1, Region: 7, PrimarySeg: 9, Seq: 43, SegNo: 9},
		{Kind: segKindIndex, Level: 255, Height: 255, Region: ^uint64(0), PrimarySeg: 1 << 40, Seq: 1, SegNo: 12},
	} {
		b := make([]byte, segHeaderLen)
		h.encode(b)
		f.Add(b)
		f.Add(append(b, 0xee, 0, 0, 0))
	}
	f.Add([]byte("TBSG"))
	f.Add(make([]byte, segHeaderLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeSegHeader(b, 9)
		if err != nil {
			fzWantCorrupt(t, "header", err)
		} else {
			enc := make([]byte, segHeaderLen)
			h.encode(enc)
			if !bytes.Equal(enc, b[:segHeaderLen]) {
				t.Fatalf("header does not re-encode to its bytes:\n got %x\nwant %x", enc, b[:segHeaderLen])
			}
			c := append([]byte(nil), b...)
			for i := range segHeaderLen * 8 {
				c[i/8] ^= 1 << (i % 8)
				_, err := decodeSegHeader(c, 9)
				fzWantCorrupt(t, "header with a flipped bit", err)
				c[i/8] ^= 1 << (i % 8)
			}
		}
		fixed := fzFixHeaderCRC(b)
		h, err = decodeSegHeader(fixed, 9)
		valid := len(fixed) >= segHeaderLen && binary.LittleEndian.Uint32(fixed) == segMagic &&
			fixed[4] == formatVersion && (fixed[5] == segKindLog || fixed[5] == segKindIndex)
		if (err == nil) != valid {
			t.Fatalf("decodeSegHeader err=%v for a header that is valid=%v", err, valid)
		}
		if err != nil {
			fzWantCorrupt(t, "header with valid checksum", err)
			return
		}
		enc := make([]byte, segHeaderLen)
		h.encode(enc)
		// decodeSegHeader does not check that reserved bytes [40:60) are zero.
		if formatAllZero(fixed[40:60]) && !bytes.Equal(enc, fixed[:segHeaderLen]) {
			t.Fatalf("canonical header does not re-encode to its bytes:\n got %x\nwant %x", enc, fixed[:segHeaderLen])
		}
		if h2, err := decodeSegHeader(enc, 9); err != nil || h2 != h {
			t.Fatalf("re-encoded header decodes to %+v, %v; want %+v", h2, err, h)
		}
	})
}

// FuzzDecodeLevelDesc fuzzes the metadata value decoders: the level
// descriptor, and on the same bytes the log-segment and region descriptors.
// Metadata values have no checksum of their own (the metadata store checks
// its blocks), so there is no bit-flip property; the decoders must not
// panic, must report ErrCorrupt, and must round-trip.
func FuzzDecodeLevelDesc(f *testing.F) {
	for _, l := range []levelDesc{
		{},
		{root: fuzzGeo.ptr(10, segHeaderSize), height: 1, pairs: 3, kvBytes: 322, nodes: 3,
			segs: []segRef{{seg: 9, seq: 43}, {seg: 10, seq: 44}}, logRefs: []uint64{3, 5}},
		{root: fuzzGeo.ptr(2, segHeaderSize), pairs: 1, kvBytes: 2, nodes: 1, segs: []segRef{{seg: 2, seq: 2}}, logRefs: []uint64{1}},
		{root: fuzzGeo.ptr(20, segHeaderSize+8*DefaultNodeSize), height: 2, pairs: 5000, kvBytes: 1 << 20, nodes: 1100,
			segs: []segRef{{16, 30}, {17, 31}, {18, 33}}, logRefs: []uint64{1, 4, 6, 7}},
	} {
		f.Add(l.encode())
	}
	f.Add(logSeg{seg: 3, seq: 42, end: 1 << 20, garbage: 2048}.encode())
	f.Add(RegionDesc{ID: 7, Start: []byte("a"), End: []byte("m"), Epoch: 2}.encode())
	f.Add(RegionDesc{ID: 8}.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := decodeLevelDesc(b)
		if err != nil {
			fzWantCorrupt(t, "level descriptor", err)
		} else {
			// decodeLevelDesc ignores bytes after the descriptor, so the
			// re-encoding is a prefix of the input.
			enc := l.encode()
			if !bytes.HasPrefix(b, enc) {
				t.Fatalf("level descriptor does not re-encode to its bytes:\n got %x\nwant %x", enc, b)
			}
			l2, err := decodeLevelDesc(enc)
			if err != nil || !reflect.DeepEqual(l, l2) {
				t.Fatalf("re-encoded level decodes to %+v, %v; want %+v", l2, err, l)
			}
			if len(l.logRefSet) > len(l.logRefs) {
				t.Fatalf("%d log refs indexed as %d", len(l.logRefs), len(l.logRefSet))
			}
		}
		if ls, err := decodeLogSeg(5, b); err != nil {
			fzWantCorrupt(t, "log segment", err)
		} else if enc := ls.encode(); !bytes.HasPrefix(b, enc) {
			t.Fatalf("log segment does not re-encode to its bytes:\n got %x\nwant %x", enc, b)
		}
		if r, err := decodeRegionDesc(b); err != nil {
			fzWantCorrupt(t, "region descriptor", err)
		} else if r2, err := decodeRegionDesc(r.encode()); err != nil || !reflect.DeepEqual(r, r2) {
			// Not a byte prefix: an empty start, and an end flag other
			// than 1, decode to nil and re-encode differently.
			t.Fatalf("re-encoded region decodes to %+v, %v; want %+v", r2, err, r)
		}
	})
}

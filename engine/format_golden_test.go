package engine

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Golden tests pin the exact bytes of every on-disk encoding (docs/format.md)
// to annotated hex dumps in testdata/golden. A change to an encoder that is
// not also a deliberate format change (with a formatVersion bump) fails here.
// After a deliberate change, regenerate the dumps with
//
//	go test ./engine -run Golden -update-golden
//
// and review the diff. Each dump line holds hex bytes and a '#' comment
// naming the field; "zero N" stands for N zero bytes. Only the bytes are
// compared, so comments may be edited by hand.
var updateGolden = flag.Bool("update-golden", false, "rewrite engine/testdata/golden/*.hex from the current encoders")

// goldenGeo is the default geometry: 2 MiB segments (shift 21), 4 KiB nodes.
var goldenGeo = newGeometry(DefaultSegmentSize, DefaultNodeSize)

// annot writes an annotated hex dump of b, field by field.
type annot struct {
	b   []byte
	off int
	out strings.Builder
	err error
}

func (a *annot) comment(s string) { fmt.Fprintf(&a.out, "# %s\n", s) }

// field consumes n bytes as one field; describe names it from its bytes.
func (a *annot) field(n int, describe func(v []byte) string) []byte {
	if a.err != nil {
		return nil
	}
	if a.off+n > len(a.b) {
		a.err = fmt.Errorf("field [%d:%d) overruns %d bytes", a.off, a.off+n, len(a.b))
		return nil
	}
	v := a.b[a.off : a.off+n]
	rng := fmt.Sprintf("[%d:%d)", a.off, a.off+n)
	if n == 1 {
		rng = fmt.Sprintf("[%d]", a.off)
	}
	desc := describe(v)
	for i := 0; i == 0 || i < n; i += 16 {
		chunk := v[i:min(i+16, n)]
		h := make([]string, len(chunk))
		for j, c := range chunk {
			h[j] = fmt.Sprintf("%02x", c)
		}
		line := strings.Join(h, " ")
		if i == 0 {
			fmt.Fprintf(&a.out, "%-48s # %-11s %s\n", line, rng, desc)
		} else {
			fmt.Fprintf(&a.out, "%s\n", line)
		}
	}
	a.off += n
	return v
}

func (a *annot) u8(name string) uint8 {
	v := a.field(1, func(v []byte) string { return fmt.Sprintf("%s u8 = %d", name, v[0]) })
	if v == nil {
		return 0
	}
	return v[0]
}

func (a *annot) u16(name string) uint16 {
	v := a.field(2, func(v []byte) string { return fmt.Sprintf("%s u16 = %d", name, binary.LittleEndian.Uint16(v)) })
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(v)
}

func (a *annot) u32(name string) uint32 {
	v := a.field(4, func(v []byte) string { return fmt.Sprintf("%s u32 = %d", name, binary.LittleEndian.Uint32(v)) })
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(v)
}

func (a *annot) hex32(name string) {
	a.field(4, func(v []byte) string { return fmt.Sprintf("%s u32 = %#08x", name, binary.LittleEndian.Uint32(v)) })
}

func (a *annot) u64(name string) {
	a.field(8, func(v []byte) string { return fmt.Sprintf("%s u64 = %d", name, binary.LittleEndian.Uint64(v)) })
}

func (a *annot) be64(name string) {
	a.field(8, func(v []byte) string { return fmt.Sprintf("%s u64 big-endian = %d", name, binary.BigEndian.Uint64(v)) })
}

// ptr is a device pointer: segment << shift | offset.
func (a *annot) ptr(name string) {
	a.field(8, func(v []byte) string {
		p := binary.LittleEndian.Uint64(v)
		return fmt.Sprintf("%s u64 = %#x (segment %d, offset %d)", name, p, goldenGeo.seg(p), goldenGeo.off(p))
	})
}

func (a *annot) raw(name string, n int) {
	a.field(n, func(v []byte) string {
		if name == "" {
			return strconv.Quote(string(v))
		}
		return name + " " + strconv.Quote(string(v))
	})
}

// zeros consumes n bytes that must be zero, written as one "zero n" line.
func (a *annot) zeros(name string, n int) {
	if a.err != nil || n == 0 {
		return
	}
	if a.off+n > len(a.b) || !formatAllZero(a.b[a.off:a.off+n]) {
		a.err = fmt.Errorf("field %q [%d:%d) is not all zero", name, a.off, a.off+n)
		return
	}
	fmt.Fprintf(&a.out, "%-48s # %-11s %s\n", fmt.Sprintf("zero %d", n), fmt.Sprintf("[%d:%d)", a.off, a.off+n), name)
	a.off += n
}

func (a *annot) text() (string, error) {
	if a.err == nil && a.off != len(a.b) {
		a.err = fmt.Errorf("annotation covers %d of %d bytes", a.off, len(a.b))
	}
	return a.out.String(), a.err
}

func formatAllZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// parseGolden extracts the bytes of an annotated dump.
func parseGolden(text string) ([]byte, error) {
	var out []byte
	for ln, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "zero" {
			n, err := strconv.Atoi(strings.Join(f[1:], ""))
			if len(f) != 2 || err != nil || n < 0 {
				return nil, fmt.Errorf("line %d: bad zero run %q", ln+1, line)
			}
			out = append(out, make([]byte, n)...)
			continue
		}
		for _, h := range f {
			b, err := hex.DecodeString(h)
			if err != nil || len(b) != 1 {
				return nil, fmt.Errorf("line %d: bad hex byte %q", ln+1, h)
			}
			out = append(out, b[0])
		}
	}
	return out, nil
}

// checkGolden compares enc with testdata/golden/<name>.hex (rewriting it
// under -update-golden) and returns the golden bytes for decode checks.
func checkGolden(t *testing.T, name string, enc []byte, annotate func(*annot)) []byte {
	t.Helper()
	a := &annot{b: enc}
	annotate(a)
	text, err := a.text()
	if err != nil {
		t.Fatalf("%s: annotation does not match the encoding: %v", name, err)
	}
	path := filepath.Join("testdata", "golden", name+".hex")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return enc
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-golden to create it)", err)
	}
	want, err := parseGolden(string(data))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !bytes.Equal(enc, want) {
		i := 0
		for i < len(enc) && i < len(want) && enc[i] == want[i] {
			i++
		}
		t.Fatalf("%s: encoding changed (first difference at byte %d; %d bytes now, %d in the file).\n"+
			"This is an on-disk format change: bump formatVersion or fix the encoder; if deliberate, rerun with -update-golden.\n"+
			"Current encoding:\n%s", path, i, len(enc), len(want), text)
	}
	return want
}

// Golden inputs. Values are distinct so that fields are easy to spot.
var (
	goldenLogHeader = segHeader{Kind: segKindLog, Region: 7, PrimarySeg: 3, Seq: 42, SegNo: 3}
	goldenIdxHeader = segHeader{Kind: segKindIndex, Level: 2, Height: 1, Region: 7, PrimarySeg: 9, Seq: 43, SegNo: 9}
	goldenRecSeq    = uint64(42) // the log segment's sequence number
)

func annotSegHeader(a *annot) {
	a.raw("magic", 4)
	a.u8("format version")
	a.u8("kind (1 log, 2 index)")
	a.u8("level")
	a.u8("height")
	a.u64("region")
	a.u64("primary segment")
	a.u64("sequence")
	a.u64("segment number")
	a.zeros("reserved", 20)
	a.hex32("crc32c of [0:60)")
}

func TestFormatGoldenSegHeader(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    segHeader
	}{{"seg_header_log", goldenLogHeader}, {"seg_header_index", goldenIdxHeader}} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, segHeaderSize)
			for i := range buf {
				buf[i] = 0xee // encode must clear the whole header
			}
			tc.h.encode(buf)
			if !formatAllZero(buf[40:60]) || buf[segHeaderLen] != 0xee {
				t.Fatalf("encode wrote outside [0:%d) or left reserved bytes set", segHeaderLen)
			}
			g := checkGolden(t, tc.name, buf[:segHeaderLen], func(a *annot) {
				a.comment(fmt.Sprintf("segment header, %s segment: the first %d bytes of the %d reserved at the start of every segment",
					map[uint8]string{segKindLog: "log", segKindIndex: "index"}[tc.h.Kind], segHeaderLen, segHeaderSize))
				a.comment("integers little-endian")
				annotSegHeader(a)
			})
			h, err := decodeSegHeader(g, tc.h.SegNo)
			if err != nil {
				t.Fatalf("decode golden header: %v", err)
			}
			if h != tc.h {
				t.Fatalf("decoded %+v, want %+v", h, tc.h)
			}
		})
	}
}

func annotRecord(a *annot) {
	a.hex32("crc32c of seq u64 ++ [4:end)")
	kind := a.u8("kind (1 put, 2 delete, 3 put with request id, 4 delete with request id, 5 request-table checkpoint)")
	kl := a.u16("key length")
	vl := a.u32("payload length (the value, after the request id of kinds 3 and 4)")
	a.raw("key", int(kl))
	if kind == recPutOnce || kind == recDeleteOnce {
		a.u64("request id: client")
		a.u64("request id: seq")
		a.u64("request id: ack (the client's lowest incomplete seq)")
		vl -= ridLen
	}
	if kind == recTable {
		a.u8("checkpoint chunk version (1)")
		n := a.u32("clients")
		for range n {
			a.u64("client")
			a.u64("ack")
			k := a.u32("applied seqs")
			for range k {
				a.u64("seq")
			}
		}
		return
	}
	if vl > 0 {
		a.raw("value", int(vl))
	}
}

// goldenTable is the completion table the checkpoint golden encodes.
func goldenTable() *reqTable {
	t := newReqTable()
	t.add(RequestID{Client: 0x1111, Seq: 7, Ack: 5}, 100, time.Time{})
	t.add(RequestID{Client: 0x1111, Seq: 9, Ack: 5}, 200, time.Time{})
	t.add(RequestID{Client: 0x2222, Seq: 1, Ack: 1}, 300, time.Time{})
	return t
}

func TestFormatGoldenRecord(t *testing.T) {
	rid := RequestID{Client: 0x0123456789abcdef, Seq: 42, Ack: 40}
	for _, tc := range []struct {
		name       string
		kind       uint8
		id         RequestID
		key, value []byte
	}{
		{"record_put", recPut, RequestID{}, []byte("user42"), []byte("hello")},
		{"record_delete", recDelete, RequestID{}, []byte("user42"), nil},
		{"record_put_once", recPut, rid, []byte("user42"), []byte("hello")},
		{"record_delete_once", recDelete, rid, []byte("user42"), nil},
		{"record_table", recTable, RequestID{}, nil, goldenTable().encodeChunks(maxCheckpointChunk)[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, recordSize(len(tc.key), payloadLen(tc.id, tc.value)))
			encodeRecord(buf, goldenRecSeq, tc.kind, tc.id, tc.key, tc.value)
			g := checkGolden(t, tc.name, buf, func(a *annot) {
				a.comment(fmt.Sprintf("log record (%s) in a log segment with sequence number %d", tc.name[len("record_"):], goldenRecSeq))
				a.comment("integers little-endian; the checksum is seeded with the segment's sequence number")
				annotRecord(a)
			})
			g = append(g, 0, 0, 0) // a record is followed by more log bytes
			r, ok := decodeRecord(g, goldenRecSeq)
			if !ok {
				t.Fatal("golden record does not decode")
			}
			if r.Kind != tc.kind || r.ID != tc.id || string(r.Key) != string(tc.key) || string(r.Value) != string(tc.value) || r.Size != len(buf) {
				t.Fatalf("decoded %+v", r)
			}
			if _, ok := decodeRecord(g, goldenRecSeq+1); ok {
				t.Fatal("golden record decodes with another segment sequence number")
			}
		})
	}
}

// goldenLeaf and goldenInternal are the nodes of a two-level tree built with
// nodeWriter as the builder does.
type goldenLeafEntry struct {
	key string
	e   entry
}

var (
	goldenLeafEntries = []goldenLeafEntry{
		{"apple", entry{ptr: goldenGeo.ptr(3, 4096), vlen: 5}},
		{"banana", entry{ptr: goldenGeo.ptr(3, 4096+21), vlen: 0, tomb: true}},
		{"cherry", entry{ptr: goldenGeo.ptr(5, 8192), vlen: 300}},
	}
	goldenInternalEntries = []struct {
		key   string
		child ptr
	}{
		{"apple", goldenGeo.ptr(9, segHeaderSize)},
		{"kiwi", goldenGeo.ptr(9, segHeaderSize+DefaultNodeSize)},
	}
)

func annotNode(a *annot) {
	a.hex32("crc32c of segment seq u64 ++ [4:nodeSize)")
	typ := a.u8("type (1 leaf, 2 internal)")
	a.u8("height")
	count := a.u16("count")
	used := a.u16("used (header + entries)")
	a.zeros("reserved", 6)
	for i := 0; i < int(count) && a.err == nil; i++ {
		a.comment(fmt.Sprintf("entry %d", i))
		var kl uint16
		if typ == nodeLeaf {
			a.u8("  flags (bit 0: tombstone)")
			kl = a.u16("  key length")
			a.u32("  value length")
			a.ptr("  value pointer")
		} else {
			kl = a.u16("  key length")
			a.ptr("  child pointer")
		}
		a.raw("  key", int(kl))
	}
	a.zeros("unused", len(a.b)-int(used))
}

func TestFormatGoldenNode(t *testing.T) {
	leaf := newNodeWriter(DefaultNodeSize, true, 0)
	for _, le := range goldenLeafEntries {
		if !leaf.fits(len(le.key)) {
			t.Fatal("golden leaf overflows")
		}
		leaf.addLeaf([]byte(le.key), le.e)
	}
	internal := newNodeWriter(DefaultNodeSize, false, 1)
	for _, ie := range goldenInternalEntries {
		internal.addChild([]byte(ie.key), ie.child)
	}
	at := goldenGeo.ptr(9, segHeaderSize)
	t.Run("node_leaf", func(t *testing.T) {
		g := checkGolden(t, "node_leaf", leaf.seal(0), func(a *annot) {
			a.comment(fmt.Sprintf("B+tree leaf node, node size %d, device pointers for %d-byte segments (shift %d)", DefaultNodeSize, DefaultSegmentSize, goldenGeo.shift))
			a.comment("integers little-endian; leaf entry: flags u8 | keyLen u16 | valLen u32 | valuePtr u64 | key")
			annotNode(a)
		})
		n, err := decodeNode(g, at, goldenGeo, 0)
		if err != nil {
			t.Fatalf("decode golden leaf: %v", err)
		}
		if !n.leaf || n.height != 0 || len(n.keys) != len(goldenLeafEntries) {
			t.Fatalf("decoded leaf=%v height=%d count=%d", n.leaf, n.height, len(n.keys))
		}
		for i, le := range goldenLeafEntries {
			if string(n.keys[i]) != le.key || n.entry(i) != le.e {
				t.Fatalf("entry %d: %q %+v, want %q %+v", i, n.keys[i], n.entry(i), le.key, le.e)
			}
		}
	})
	t.Run("node_internal", func(t *testing.T) {
		g := checkGolden(t, "node_internal", internal.seal(0), func(a *annot) {
			a.comment(fmt.Sprintf("B+tree internal node of height 1, node size %d, device pointers for %d-byte segments (shift %d)", DefaultNodeSize, DefaultSegmentSize, goldenGeo.shift))
			a.comment("integers little-endian; internal entry: keyLen u16 | childPtr u64 | key (the child's first key)")
			annotNode(a)
		})
		n, err := decodeNode(g, at, goldenGeo, 0)
		if err != nil {
			t.Fatalf("decode golden internal node: %v", err)
		}
		if n.leaf || n.height != 1 || len(n.keys) != len(goldenInternalEntries) {
			t.Fatalf("decoded leaf=%v height=%d count=%d", n.leaf, n.height, len(n.keys))
		}
		for i, ie := range goldenInternalEntries {
			if string(n.keys[i]) != ie.key || n.ptrs[i] != ie.child {
				t.Fatalf("entry %d: %q %#x, want %q %#x", i, n.keys[i], n.ptrs[i], ie.key, ie.child)
			}
		}
	})
}

var (
	goldenLogSeg = logSeg{idx: 4, seg: 3, seq: 42, end: 1 << 20, garbage: 2048}
	goldenLevel  = levelDesc{root: goldenGeo.ptr(10, segHeaderSize), height: 1, pairs: 3, kvBytes: 322, nodes: 3,
		segs: []segRef{{seg: 9, seq: 43}, {seg: 10, seq: 44}}, logRefs: []uint64{3, 5}}
	goldenRegion          = RegionDesc{ID: 7, Start: []byte("a"), End: []byte("m"), Epoch: 2}
	goldenRegionUnbounded = RegionDesc{ID: 8, Epoch: 1}
)

func annotRegionDesc(a *annot) {
	a.u64("id")
	a.u64("epoch")
	a.raw("start", int(a.u32("start length (0: unbounded)")))
	if a.u32("end present (0: unbounded, 1: end follows)") == 1 {
		a.raw("end", int(a.u32("end length")))
	}
}

func TestFormatGoldenMetaValues(t *testing.T) {
	t.Run("meta_logseg", func(t *testing.T) {
		g := checkGolden(t, "meta_logseg", goldenLogSeg.encode(), func(a *annot) {
			a.comment(fmt.Sprintf("value of r/<id>/log/<idx>: one value-log segment (here idx %d)", goldenLogSeg.idx))
			a.u64("segment number")
			a.u64("segment sequence number")
			a.u64("end: offset after the last record once sealed, 0 while tail")
			a.u64("garbage bytes (estimate)")
		})
		l, err := decodeLogSeg(goldenLogSeg.idx, g)
		if err != nil || l != goldenLogSeg {
			t.Fatalf("decoded %+v, %v; want %+v", l, err, goldenLogSeg)
		}
	})
	t.Run("meta_level", func(t *testing.T) {
		g := checkGolden(t, "meta_level", goldenLevel.encode(), func(a *annot) {
			a.comment("value of r/<id>/lvl/<n>: one on-device level")
			a.ptr("root")
			a.u32("root height")
			a.u64("pairs")
			a.u64("key and value bytes")
			a.u64("nodes")
			n := a.u32("segment count")
			for i := 0; i < int(n); i++ {
				a.u64(fmt.Sprintf("  segment %d number", i))
				a.u64(fmt.Sprintf("  segment %d sequence", i))
			}
			m := a.u32("log reference count")
			for i := 0; i < int(m); i++ {
				a.u64(fmt.Sprintf("  log segment %d number", i))
			}
		})
		l, err := decodeLevelDesc(g)
		if err != nil {
			t.Fatalf("decode golden level: %v", err)
		}
		want := goldenLevel
		want.indexRefs()
		if !reflect.DeepEqual(*l, want) {
			t.Fatalf("decoded %+v, want %+v", *l, want)
		}
	})
	for _, tc := range []struct {
		name string
		r    RegionDesc
	}{{"meta_region", goldenRegion}, {"meta_region_unbounded", goldenRegionUnbounded}} {
		t.Run(tc.name, func(t *testing.T) {
			g := checkGolden(t, tc.name, tc.r.encode(), func(a *annot) {
				a.comment("value of r/<id>/desc: region descriptor, key range [start, end)")
				annotRegionDesc(a)
			})
			r, err := decodeRegionDesc(g)
			if err != nil || !reflect.DeepEqual(r, tc.r) {
				t.Fatalf("decoded %+v, %v; want %+v", r, err, tc.r)
			}
		})
	}
}

func TestFormatGoldenMetaKeys(t *testing.T) {
	for _, tc := range []struct {
		name, title string
		key         []byte
		suffix      string // parsed back as loadRegionStates does
		num         uint64 // <idx> or <n>
		annotate    func(*annot)
	}{
		{"key_log", "metadata key r/<id>/log/<idx> (region 7, log index 4)", logKey(7, 4), "log/", 4,
			func(a *annot) { a.raw("", 2); a.be64("region id"); a.raw("", 5); a.be64("log index") }},
		{"key_level", "metadata key r/<id>/lvl/<n> (region 7, level 2)", levelKey(7, 2), "lvl/", 2,
			func(a *annot) { a.raw("", 2); a.be64("region id"); a.raw("", 5); a.be64("level") }},
		{"key_region_desc", "metadata key r/<id>/desc (region 7)", regionKey(7, "desc"), "desc", 0,
			func(a *annot) { a.raw("", 2); a.be64("region id"); a.raw("", 5) }},
		{"key_region_rp", "metadata key r/<id>/rp (region 7)", regionKey(7, "rp"), "rp", 0,
			func(a *annot) { a.raw("", 2); a.be64("region id"); a.raw("", 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := checkGolden(t, tc.name, tc.key, func(a *annot) {
				a.comment(tc.title)
				tc.annotate(a)
			})
			if len(g) < 11 || string(g[:2]) != "r/" || g[10] != '/' || binary.BigEndian.Uint64(g[2:10]) != 7 {
				t.Fatalf("golden key %q does not parse as a region key", g)
			}
			suffix := string(g[11:])
			if !strings.HasPrefix(suffix, tc.suffix) {
				t.Fatalf("suffix %q, want %q", suffix, tc.suffix)
			}
			if tc.num != 0 && (len(suffix) != 12 || binary.BigEndian.Uint64([]byte(suffix[4:])) != tc.num) {
				t.Fatalf("suffix %q does not hold %d", suffix, tc.num)
			}
		})
	}
	// Numeric fields are big-endian so keys sort numerically.
	if bytes.Compare(logKey(7, 255), logKey(7, 256)) >= 0 || bytes.Compare(levelKey(7, 9), levelKey(7, 10)) >= 0 ||
		bytes.Compare(regionKey(255, "desc"), regionKey(256, "desc")) >= 0 {
		t.Fatal("metadata keys do not sort numerically")
	}
	if string(keySuper) != "v/super" || string(keySeq) != "v/seq" {
		t.Fatalf("volume keys %q %q", keySuper, keySeq)
	}
}

// TestFormatGoldenGeometry pins the device pointer encoding.
func TestFormatGoldenGeometry(t *testing.T) {
	g := goldenGeo
	if g.shift != 21 || g.nodesPerSegment() != 511 || g.maxRecord() != DefaultSegmentSize-segHeaderSize-1 {
		t.Fatalf("geometry %v: shift %d, %d nodes per segment, max record %d", g, g.shift, g.nodesPerSegment(), g.maxRecord())
	}
	p := g.ptr(3, 4096+22)
	if p != 0x601016 || g.seg(p) != 3 || g.off(p) != 4118 || g.filePtrOff(p) != 3*DefaultSegmentSize+4118 {
		t.Fatalf("ptr(3, 4118) = %#x (segment %d offset %d file offset %d)", p, g.seg(p), g.off(p), g.filePtrOff(p))
	}
	if s := newGeometry(64<<10, 4096).shift; s != 16 {
		t.Fatalf("64 KiB segments: shift %d", s)
	}
}

// TestFormatGoldenFreshVolume pins what creating a volume and a region
// writes: the superblock, the sequence counter, the recovery point, and the
// first log segment's header on the device.
func TestFormatGoldenFreshVolume(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{FS: fs, Dir: "vol", CacheBytes: -1, GCInterval: -1}
	v := mustOpen(t, o)
	if _, err := v.CreateRegion(goldenRegion); err != nil {
		t.Fatal(err)
	}
	meta := map[string][]byte{}
	it, err := v.meta.NewIter(&pebble.IterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		meta[string(it.Key())] = append([]byte(nil), it.Value()...)
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	id := goldenRegion.ID
	wantKeys := []string{string(keySuper), string(keySeq), string(regionKey(id, "desc")), string(regionKey(id, "rp")), string(logKey(id, 0))}
	if len(meta) != len(wantKeys) {
		t.Fatalf("metadata holds %d keys, want %q", len(meta), wantKeys)
	}
	for _, k := range wantKeys {
		if _, ok := meta[k]; !ok {
			t.Fatalf("metadata lacks %q", k)
		}
	}
	checkGolden(t, "meta_superblock", meta[string(keySuper)], func(a *annot) {
		a.comment("value of v/super for a volume created with the default geometry")
		a.u32("format version")
		a.u64("segment size")
		a.u32("node size")
	})
	checkGolden(t, "meta_seq", meta[string(keySeq)], func(a *annot) {
		a.comment("value of v/seq after creating one region (its log segment got sequence 1)")
		a.u64("leased bound: every sequence handed out is below it")
	})
	checkGolden(t, "meta_rp", meta[string(regionKey(id, "rp"))], func(a *annot) {
		a.comment("value of r/<id>/rp for a new region: log position idx << shift | offset")
		a.u64("recovery point (log index 0, offset 4096: the first record)")
	})
	if got, want := meta[string(regionKey(id, "desc"))], goldenRegion.encode(); !bytes.Equal(got, want) {
		t.Fatalf("region descriptor %x, want %x", got, want)
	}
	first := logSeg{idx: 0, seg: 1, seq: 1}
	if got, want := meta[string(logKey(id, 0))], first.encode(); !bytes.Equal(got, want) {
		t.Fatalf("first log segment %x, want %x", got, want)
	}
	// Segment 0 is reserved; the region's first log segment is segment 1.
	f, err := fs.Open(fs.PathJoin("vol", dataFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := make([]byte, segHeaderSize)
	if _, err := f.ReadAt(h, DefaultSegmentSize); err != nil {
		t.Fatal(err)
	}
	dh, err := decodeSegHeader(h, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := (segHeader{Kind: segKindLog, Region: id, PrimarySeg: 1, Seq: 1, SegNo: 1}); dh != want || !formatAllZero(h[segHeaderLen:]) {
		t.Fatalf("first log segment header %+v, want %+v", dh, want)
	}
	for _, name := range []string{"LOCK", volumeMarker, dataFileName, "meta"} {
		if _, err := fs.Stat(fs.PathJoin("vol", name)); err != nil {
			t.Fatalf("volume directory: %v", err)
		}
	}
}

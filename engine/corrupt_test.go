package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// openSegments opens the segment file of the volume in fs for writing.
func openSegments(t *testing.T, fs vfs.FS) vfs.File {
	t.Helper()
	f, err := fs.OpenReadWrite("vol/"+dataFileName, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// flipBit flips one bit of the segment file at off.
func flipBit(t *testing.T, fs vfs.FS, off int64) {
	t.Helper()
	f := openSegments(t, fs)
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// setBytes overwrites [off, off+n) of the segment file with fill(i) for
// the i-th byte.
func setBytes(t *testing.T, fs vfs.FS, off, n int64, fill func(i int64) byte) {
	t.Helper()
	f := openSegments(t, fs)
	defer f.Close()
	b := make([]byte, n)
	for i := range b {
		b[i] = fill(int64(i))
	}
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// corruptSetup writes keys, compacts them into levels, and closes. It
// returns the root of L1 or the deepest level and a sealed log segment.
func corruptSetup(t *testing.T, fs vfs.FS) (root ptr, logSeg *logSeg, g geometry) {
	o := smallOpts(fs)
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	for i := 0; i < 2000; i++ {
		if err := r.Put(key(i), []byte(fmt.Sprintf("value-%d-%0100d", i, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	ver := r.acquire()
	root = ver.level(ver.deepest()).root
	r.release(ver)
	r.log.mu.Lock()
	for _, s := range r.log.segs {
		if s.end != 0 {
			c := *s
			logSeg = &c
			break
		}
	}
	r.log.mu.Unlock()
	g = v.g
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	return root, logSeg, g
}

func wantCorrupt(t *testing.T, err error, seg uint64, what string) {
	t.Helper()
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: got %v, want ErrCorrupt", what, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("segment %d", seg)) {
		t.Fatalf("%s: error does not name segment %d: %v", what, seg, err)
	}
}

func TestCorruptNode(t *testing.T) {
	fs := vfs.NewMem()
	root, _, g := corruptSetup(t, fs)
	flipBit(t, fs, g.filePtrOff(root)+100)
	v := mustOpen(t, smallOpts(fs))
	defer v.Close()
	r := mustRegion(t, v, 1)
	_, err := r.Get(key(5))
	wantCorrupt(t, err, g.seg(root), "get through a corrupt root")
	it := r.Scan(nil, nil)
	for it.Next() {
	}
	wantCorrupt(t, it.Close(), g.seg(root), "scan through a corrupt root")
}

func TestCorruptLogRecord(t *testing.T) {
	fs := vfs.NewMem()
	_, ls, g := corruptSetup(t, fs)
	// The first record of a sealed segment: key0's value or a neighbour.
	flipBit(t, fs, g.fileOff(ls.seg)+segHeaderSize+recHeaderLen+3)
	v := mustOpen(t, smallOpts(fs))
	defer v.Close()
	r := mustRegion(t, v, 1)
	var found bool
	for i := 0; i < 2000; i++ {
		_, err := r.Get(key(i))
		if err != nil {
			wantCorrupt(t, err, ls.seg, "get of a corrupt record")
			found = true
		}
	}
	if !found {
		t.Fatalf("no get reported the corrupt record")
	}
}

func TestCorruptSegmentHeader(t *testing.T) {
	fs := vfs.NewMem()
	o := smallOpts(fs)
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	if err := r.Put(key(1), []byte("x")); err != nil {
		t.Fatal(err)
	}
	tail := r.log.flushInfo(r.log.pos()).Segment
	g := v.g
	v.Close()
	flipBit(t, fs, g.fileOff(tail)+9)
	_, err := Open(o)
	wantCorrupt(t, err, tail, "open with a corrupt log segment header")
}

func TestCorruptSealedRecordAtReplay(t *testing.T) {
	fs := vfs.NewMem()
	o := smallOpts(fs)
	o.L0Pairs = 100000 // nothing compacts: everything replays
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	for i := 0; i < 500; i++ {
		if err := r.Put(key(i), make([]byte, 400)); err != nil {
			t.Fatal(err)
		}
	}
	r.log.mu.Lock()
	first := *r.log.segs[0]
	r.log.mu.Unlock()
	g := v.g
	v.Close()
	if first.end == 0 {
		t.Fatal("first log segment not sealed")
	}
	flipBit(t, fs, g.fileOff(first.seg)+segHeaderSize+2000)
	_, err := Open(o)
	wantCorrupt(t, err, first.seg, "replay of a sealed segment with a corrupt record")
}

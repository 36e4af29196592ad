package engine

import (
	"bytes"
	"errors"
	"flag"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// dioFS is an FS whose OpenDirect files behave as O_DIRECT ones do: a
// read or write whose offset, length or memory is not dioBlock-aligned
// fails with EINVAL. It counts direct writes and can fail them.
type dioFS struct {
	vfs.FS
	mu     sync.Mutex
	writes int         // direct writes that landed
	bytes  int64       // their bytes
	sizes  map[int]int // direct writes that landed, by length
	fail   error       // returned by direct writes while set
	// before, if set, runs before each direct write (outside mu); an
	// error it returns is the write's.
	before func(off int64) error
}

func newDioFS(fs vfs.FS) *dioFS { return &dioFS{FS: fs} }

func (d *dioFS) OpenDirect(path string, _ int64) (DirectFile, error) {
	f, err := d.FS.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	return &dioFile{fs: d, f: f}, nil
}

func (d *dioFS) counts() (int, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.writes, d.bytes
}

func (d *dioFS) setFail(err error) {
	d.mu.Lock()
	d.fail = err
	d.mu.Unlock()
}

type dioFile struct {
	fs *dioFS
	f  vfs.File
}

func dioCheck(p []byte, off int64) error {
	if off%dioBlock != 0 || len(p)%dioBlock != 0 || !aligned(p) {
		return syscall.EINVAL
	}
	return nil
}

func (f *dioFile) ReadAt(p []byte, off int64) (int, error) {
	if err := dioCheck(p, off); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *dioFile) WriteAt(p []byte, off int64) (int, error) {
	if err := dioCheck(p, off); err != nil {
		return 0, err
	}
	f.fs.mu.Lock()
	err, before := f.fs.fail, f.fs.before
	f.fs.mu.Unlock()
	if err == nil && before != nil {
		err = before(off)
	}
	if err != nil {
		return 0, err
	}
	n, err := f.f.WriteAt(p, off)
	f.fs.mu.Lock()
	f.fs.writes++
	f.fs.bytes += int64(n)
	if f.fs.sizes == nil {
		f.fs.sizes = map[int]int{}
	}
	f.fs.sizes[len(p)]++
	f.fs.mu.Unlock()
	return n, err
}

func (f *dioFile) Close() error { return f.f.Close() }

// spanVolume opens a volume on a fresh dioFS, allocates a segment and
// returns its file offset and a segment-sized, aligned image of nonzero
// bytes: what the writeSpan tests write.
func spanVolume(t *testing.T, o Options) (*dioFS, *Volume, int64, []byte) {
	t.Helper()
	fs := newDioFS(vfs.NewMem())
	o.FS = fs
	v := mustOpen(t, o)
	s, err := v.allocSegment()
	if err != nil {
		t.Fatal(err)
	}
	img := alignedBytes(int(v.g.segSize))
	for i := range img {
		img[i] = byte(i%239 + 1)
	}
	return fs, v, v.g.fileOff(s.seg), img
}

var directSeed = flag.Uint64("direct-seed", 0, "seed of TestWriteSpanDirect (0: from the clock)")

// TestWriteSpanDirect writes a segment as a log does, span after span of
// random lengths ending anywhere in a block, through the direct path, and
// checks after each span that the file holds every byte written so far
// and zeros up to the end of the last block. Without headIsFile the image
// holds only the span (a catch-up image): the first block's earlier bytes
// must come from the file. Every direct call must be aligned (dioFS
// refuses the others, which would leave the volume writing buffered).
func TestWriteSpanDirect(t *testing.T) {
	seed := *directSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -direct-seed %d)", seed, seed)
	for _, headIsFile := range []bool{true, false} {
		rng := rand.New(rand.NewPCG(seed, 1))
		fs := newDioFS(vfs.NewMem())
		v := mustOpen(t, smallOpts(fs))
		s, err := v.allocSegment()
		if err != nil {
			t.Fatal(err)
		}
		base, segSize := v.g.fileOff(s.seg), v.g.segSize
		want := make([]byte, segSize)
		img := alignedBytes(int(segSize))
		var total int64
		for pos := int64(segHeaderSize); pos < segSize; {
			n := min(1+rng.Int64N(3*dioBlock), segSize-pos)
			if !headIsFile {
				clear(img)
			}
			for i := pos; i < pos+n; i++ {
				img[i] = byte(rng.Uint32() | 1)
				want[i] = img[i]
			}
			// What lies past the span in the image (a spare tail's old
			// bytes, records being appended) must not be written.
			for i := pos + n; i < min(pos+n+dioBlock, segSize); i++ {
				img[i] = 0xEE
			}
			if err := v.writeSpan(img, base, pos, pos+n, IOLog, true, headIsFile); err != nil {
				t.Fatalf("headIsFile %v: span [%d, %d): %v", headIsFile, pos, pos+n, err)
			}
			pos += n
			total += n
			blockEnd := min((pos+dioBlock-1)&^(dioBlock-1), segSize)
			got := make([]byte, blockEnd)
			if _, err := v.file.ReadAt(got, base); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[segHeaderSize:blockEnd], want[segHeaderSize:blockEnd]) {
				t.Fatalf("headIsFile %v: after the span ending at %d the file differs from what was written", headIsFile, pos)
			}
		}
		if !v.directOn.Load() {
			t.Fatalf("headIsFile %v: the volume stopped writing direct (a call was not aligned)", headIsFile)
		}
		writes, n := fs.counts()
		if writes == 0 || n < total {
			t.Fatalf("headIsFile %v: %d direct writes of %d bytes for %d bytes of spans", headIsFile, writes, n, total)
		}
		if st := v.Stats(); st.DirectBytesWritten != uint64(total) || st.BytesWritten[IOLog] < uint64(total) {
			t.Fatalf("headIsFile %v: stats count %d direct bytes, %d log bytes; %d written", headIsFile, st.DirectBytesWritten, st.BytesWritten[IOLog], total)
		}
		v.Close()
	}
}

// TestWriteSpanBuffered: a primary's writes (direct unset), an image at
// an unaligned address and BufferedReplicaWrites all go through the
// page cache (the FS's WriteAt), with the same bytes landing.
func TestWriteSpanBuffered(t *testing.T) {
	for _, tc := range []struct {
		name     string
		direct   bool
		shift    int
		buffered bool
	}{
		{"primary", false, 0, false},
		{"unaligned image", true, 1, false},
		{"BufferedReplicaWrites", true, 0, true},
	} {
		fs := newDioFS(vfs.NewMem())
		o := smallOpts(fs)
		o.BufferedReplicaWrites = tc.buffered
		v := mustOpen(t, o)
		s, err := v.allocSegment()
		if err != nil {
			t.Fatal(err)
		}
		base := v.g.fileOff(s.seg)
		img := alignedBytes(int(v.g.segSize) + 1)[tc.shift:][:v.g.segSize]
		for i := range img {
			img[i] = byte(i%251 + 1)
		}
		if err := v.writeSpan(img, base, segHeaderSize+10, 3*dioBlock+5, IOLog, tc.direct, true); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := make([]byte, 3*dioBlock+5)
		if _, err := v.file.ReadAt(got, base); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[segHeaderSize+10:], img[segHeaderSize+10:3*dioBlock+5]) {
			t.Fatalf("%s: bytes differ", tc.name)
		}
		if w, _ := fs.counts(); w != 0 || v.Stats().DirectBytesWritten != 0 {
			t.Fatalf("%s: %d direct writes", tc.name, w)
		}
		v.Close()
	}
}

// TestWriteSpanRefusedFallsBack: a file system that opens O_DIRECT but
// refuses its writes (EINVAL) gets the span buffered, and the volume
// writes buffered from then on; ENOSPC is the volume's ErrNoSpace (Health
// reports it) and loses nothing already written.
func TestWriteSpanRefusedFallsBack(t *testing.T) {
	fs, v, base, img := spanVolume(t, smallOpts(nil))
	defer v.Close()
	if err := v.writeSpan(img, base, segHeaderSize, 2*dioBlock+7, IOLog, true, true); err != nil {
		t.Fatal(err)
	}
	fs.setFail(syscall.ENOSPC)
	err := v.writeSpan(img, base, 2*dioBlock+7, 3*dioBlock, IOLog, true, true)
	if !errors.Is(err, ErrNoSpace) || v.noSpace.Load() == nil {
		t.Fatalf("direct write on a full device: %v (no-space recorded: %v)", err, v.noSpace.Load() != nil)
	}
	fs.setFail(syscall.EINVAL)
	if err := v.writeSpan(img, base, 2*dioBlock+7, 3*dioBlock+9, IOLog, true, true); err != nil {
		t.Fatalf("refused direct write: %v", err)
	}
	if v.directOn.Load() {
		t.Fatal("the volume still writes direct after EINVAL")
	}
	got := make([]byte, 3*dioBlock+9)
	if _, err := v.file.ReadAt(got, base); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[segHeaderSize:], img[segHeaderSize:3*dioBlock+9]) {
		t.Fatal("bytes differ after the fallback")
	}
}

// TestBackupRegionLogDirect is TestBackupRegionLog's adoption in two
// parts (the second starting mid-block) with direct writes: the records
// verify after a restart.
func TestBackupRegionLogDirect(t *testing.T) {
	mem := vfs.NewMem()
	fs := newDioFS(mem)
	pv, tail, bo, bv, br := backupOfTail(t, mem, fs, 300)
	defer pv.Close()
	image := alignedBytes(int(bv.SegmentSize()))
	copy(image, tail.Image)
	half := (tail.Offset + segHeaderSize) / 2
	if half%dioBlock == 0 {
		half++
	}
	local, err := br.AdoptLog(tail.Segment, tail.Seq, image, half)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := br.AdoptLog(tail.Segment, tail.Seq, image, tail.Offset); err != nil {
		t.Fatal(err)
	}
	if w, _ := fs.counts(); w == 0 {
		t.Fatal("no direct write")
	}
	if err := bv.Close(); err != nil {
		t.Fatal(err)
	}
	bv = mustOpen(t, bo)
	defer bv.Close()
	if br, ok := bv.Backup(1); !ok || br.LogMap()[tail.Segment] != local {
		t.Fatal("backup region after restart: log map lost")
	}
	in, err := OpenInspector(fs, "backup", true)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var recs int
	if err := in.Log(1, LogPosition{Offset: segHeaderSize}, func(LogRecord) error { recs++; return nil }); err != nil {
		t.Fatal(err)
	}
	if recs != 300 {
		t.Fatalf("%d records readable in the adopted segment, want 300", recs)
	}
	if rep := in.Check(); !rep.OK() {
		t.Fatalf("check: %v", rep.Problems)
	}
}

// TestWriteSpanFallbackConcurrent: a write the file system refuses turns
// direct I/O off while another region's direct write is in flight; that
// one still lands (the direct file stays open), and both spans read back.
func TestWriteSpanFallbackConcurrent(t *testing.T) {
	fs, v, refusedAt, img := spanVolume(t, smallOpts(nil))
	defer v.Close()
	other, err := v.allocSegment()
	if err != nil {
		t.Fatal(err)
	}
	otherAt := v.g.fileOff(other.seg)
	inFlight, refusedDone := make(chan struct{}), make(chan struct{})
	fs.before = func(off int64) error {
		if off >= refusedAt && off < refusedAt+v.g.segSize {
			return syscall.EINVAL
		}
		close(inFlight)
		<-refusedDone // the other write falls back meanwhile
		return nil
	}
	errs := make(chan error, 1)
	go func() {
		errs <- v.writeSpan(img, otherAt, segHeaderSize, 3*dioBlock, IOLog, true, true)
	}()
	<-inFlight
	if err := v.writeSpan(img, refusedAt, segHeaderSize, 2*dioBlock+3, IOLog, true, true); err != nil {
		t.Fatalf("refused write: %v", err)
	}
	close(refusedDone)
	if err := <-errs; err != nil {
		t.Fatalf("write in flight when direct I/O was turned off: %v", err)
	}
	for i, at := range []int64{refusedAt, otherAt} {
		end := []int64{2*dioBlock + 3, 3 * dioBlock}[i]
		got := make([]byte, end)
		if _, err := v.file.ReadAt(got, at); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[segHeaderSize:], img[segHeaderSize:end]) {
			t.Fatalf("segment %d: bytes differ", i)
		}
	}
}

// TestFollowerWritesDirect: a follower (a Build-Index backup's copy) in
// sync mode writes its log (a group commit per put: flushes ending
// anywhere in a block, seals, prepared segments' zeroes) and its levels
// (compactions) past the page cache; after a restart every value reads
// back and the volume checks clean.
func TestFollowerWritesDirect(t *testing.T) {
	fs := newDioFS(vfs.NewMem())
	o := smallOpts(fs)
	o.SyncMode = SyncModeSync
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	if err := v.SetFollower(1, true); err != nil {
		t.Fatal(err)
	}
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 1+i%97) }
	const n = 2000
	for i := range n {
		if err := r.Put(key(i), val(i)); err != nil {
			t.Fatal(err)
		}
	}
	st := v.Stats()
	if st.DirectBytesWritten == 0 || st.Compactions == 0 || st.LogSeals == 0 {
		t.Fatalf("direct bytes %d, compactions %d, seals %d: the follower's paths did not all run", st.DirectBytesWritten, st.Compactions, st.LogSeals)
	}
	if !v.directOn.Load() {
		t.Fatal("a direct write was refused (not aligned)")
	}
	// Its levels went direct: more bytes than its log's; so did the
	// zeroing of its prepared segments (a write of a whole body).
	t.Logf("direct %d bytes; log %d, compaction %d", st.DirectBytesWritten, st.BytesWritten[IOLog], st.BytesWritten[IOCompaction])
	if st.DirectBytesWritten <= st.BytesWritten[IOLog] {
		t.Fatalf("direct %d bytes, no more than the log's %d: the compactions wrote buffered", st.DirectBytesWritten, st.BytesWritten[IOLog])
	}
	fs.mu.Lock()
	zeroed := fs.sizes[int(v.g.segSize-segHeaderSize)]
	fs.mu.Unlock()
	if zeroed == 0 {
		t.Fatal("no prepared segment zeroed direct")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = mustOpen(t, o)
	defer v.Close()
	r, ok := v.Region(1)
	if !ok {
		t.Fatal("region lost")
	}
	for i := range n {
		got, err := r.Get(key(i))
		if err != nil || !bytes.Equal(got, val(i)) {
			t.Fatalf("key %d after restart: %q, %v", i, got, err)
		}
	}
	in, err := OpenInspector(fs, o.Dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if rep := in.Check(); !rep.OK() {
		t.Fatalf("check: %v", rep.Problems)
	}
}

// TestWriteSpanRefusedPartway: a span whose first blocks landed direct
// before the file system refused its last one is written again whole,
// buffered, and counted once.
func TestWriteSpanRefusedPartway(t *testing.T) {
	fs, v, base, img := spanVolume(t, smallOpts(nil))
	defer v.Close()
	from, to := int64(segHeaderSize+100), int64(4*dioBlock+50)
	last := base + to&^(dioBlock-1)
	fs.before = func(off int64) error {
		if off == last {
			return syscall.EOPNOTSUPP
		}
		return nil
	}
	before := v.Stats()
	if err := v.writeSpan(img, base, from, to, IOLog, true, true); err != nil {
		t.Fatal(err)
	}
	if w, _ := fs.counts(); w == 0 {
		t.Fatal("no block landed direct before the refusal")
	}
	after := v.Stats()
	if got := after.BytesWritten[IOLog] - before.BytesWritten[IOLog]; got != uint64(to-from) {
		t.Fatalf("%d bytes counted written, the span has %d", got, to-from)
	}
	if after.DirectBytesWritten != before.DirectBytesWritten || v.directOn.Load() {
		t.Fatalf("after the refusal: %d direct bytes counted, direct on %v", after.DirectBytesWritten-before.DirectBytesWritten, v.directOn.Load())
	}
	got := make([]byte, to)
	if _, err := v.file.ReadAt(got, base); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[from:], img[from:to]) {
		t.Fatal("bytes differ")
	}
}

//go:build linux

package engine

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// TestReplicaWritesBypassPageCache: on the OS file system (segments of
// 2 MiB; smaller ones are written buffered) a replica's
// segment written direct leaves no page of it in the page cache, while
// the same write buffered (a primary's) leaves every page cached: what
// BufferedReplicaWrites trades.
func TestReplicaWritesBypassPageCache(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC {
		t.Skip("the temporary directory is a tmpfs: its files live in the page cache")
	}
	probe := filepath.Join(dir, "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if f, err := openOSDirect(probe); err != nil {
		t.Skipf("the temporary directory's file system refuses O_DIRECT: %v", err)
	} else {
		f.Close()
	}
	small := smallOpts(vfs.Default)
	small.Dir = filepath.Join(dir, "small")
	sv := mustOpen(t, small)
	if sv.directOn.Load() {
		t.Error("64 KiB segments written direct: a page cache folio may span two of them")
	}
	sv.Close()
	o := smallOpts(vfs.Default)
	o.Dir = dir
	o.SegmentSize = minDirectSegment // smaller segments are written buffered (openDirect)
	v := mustOpen(t, o)
	defer v.Close()
	if !v.directOn.Load() {
		t.Fatal("the OS file system gave no direct file")
	}
	f, err := os.Open(filepath.Join(dir, dataFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, direct := range []bool{true, false} {
		s, err := v.allocSegment()
		if err != nil {
			t.Fatal(err)
		}
		base, size := v.g.fileOff(s.seg), v.g.segSize
		img := alignedBytes(int(size))
		for i := range img {
			img[i] = byte(i%253 + 1)
		}
		if err := v.writeSpan(img, base, segHeaderSize, size-100, IOLog, direct, true); err != nil {
			t.Fatal(err)
		}
		if err := v.syncData(); err != nil {
			t.Fatal(err)
		}
		m, err := unix.Mmap(int(f.Fd()), base, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		vec := make([]byte, size/int64(os.Getpagesize()))
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
		unix.Munmap(m)
		if errno != 0 {
			t.Fatal(errno)
		}
		resident := 0
		for _, p := range vec[1:] { // the header's page is not written here
			resident += int(p & 1)
		}
		if direct && resident != 0 {
			t.Errorf("direct write: %d of %d pages in the page cache", resident, len(vec)-1)
		}
		if !direct && resident != len(vec)-1 {
			t.Errorf("buffered write: %d of %d pages in the page cache", resident, len(vec)-1)
		}
		got := make([]byte, size-100-segHeaderSize)
		if _, err := v.file.ReadAt(got, base+segHeaderSize); err != nil {
			t.Fatal(err)
		}
		for i, b := range got {
			if b != img[segHeaderSize+i] {
				t.Fatalf("direct %v: byte %d reads back %d, wrote %d", direct, segHeaderSize+i, b, img[segHeaderSize+i])
			}
		}
	}
}

// BenchmarkReplicaSegmentWrite writes 2 MiB segments, each into segments
// of the volume's file that were never written before (as a replica's log
// and index grow), buffered and direct, and reports the writer's CPU per
// byte (getrusage) beside the wall time: what BufferedReplicaWrites
// trades.
func BenchmarkReplicaSegmentWrite(b *testing.B) {
	for _, direct := range []bool{false, true} {
		name := "buffered"
		if direct {
			name = "direct"
		}
		b.Run(name, func(b *testing.B) {
			o := Options{FS: vfs.Default, Dir: b.TempDir(), SyncMode: SyncModeAsync, GCInterval: -1}
			v := mustOpen(b, o)
			defer v.Close()
			if direct && !v.directOn.Load() {
				b.Skip("no direct I/O on this file system")
			}
			img := alignedBytes(int(v.g.segSize))
			for i := range img {
				img[i] = byte(i%251 + 1)
			}
			b.SetBytes(v.g.segSize - segHeaderSize)
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				s, err := v.allocSegment()
				if err != nil {
					b.Fatal(err)
				}
				if err := v.writeSpan(img, v.g.fileOff(s.seg), segHeaderSize, v.g.segSize, IOLog, direct, true); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(int64(b.N)*(v.g.segSize-segHeaderSize)), "cpu-ns/B")
		})
	}
}

// cpuTime is this process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var r unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &r); err != nil {
		return 0
	}
	return r.Utime.Nano() + r.Stime.Nano()
}

//go:build linux

package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// TestCompactionBypassCache: on a real file system, the segments of the
// levels compactions wrote are not in the page cache afterwards (with the
// option; they are without it), and the data reads back right.
func TestCompactionBypassCache(t *testing.T) {
	resident := func(bypass bool) (levelPages, inCache int) {
		dir := t.TempDir()
		o := smallOpts(vfs.Default)
		o.Dir, o.CompactionBypassCache = filepath.Join(dir, "vol"), bypass
		v := mustOpen(t, o)
		defer v.Close()
		r := mustRegion(t, v, 1)
		r.Resume()
		val := bytes.Repeat([]byte("x"), 300)
		for i := range 4000 {
			if err := r.Put(key(i), append(val, fmt.Sprint(i)...)); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.Compact(); err != nil {
			t.Fatal(err)
		}
		if err := r.WaitIdle(); err != nil { // no merge reading levels meanwhile
			t.Fatal(err)
		}
		f, err := os.Open(filepath.Join(o.Dir, dataFileName))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		st, _ := f.Stat()
		m, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		page := os.Getpagesize()
		vec := make([]byte, (len(m)+page-1)/page)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Fatal(e)
		}
		for _, li := range r.Levels() {
			for _, seg := range li.Segments {
				// Only the pages the level wrote (read after mincore: the
				// read caches them); the rest may be a former use's.
				data, err := r.ReadIndexSegment(seg)
				if err != nil {
					t.Fatal(err)
				}
				off := v.g.fileOff(seg)
				for p := off / int64(page); p < (off+int64(len(data))+int64(page)-1)/int64(page); p++ {
					levelPages++
					if vec[p]&1 != 0 {
						inCache++
					}
				}
			}
		}
		for _, i := range []int{0, 1234, 3999} {
			got, err := r.Get(key(i))
			if err != nil || !bytes.Equal(got, append(val, fmt.Sprint(i)...)) {
				t.Fatalf("key %d: %v", i, err)
			}
		}
		return levelPages, inCache
	}
	n0, cached0 := resident(false)
	if n0 == 0 || 2*cached0 < n0 {
		t.Fatalf("without the option %d of %d level pages cached: the test shows nothing here", cached0, n0)
	}
	n, cached := resident(true)
	if 4*cached > n {
		t.Fatalf("with the option %d of %d level pages still cached", cached, n)
	}
	t.Logf("level pages cached: %d of %d without the option, %d of %d with it", cached0, n0, cached, n)
}

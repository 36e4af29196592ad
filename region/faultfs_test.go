package region

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/engine"
)

// TestFaultFSDirectFiles: in the fault-fs mode the volume's direct files
// (replicas' writes past the page cache) fail as its buffered ones do,
// and an FS other than the OS's gets none.
func TestFaultFSDirectFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "segments")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	inj := newFaultInjector(dir, zap.NewNop())
	ffs := newFaultFS(vfs.Default, inj)
	var _ engine.DirectOpener = ffs
	d, err := ffs.OpenDirect(path, 2<<20)
	if err != nil {
		t.Skipf("no O_DIRECT here: %v", err)
	}
	if d == nil {
		t.Skip("no direct I/O on this OS")
	}
	defer d.Close()
	if small, err := ffs.OpenDirect(path, 64<<10); small != nil || err != nil {
		t.Fatalf("64 KiB segments: a direct file (%v)", err)
	}
	if mem, err := newFaultFS(vfs.NewMem(), inj).OpenDirect(path, 2<<20); mem != nil || err != nil {
		t.Fatalf("an in-memory FS: a direct file (%v)", err)
	}
	buf := make([]byte, 8192)
	blk := buf[4096-int(uintptr(ptrOf(buf))%4096):][:4096]
	for _, tc := range []struct {
		mode      string
		writeFail bool
		readFail  bool
	}{{"off", false, false}, {"eio-segments", true, false}, {"eio-all", true, true}} {
		if err := os.WriteFile(filepath.Join(dir, FaultFile), []byte(tc.mode), 0o644); err != nil {
			t.Fatal(err)
		}
		inj.read()
		_, err := d.WriteAt(blk, 4096)
		if got := errors.Is(err, syscall.EIO); got != tc.writeFail || (!tc.writeFail && err != nil) {
			t.Errorf("mode %s: direct write: %v", tc.mode, err)
		}
		_, err = d.ReadAt(blk, 4096)
		if got := errors.Is(err, syscall.EIO); got != tc.readFail || (!tc.readFail && err != nil) {
			t.Errorf("mode %s: direct read: %v", tc.mode, err)
		}
	}
}

func ptrOf(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

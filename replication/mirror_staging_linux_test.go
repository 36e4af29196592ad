package replication

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tebis-go/tebis/rdma"
)

// resident counts the pages of b (page-aligned) that are in memory.
func resident(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+unix.Getpagesize()-1)/unix.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore: %v", e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestMirrorSwitchClearsOnlyWhatWasWritten: a switch into a half never
// written leaves its pages untouched (they are the mapping's zeros; a
// server with many lightly written regions would otherwise fault in a
// segment per region for nothing), and a switch back into a written half
// clears it, so the image a backup receives has no bytes of an older tail.
func TestMirrorSwitchClearsOnlyWhatWasWritten(t *testing.T) {
	// With huge pages for shared memory, a write into one half may fault
	// in a 2 MiB page covering the other (the test's halves are 64 KiB).
	if b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/shmem_enabled"); err == nil &&
		!strings.Contains(string(b), "[never]") && !strings.Contains(string(b), "[advise]") && !strings.Contains(string(b), "[deny]") {
		t.Skipf("shared memory may use huge pages here (%s): resident pages do not show what was touched", strings.TrimSpace(string(b)))
	}
	m, err := NewMirror(mirrorSeg, 1, rdma.NewCQ(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	img := m.staging.Bytes()
	half := func(h int) []byte { return img[h*mirrorSeg : (h+1)*mirrorSeg] }
	if _, err := m.Append(0, bytes.Repeat([]byte{0xab}, 3*4096)); err != nil {
		t.Fatal(err)
	}
	if err := m.Switch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if n := resident(t, half(1)); n != 0 {
		t.Fatalf("switching into a half never written touched %d of its pages", n)
	}
	if _, err := m.Append(0, []byte("second tail")); err != nil {
		t.Fatal(err)
	}
	if err := m.Switch(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexFunc(half(0), func(r rune) bool { return r != 0 }); i >= 0 {
		t.Fatalf("the half the tail came back to holds the older tail's byte at %d", i)
	}
	if !bytes.HasPrefix(half(1), []byte("second tail")) {
		t.Fatal("the switch cleared the half it left")
	}
}

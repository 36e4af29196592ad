package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOwnMemCgroupRefusesWhatIsNone: a cgroup file without a usable
// memory controller is ErrNoCgroup, not a guess.
func TestOwnMemCgroupRefusesWhatIsNone(t *testing.T) {
	for _, text := range []string{"", "garbage\n", "4:cpu:/x\n", "4:memory:/no/such/group/here\n"} {
		p := filepath.Join(t.TempDir(), "cgroup")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if d, f, err := ownMemCgroup(p); !errors.Is(err, ErrNoCgroup) {
			t.Errorf("%q: %s %s %v, want ErrNoCgroup", text, d, f, err)
		}
	}
}

// TestMemCgroupLimits: where this process may create memory cgroups (root
// on a host with the controller), a new one holds its limit and goes once
// empty.
func TestMemCgroupLimits(t *testing.T) {
	cg, err := newMemCgroup("tebis-bench-test-"+strconv.Itoa(os.Getpid()), 256<<20)
	if errors.Is(err, ErrNoCgroup) {
		t.Skipf("no writable memory cgroup here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, file, _ := ownMemCgroup("/proc/self/cgroup")
	b, err := os.ReadFile(filepath.Join(cg.dir, file))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(256<<20) {
		t.Fatalf("limit file holds %q, %v", b, err)
	}
	if err := cg.remove(); err != nil {
		t.Fatalf("remove an empty cgroup: %v", err)
	}
	if _, err := os.Stat(cg.dir); !os.IsNotExist(err) {
		t.Fatalf("cgroup still there: %v", err)
	}
}

// TestMemCgroupPeak: the peak charge from v2's memory.peak or v1's
// memory.max_usage_in_bytes, 0 without either.
func TestMemCgroupPeak(t *testing.T) {
	for _, f := range []string{"memory.peak", "memory.max_usage_in_bytes"} {
		cg := &memCgroup{dir: t.TempDir()}
		if err := os.WriteFile(filepath.Join(cg.dir, f), []byte("123456\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if n := cg.peak(); n != 123456 {
			t.Errorf("%s: peak %d, want 123456", f, n)
		}
	}
	if n := (&memCgroup{dir: t.TempDir()}).peak(); n != 0 {
		t.Errorf("no peak file: %d, want 0", n)
	}
}

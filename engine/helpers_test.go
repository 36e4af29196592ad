package engine

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/internal/testseed"
)

// testSeed returns the seed of a randomized test (see internal/testseed).
func testSeed(t testing.TB) int64 { return int64(testseed.Seed(t)) }

// smallOpts are options that make compactions, level moves and GC happen
// on small data.
func smallOpts(fs vfs.FS) Options {
	return Options{
		FS:             fs,
		Dir:            "vol",
		SegmentSize:    64 << 10,
		NodeSize:       4096,
		L0Pairs:        64,
		GrowthFactor:   2,
		SyncMode:       SyncModeAsync,
		CacheBytes:     1 << 20,
		GCGarbageRatio: 0.3,
		GCInterval:     -1,
	}
}

func key(i int) []byte { return []byte(fmt.Sprintf("key%08d", i)) }

func mustOpen(t testing.TB, o Options) *Volume {
	t.Helper()
	v, err := Open(o)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return v
}

func mustRegion(t testing.TB, v *Volume, id uint64) *Region {
	t.Helper()
	r, _, err := v.OpenRegion(RegionDesc{ID: id})
	if err != nil {
		t.Fatalf("open region: %v", err)
	}
	return r
}

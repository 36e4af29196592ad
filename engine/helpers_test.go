package engine

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

var seedFlag = flag.Int64("seed", 0, "seed for randomized engine tests (0: time-based)")

// testSeed returns the seed of a randomized test, printing it so a failure
// can be replayed with -seed or TEBIS_SEED.
func testSeed(t testing.TB) int64 {
	s := *seedFlag
	if s == 0 {
		if env := os.Getenv("TEBIS_SEED"); env != "" {
			v, err := strconv.ParseInt(env, 10, 64)
			if err != nil {
				t.Fatalf("TEBIS_SEED: %v", err)
			}
			s = v
		}
	}
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", s, s)
	return s
}

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
	if r, ok := v.Region(id); ok {
		return r
	}
	r, err := v.CreateRegion(RegionDesc{ID: id})
	if err != nil {
		t.Fatalf("create region: %v", err)
	}
	return r
}

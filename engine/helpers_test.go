package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/internal/retry"
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

// tryPutTaken retries r.TryPutOnce, a millisecond apart and at most 1000
// times, while it declines: background goroutines (the flusher, segment
// preparation, a compaction's install) hold the region's or the log's
// lock now and then, and a decline changes nothing, so a retry is the
// same put.
func tryPutTaken(r *Region, k, v []byte, id RequestID, done func(error)) (ok, later bool, err error) {
	retry.Until(1000, time.Millisecond, func() bool {
		ok, later, err = r.TryPutOnce(k, v, id, done)
		return ok || err != nil
	})
	return ok, later, err
}

// tryGetter is a region's TryGet.
type tryGetter interface {
	TryGet(key []byte) ([]byte, bool, error)
}

// tryGetAnswered is TryGet retried while it declines, at most 1000 times a
// millisecond apart: a decline may come from the region's or its log's
// lock held for a moment by a background goroutine (a flush check, a
// compaction's install, a sync), which TryGet does not wait for.
func tryGetAnswered(r tryGetter, k []byte) (v []byte, ok bool, err error) {
	retry.Until(1000, time.Millisecond, func() bool {
		v, ok, err = r.TryGet(k)
		return ok
	})
	return v, ok, err
}

// tryGetDeclined tries TryGet 20 times, 100 µs apart: ok false and no
// error if every try declined, else the first answer. A lock held for a moment
// elsewhere cannot make a decline that should not be one pass: the key
// would be answered on some try.
func tryGetDeclined(r tryGetter, k []byte) (v []byte, ok bool, err error) {
	if !retry.Until(20, 100*time.Microsecond, func() bool {
		v, ok, err = r.TryGet(k)
		return ok || err != nil
	}) {
		return nil, false, nil
	}
	return v, ok, err
}

// sealedBeforeRP returns copies of r's sealed log segments wholly before
// its recovery point, oldest first.
func sealedBeforeRP(r *Region) []logSeg {
	r.mu.RLock()
	rpIdx := r.rp >> r.v.g.shift
	r.mu.RUnlock()
	r.log.mu.Lock()
	defer r.log.mu.Unlock()
	var out []logSeg
	for _, ls := range r.log.segs {
		if ls.end != 0 && ls.idx < rpIdx {
			out = append(out, *ls)
		}
	}
	return out
}

// Package testseed gives randomized tests one seed convention: the seed is
// printed, and -seed=N (or TEBIS_SEED=N) replays it. It is for tests only.
package testseed

import (
	"flag"
	"os"
	"strconv"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: $TEBIS_SEED or the clock)")

// Seed returns the seed of a randomized test and logs it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		if s, err := strconv.ParseUint(os.Getenv("TEBIS_SEED"), 10, 64); err == nil {
			seed = s
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d or TEBIS_SEED=%d)", seed, seed, seed)
	return seed
}

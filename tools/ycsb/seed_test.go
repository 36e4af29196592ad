package ycsb

import (
	"testing"

	"github.com/tebis-go/tebis/internal/testseed"
)

// testSeed returns the seed for a randomized test (see internal/testseed).
func testSeed(t *testing.T) uint64 { return testseed.Seed(t) }

package engine

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestL0Fill: the fill is the larger of the two ratios, capped at 1; a
// byte cap of zero is no cap.
func TestL0Fill(t *testing.T) {
	for _, c := range []struct {
		pairs    int
		bytes    int64
		maxPairs int
		maxBytes int64
		want     float64
	}{
		{0, 0, 100, 0, 0},
		{25, 1 << 20, 100, 0, 0.25},
		{25, 500, 100, 1000, 0.5},
		{75, 500, 100, 1000, 0.75},
		{150, 0, 100, 0, 1},
		{1, 5000, 100, 1000, 1},
	} {
		if got := l0Fill(c.pairs, c.bytes, c.maxPairs, c.maxBytes); got != c.want {
			t.Errorf("l0Fill(%d, %d, %d, %d) = %v, want %v", c.pairs, c.bytes, c.maxPairs, c.maxBytes, got, c.want)
		}
	}
}

// TestRegionStatsFollowL0AndLevels: puts fill L0 (pairs, bytes, fill); a
// compaction empties it into L1, whose pairs, bytes and segments the
// stats then report; the log holds at least its tail.
func TestRegionStatsFollowL0AndLevels(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 10 // no compaction but the explicit one
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	const n = 256
	var kv int64
	for i := range n {
		if err := r.Put(key(i), []byte("value")); err != nil {
			t.Fatal(err)
		}
		kv += int64(len(key(i)) + len("value"))
	}
	st := r.Stats()
	if st.L0Pairs != n || st.L0Bytes != kv || st.L0Fill != float64(n)/float64(o.L0Pairs) || len(st.Levels) != 0 {
		t.Fatalf("after %d puts: %+v", n, st)
	}
	if st.LogSegments < 1 {
		t.Fatalf("a region with writes has %d log segments", st.LogSegments)
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	st = r.Stats()
	if st.L0Pairs != 0 || st.L0Fill != 0 || len(st.Levels) != 1 {
		t.Fatalf("after the compaction: %+v", st)
	}
	if l := st.Levels[0]; l.Level != 1 || l.Pairs != n || l.KVBytes != kv || l.Segments < 1 {
		t.Fatalf("L1 after compacting %d pairs of %d bytes: %+v", n, kv, l)
	}
}

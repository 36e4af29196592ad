package engine

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStatsCountLogSealsAndBuiltSegments: LogSeals counts log segments that
// filled (not the partial flush before an L0 compaction) and
// IndexSegmentsBuilt the index segments compactions wrote.
func TestStatsCountLogSealsAndBuiltSegments(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 20 // no compaction while the log fills
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	// A few small puts, then an explicit compaction: a partial flush, no seal.
	for i := range 10 {
		if err := r.Put(key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	st := v.Stats()
	if st.LogSeals != 0 || st.IndexSegmentsBuilt == 0 {
		t.Fatalf("after a partial flush and a compaction: %d seals, %d index segments built", st.LogSeals, st.IndexSegmentsBuilt)
	}
	built := st.IndexSegmentsBuilt
	// 4 KiB values fill a 64 KiB log segment every ~15 records.
	val := bytes.Repeat([]byte{'x'}, 4<<10)
	for i := range 100 {
		if err := r.Put(key(100+i), val); err != nil {
			t.Fatal(err)
		}
	}
	st = v.Stats()
	if st.LogSeals < 5 || st.IndexSegmentsBuilt != built {
		t.Fatalf("after 400 KiB of puts into 64 KiB segments: %d seals (want >= 5), %d index segments built (want %d)", st.LogSeals, st.IndexSegmentsBuilt, built)
	}
}

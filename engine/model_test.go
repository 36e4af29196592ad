package engine

import (
	"bytes"
	"errors"
	"math/rand"
	"sort"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestModel runs random Put/Delete/Get/Scan sequences against a map, with
// small segments and a tiny L0 so compactions, level moves and GC happen
// constantly, and closes and reopens the volume at random.
func TestModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	ops := 200_000
	if testing.Short() {
		ops = 20_000
	}
	fs := vfs.NewMem()
	o := smallOpts(fs)
	o.L0Pairs = 50 + rng.Intn(100)
	v := mustOpen(t, o)
	r := mustRegion(t, v, 7)
	model := map[string][]byte{}
	keys := 3000
	val := func() []byte {
		b := make([]byte, rng.Intn(300))
		rng.Read(b)
		return b
	}
	reopens, gcs := 0, 0
	var total Stats
	addStats := func(st Stats) {
		total.Compactions += st.Compactions
		total.LevelMoves += st.LevelMoves
		total.GCFreed += st.GCFreed
		total.GCRelocated += st.GCRelocated
	}
	for op := 0; op < ops; op++ {
		k := key(rng.Intn(keys))
		switch p := rng.Intn(10000); {
		case p < 4500:
			b := val()
			if err := r.Put(k, b); err != nil {
				t.Fatalf("op %d put: %v", op, err)
			}
			model[string(k)] = b
		case p < 6000:
			if err := r.Delete(k); err != nil {
				t.Fatalf("op %d delete: %v", op, err)
			}
			delete(model, string(k))
		case p < 9500:
			got, err := r.Get(k)
			want, ok := model[string(k)]
			if !ok {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("op %d get %s: want not found, got %v", op, k, err)
				}
			} else if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("op %d get %s: err %v, value mismatch %v", op, k, err, !bytes.Equal(got, want))
			}
		case p < 9900:
			checkScan(t, r, model, key(rng.Intn(keys)), key(rng.Intn(keys)), op)
		case p < 9990:
			if _, err := r.GC(); err != nil {
				t.Fatalf("op %d gc: %v", op, err)
			}
			gcs++
		default:
			addStats(v.Stats())
			if err := v.Close(); err != nil {
				t.Fatalf("op %d close: %v", op, err)
			}
			v = mustOpen(t, o)
			r = mustRegion(t, v, 7)
			reopens++
		}
	}
	checkScan(t, r, model, nil, nil, ops)
	addStats(v.Stats())
	st := total
	st.SegmentsUsed = v.Stats().SegmentsUsed
	t.Logf("reopens %d gc passes %d compactions %d moves %d gc-freed %d relocated %d B, segments used %d",
		reopens, gcs, st.Compactions, st.LevelMoves, st.GCFreed, st.GCRelocated, st.SegmentsUsed)
	if st.Compactions == 0 || st.GCFreed == 0 {
		t.Fatalf("model run did not exercise compaction and GC: %+v", st)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

func checkScan(t *testing.T, r *Region, model map[string][]byte, start, end []byte, op int) {
	t.Helper()
	if start != nil && end != nil && bytes.Compare(start, end) > 0 {
		start, end = end, start
	}
	var want []string
	for k := range model {
		if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
			want = append(want, k)
		}
	}
	sort.Strings(want)
	it := r.Scan(start, end)
	i := 0
	for it.Next() {
		if i >= len(want) || string(it.Key()) != want[i] {
			t.Fatalf("op %d scan [%s,%s): key %d is %s, want %v", op, start, end, i, it.Key(), want[min(i, len(want)-1):min(i+1, len(want))])
		}
		if !bytes.Equal(it.Value(), model[want[i]]) {
			t.Fatalf("op %d scan: value of %s differs", op, it.Key())
		}
		i++
	}
	if err := it.Close(); err != nil {
		t.Fatalf("op %d scan: %v", op, err)
	}
	if i != len(want) {
		t.Fatalf("op %d scan [%s,%s): %d keys, want %d", op, start, end, i, len(want))
	}
}

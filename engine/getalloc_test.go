package engine

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestGetAllocations: a get allocates the record it reads from the log
// and nothing more: the value it returns is that record's, not a copy of
// it; for a key in L0 and for one in a level, through Get and TryGet.
func TestGetAllocations(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 20
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	if err := r.Put([]byte("level"), []byte("in a level")); err != nil {
		t.Fatal(err)
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := r.Put([]byte("l0"), []byte("in L0")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"l0", "level"} {
		key := []byte(k)
		if got, err := r.Get(key); err != nil || len(got) == 0 {
			t.Fatalf("Get(%s): %q, %v", k, got, err)
		}
		// A level's nodes are decoded (allocating) until the node cache
		// admits them, which it does in the background: measured again
		// until it has, for at most a second.
		var get, try float64
		var declined bool
		for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
			declined = false
			get = testing.AllocsPerRun(50, func() { _, _ = r.Get(key) })
			try = testing.AllocsPerRun(50, func() {
				if _, ok, _ := r.TryGet(key); !ok {
					declined = true // allocates nothing: not the path measured
				}
			})
			if (get <= 1 && try <= 1 && !declined) || time.Now().After(deadline) {
				break
			}
		}
		t.Logf("%s: Get %v allocations, TryGet %v", k, get, try)
		// The value is the caller's: writing into it changes nothing the
		// region reads.
		got, err := r.Get(key)
		if err != nil {
			t.Fatal(err)
		}
		want := string(got)
		for i := range got {
			got[i] = 'X'
		}
		_ = append(got, "past the value's end"...)
		if again, err := r.Get(key); err != nil || string(again) != want {
			t.Fatalf("%s after writing into a returned value: %q, %v; want %q", k, again, err, want)
		}
		if declined {
			t.Fatalf("%s: TryGet declined for a second", k)
		}
		if get > 1 || try > 1 {
			t.Errorf("%s: Get %v allocations, TryGet %v; want at most 1 (the record read)", k, get, try)
		}
	}
}

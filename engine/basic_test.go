package engine

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestPutGetScanReopen(t *testing.T) {
	fs := vfs.NewMem()
	o := smallOpts(fs)
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	const n = 5000
	for i := 0; i < n; i++ {
		if err := r.Put(key(i), bytes.Repeat([]byte{byte(i)}, i%200)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 3 {
		if err := r.Delete(key(i)); err != nil {
			t.Fatal(err)
		}
	}
	check := func(r *Region) {
		t.Helper()
		for i := 0; i < n; i++ {
			got, err := r.Get(key(i))
			if i%3 == 0 {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("key %d: want not found, got %v", i, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte(i)}, i%200)) {
				t.Fatalf("key %d: %v %x", i, err, got)
			}
		}
		it := r.Scan(key(100), key(200))
		var count int
		for it.Next() {
			count++
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		if count != 67 {
			t.Fatalf("scan count %d", count)
		}
	}
	check(r)
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	check(r)
	st := v.Stats()
	if st.Compactions == 0 {
		t.Fatalf("no compactions: %+v", st)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	v = mustOpen(t, o)
	check(mustRegion(t, v, 1))
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

package engine

import (
	"bytes"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func TestBadInput(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	r := mustRegion(t, v, 1)
	if err := r.Put(key(1), []byte("kept")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"empty key put", r.Put(nil, []byte("x")), ErrEmptyKey},
		{"empty key get", func() error { _, err := r.Get([]byte{}); return err }(), ErrEmptyKey},
		{"empty key delete", r.Delete(nil), ErrEmptyKey},
		{"key too large", r.Put(make([]byte, MaxKeySize+1), nil), ErrKeyTooLarge},
		{"value too large", r.Put(key(2), make([]byte, v.MaxValueSize()+1)), ErrValueTooLarge},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}
	// The largest key and value are accepted.
	big := bytes.Repeat([]byte("v"), v.MaxValueSize())
	if err := r.Put(bytes.Repeat([]byte("k"), MaxKeySize), big); err != nil {
		t.Fatalf("max-size put: %v", err)
	}
	if got, err := r.Get(bytes.Repeat([]byte("k"), MaxKeySize)); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("max-size get: %v", err)
	}
	if got, err := r.Get(key(1)); err != nil || string(got) != "kept" {
		t.Fatalf("stored value lost after bad input: %q %v", got, err)
	}
	if _, err := v.CreateRegion(RegionDesc{ID: 1}); !errors.Is(err, ErrRegionExists) {
		t.Fatalf("duplicate region: %v", err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	after := []error{
		r.Put(key(3), nil), r.Delete(key(1)), r.Sync(), r.Scan(nil, nil).Err(), v.Close(),
		func() error { _, err := r.Get(key(1)); return err }(),
		func() error { _, err := v.CreateRegion(RegionDesc{ID: 9}); return err }(),
	}
	for i, err := range after {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("operation %d after close: %v, want ErrClosed", i, err)
		}
	}
}

func TestRegionRange(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r, err := v.CreateRegion(RegionDesc{ID: 2, Start: []byte("b"), End: []byte("d")})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "d", "zz"} {
		if err := r.Put([]byte(k), nil); !errors.Is(err, ErrOutOfRange) {
			t.Errorf("put %q: %v", k, err)
		}
	}
	for _, k := range []string{"b", "c", "cz"} {
		if err := r.Put([]byte(k), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	it := r.Scan(nil, nil)
	var got []string
	for it.Next() {
		got = append(got, string(it.Key()))
	}
	if err := it.Close(); err != nil || strings.Join(got, ",") != "b,c,cz" {
		t.Fatalf("scan: %v %v", got, err)
	}
	if _, err := v.CreateRegion(RegionDesc{ID: 3, Start: []byte("x"), End: []byte("a")}); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("empty range: %v", err)
	}
}

// TestFullVolume fills a capped volume: writes fail with ErrNoSpace,
// everything acknowledged stays readable, and a reopen with more room
// accepts writes again.
func TestFullVolume(t *testing.T) {
	fs := vfs.NewMem()
	o := smallOpts(fs)
	o.MaxSegments = 12
	v := mustOpen(t, o)
	r := mustRegion(t, v, 1)
	val := bytes.Repeat([]byte("x"), 500)
	var n int
	var err error
	for n = 0; n < 100000; n++ {
		if err = r.Put(key(n), val); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("after %d puts: %v, want ErrNoSpace", n, err)
	}
	t.Logf("volume full after %d puts: %v", n, err)
	for i := 0; i < n; i++ {
		if got, err := r.Get(key(i)); err != nil || !bytes.Equal(got, val) {
			t.Fatalf("key %d lost on a full volume: %v", i, err)
		}
	}
	v.Close()
	o.MaxSegments = 0
	v = mustOpen(t, o)
	defer v.Close()
	r = mustRegion(t, v, 1)
	for i := 0; i < n; i++ {
		if got, err := r.Get(key(i)); err != nil || !bytes.Equal(got, val) {
			t.Fatalf("key %d lost after reopen: %v", i, err)
		}
	}
	if err := r.Put(key(n), val); err != nil {
		t.Fatalf("put after growing the volume: %v", err)
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
}

// TestENOSPC: a file system that reports ENOSPC gives ErrNoSpace.
func TestENOSPC(t *testing.T) {
	mem := vfs.NewMem()
	var full bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full && op.Kind == errorfs.OpFileWriteAt {
			return syscall.ENOSPC
		}
		return nil
	})
	o := smallOpts(errorfs.Wrap(mem, inj))
	o.SyncMode = SyncModeSync
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	if err := r.Put(key(1), []byte("a")); err != nil {
		t.Fatal(err)
	}
	full = true
	if err := r.Put(key(2), []byte("b")); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("put on a full disk: %v", err)
	}
	if got, err := r.Get(key(1)); err != nil || string(got) != "a" {
		t.Fatalf("acknowledged value lost: %q %v", got, err)
	}
}

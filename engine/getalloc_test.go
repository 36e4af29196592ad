package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/tebis-go/tebis/internal/retry"
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

// TestTryGetIntoReadsIntoTheBuffer: TryGetInto reads a record that fits
// in dst's capacity into dst's storage, allocating nothing, for a key in
// the log's tail (a copy from memory) and for keys in a sealed segment
// behind a level (a read from the device, which the volume's read counter
// shows); a record larger than dst's capacity goes into a buffer of its
// own, and dst is left alone.
func TestTryGetIntoReadsIntoTheBuffer(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 20
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	big := make([]byte, 3000)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	if err := r.Put([]byte("level"), []byte("in a level")); err != nil {
		t.Fatal(err)
	}
	if err := r.Put([]byte("big"), big); err != nil {
		t.Fatal(err)
	}
	// Twice the segment size after them: their segment is sealed, so
	// their records are read from the device.
	filler := make([]byte, 1024)
	for i := range 2 * int(o.SegmentSize) / len(filler) {
		if err := r.Put([]byte(fmt.Sprintf("filler%04d", i)), filler); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := r.Put([]byte("l0"), []byte("in L0")); err != nil {
		t.Fatal(err)
	}
	within := func(v, dst []byte) bool {
		if len(v) == 0 || cap(dst) == 0 {
			return false
		}
		return pointsInto(&v[0], dst[:cap(dst)])
	}
	for _, c := range []struct {
		key, want string
		dstCap    int
		inDst     bool
		device    bool // the record is read from the device
	}{
		{"l0", "in L0", 64 << 10, true, false},
		{"level", "in a level", 64 << 10, true, true},
		{"big", string(big), 64 << 10, true, true},
		{"big", string(big), 1024, false, true},
		{"l0", "in L0", 0, false, false},
	} {
		key := []byte(c.key)
		dst := make([]byte, 0, c.dstCap)
		full := dst[:cap(dst)]
		for i := range full {
			full[i] = 'D'
		}
		var got []byte
		var ok bool
		var err error
		retry.Until(1000, time.Millisecond, func() bool { // a decline (a lock held for a moment) is retried
			got, ok, err = r.TryGetInto(key, dst)
			return ok
		})
		if !ok || err != nil || string(got) != c.want {
			t.Fatalf("TryGetInto(%s, cap %d): %.20q, %v, %v; want %.20q", c.key, c.dstCap, got, ok, err, c.want)
		}
		if in := within(got, dst); in != c.inDst {
			t.Fatalf("TryGetInto(%s, cap %d): value in dst %v, want %v", c.key, c.dstCap, in, c.inDst)
		}
		if !c.inDst {
			for i, b := range full {
				if b != 'D' {
					t.Fatalf("TryGetInto(%s, cap %d): dst[%d] written, though the record does not fit", c.key, c.dstCap, i)
				}
			}
			continue
		}
		// Nothing allocated once the level's nodes are cached (the cache
		// admits them in the background: measured until it has, for at
		// most a second). A declined call allocates nothing and measures
		// nothing: a measurement counts only if every call in it answered.
		var allocs float64
		var measured bool
		for deadline := time.Now().Add(time.Second); ; time.Sleep(time.Millisecond) {
			declined := 0
			allocs = testing.AllocsPerRun(50, func() {
				if _, ok, _ := r.TryGetInto(key, dst); !ok {
					declined++
				}
			})
			measured = declined == 0
			if (measured && allocs == 0) || time.Now().After(deadline) {
				break
			}
		}
		if !measured {
			t.Errorf("TryGetInto(%s): declined within every measurement for a second", c.key)
		} else if allocs != 0 {
			t.Errorf("TryGetInto(%s) into a buffer that holds its record: %v allocations, want 0", c.key, allocs)
		}
		before := v.Stats().BytesRead[IOIndex]
		retry.Until(1000, time.Millisecond, func() bool {
			_, ok, err = r.TryGetInto(key, dst)
			return ok
		})
		if !ok || err != nil {
			t.Fatalf("TryGetInto(%s) again: %v, %v", c.key, ok, err)
		}
		if read := v.Stats().BytesRead[IOIndex] - before; (read >= uint64(len(c.want))) != c.device {
			t.Fatalf("TryGetInto(%s): %d bytes read from the device, want a read of its record: %v", c.key, read, c.device)
		}
		// The value read into dst is the caller's: overwriting dst changes
		// nothing the region reads.
		for i := range full {
			full[i] = 'X'
		}
		if again, err := r.Get(key); err != nil || string(again) != c.want {
			t.Fatalf("%s after overwriting dst: %.20q, %v", c.key, again, err)
		}
	}
}

// pointsInto reports whether p points into b's storage.
func pointsInto(p *byte, b []byte) bool {
	for i := range b {
		if &b[i] == p {
			return true
		}
	}
	return false
}

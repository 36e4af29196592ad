package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestTryPutOnce: a put that would wait is declined with nothing changed
// (log position, L0, completion table, the key's value), one that would
// not is applied as PutOnce applies it; after a decline, PutOnce does
// the waiting and the put lands.
func TestTryPutOnce(t *testing.T) {
	id := func(seq uint64) RequestID { return RequestID{Client: 7, Seq: seq} }
	for _, tc := range []struct {
		name    string
		mode    SyncMode
		l0Pairs int
		// setup prepares the region; it returns what undoes it before
		// the PutOnce that follows a decline (nil: nothing).
		setup   func(t *testing.T, r *Region) func()
		decline bool
	}{
		{name: "async alone", mode: SyncModeAsync},
		{name: "sync", mode: SyncModeSync, decline: true},
		{name: "replicator that waits", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			r.SetReplicator(waiterReplicator{true})
			return func() { r.SetReplicator(nil) }
		}},
		{name: "replicator that does not wait", mode: SyncModeAsync, setup: func(t *testing.T, r *Region) func() {
			r.SetReplicator(waiterReplicator{false})
			return nil
		}},
		{name: "quiesced", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			release, err := r.Quiesce()
			if err != nil {
				t.Fatal(err)
			}
			return release
		}},
		{name: "L0 full", mode: SyncModeAsync, l0Pairs: 64, decline: true, setup: func(t *testing.T, r *Region) func() {
			for i := range 64 {
				if err := r.Put(key(i), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			return nil
		}},
		{name: "record would switch segments", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			big := bytes.Repeat([]byte("x"), 4096)
			n := int64(recordSize(len("tryput"), payloadLen(id(1), big)))
			for i := 0; !r.log.maySeal(n); i++ {
				if err := r.Put(key(i), big); err != nil {
					t.Fatal(err)
				}
			}
			// What follows puts a pair of that size (value set below).
			return nil
		}},
		{name: "seal-gating listener", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			r.SetListener(newSealGateListener())
			return func() { r.SetListener(nil) }
		}},
		{name: "region lock held", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			r.mu.RLock() // a reader, or a writer switching segments under it
			return r.mu.RUnlock
		}},
		{name: "duplicate", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			if _, err := r.PutOnce([]byte("tryput"), []byte("first"), id(1)); err != nil {
				t.Fatal(err)
			}
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := smallOpts(vfs.NewMem())
			o.SyncMode = tc.mode
			o.L0Pairs = 1 << 20
			if tc.l0Pairs > 0 {
				o.L0Pairs = tc.l0Pairs
			}
			v := mustOpen(t, o)
			defer v.Close()
			r := mustRegion(t, v, 1)
			undo := func() {}
			if tc.setup != nil {
				if u := tc.setup(t, r); u != nil {
					undo = u
				}
			}
			value := []byte("second")
			if tc.name == "record would switch segments" {
				value = bytes.Repeat([]byte("y"), 4096)
			}
			before, _ := r.Get([]byte("tryput"))
			pos, l0, reqs := r.log.pos(), r.mem.len(), r.RequestTableLen()

			// A decline may also come from a passing holder of the region
			// lock (a compaction, the flusher): where the put must not
			// wait, it is tried again until it is taken.
			applied, ok, err := r.TryPutOnce([]byte("tryput"), value, id(1))
			for i := 0; !ok && err == nil && !tc.decline && i < 1000; i++ {
				time.Sleep(time.Millisecond)
				applied, ok, err = r.TryPutOnce([]byte("tryput"), value, id(1))
			}
			if err != nil {
				t.Fatalf("TryPutOnce: %v", err)
			}
			if ok == tc.decline {
				t.Fatalf("TryPutOnce ok %v, want %v", ok, !tc.decline)
			}
			if !ok {
				if applied {
					t.Fatal("declined and applied")
				}
				if r.log.pos() != pos || r.mem.len() != l0 || r.RequestTableLen() != reqs {
					t.Fatalf("a decline changed the region: log %d -> %d, L0 %d -> %d, table %d -> %d",
						pos, r.log.pos(), l0, r.mem.len(), reqs, r.RequestTableLen())
				}
				if got, _ := r.Get([]byte("tryput")); !bytes.Equal(got, before) {
					t.Fatalf("after a decline the key holds %q, want %q", got, before)
				}
				undo()
				if _, err := r.PutOnce([]byte("tryput"), value, id(1)); err != nil {
					t.Fatalf("PutOnce after the decline: %v", err)
				}
				if tc.name == "duplicate" {
					value = []byte("first") // the original's, not applied again
				}
			} else if !applied {
				t.Fatal("TryPutOnce ok but not applied")
			}
			got, err := r.Get([]byte("tryput"))
			if err != nil || !bytes.Equal(got, value) {
				t.Fatalf("the key holds %q (%v), want %q", got, err, value)
			}
			// The request is in the table either way: a retry is a duplicate.
			if _, ok, _ := r.TryPutOnce([]byte("tryput"), value, id(1)); ok {
				t.Fatal("a retry of an applied request was not declined as a duplicate")
			}
		})
	}
}

// TestTryPutOnceErrors: what is wrong without waiting is reported with
// ok true.
func TestTryPutOnceErrors(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	if _, ok, err := r.TryPutOnce(nil, []byte("v"), RequestID{}); !ok || !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("empty key: ok %v, %v; want ok, ErrEmptyKey", ok, err)
	}
	if _, ok, err := r.TryPutOnce([]byte("k"), make([]byte, v.MaxValueSize()+1), RequestID{}); !ok || !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("oversized value: ok %v, %v; want ok, ErrValueTooLarge", ok, err)
	}
	if _, ok, err := r.TryPutOnce([]byte("k"), []byte("v"), RequestID{Client: 4, Seq: 0}); !ok || !errors.Is(err, ErrBadRequestID) {
		t.Fatalf("malformed id: ok %v, %v; want ok, ErrBadRequestID", ok, err)
	}
}

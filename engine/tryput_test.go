package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestTryPutOnce: a put that would wait before its append is declined
// with nothing changed (log position, L0, completion table, the key's
// value), one that would not is applied as PutOnce applies it, and one
// that would wait only after it (sync mode, a replicator that waits) is
// applied and acknowledged later, its done called once; after a decline,
// PutOnce does the waiting and the put lands.
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
		later   bool // acknowledged later (done)
	}{
		{name: "async alone", mode: SyncModeAsync},
		{name: "sync", mode: SyncModeSync, later: true},
		{name: "replicator that waits", mode: SyncModeAsync, later: true, setup: func(t *testing.T, r *Region) func() {
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
		{name: "seal-gating listener, shut, no seal", mode: SyncModeAsync, setup: func(t *testing.T, r *Region) func() {
			g := newSealGateListener()
			g.ready.Store(false) // only a seal would wait for it
			r.SetListener(g)
			return nil
		}},
		{name: "seal-gating listener, shut, record would seal", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			big := bytes.Repeat([]byte("x"), 4096)
			n := int64(recordSize(len("tryput"), payloadLen(id(1), big)))
			for i := 0; !r.log.maySeal(n); i++ {
				if err := r.Put(key(i), big); err != nil {
					t.Fatal(err)
				}
			}
			g := newSealGateListener()
			g.ready.Store(false)
			r.SetListener(g)
			return func() { close(g.open) } // the PutOnce after the decline seals through it
		}},
		{name: "mirroring listener", mode: SyncModeAsync, decline: true, setup: func(t *testing.T, r *Region) func() {
			r.SetListener(mirroringListener{})
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
			if strings.Contains(tc.name, "would seal") || tc.name == "record would switch segments" {
				value = bytes.Repeat([]byte("y"), 4096)
			}
			before, _ := r.Get([]byte("tryput"))
			pos, l0, reqs := r.log.pos(), r.mem.len(), r.RequestTableLen()

			// A decline may also come from a passing holder of the region
			// lock (a compaction, the flusher): where the put must not
			// wait, it is tried again until it is taken.
			dones := make(chan error, 2)
			done := func(err error) { dones <- err }
			ok, later, err := r.TryPutOnce([]byte("tryput"), value, id(1), done)
			if !ok && err == nil && !tc.decline {
				ok, later, err = tryPutTaken(r, []byte("tryput"), value, id(1), done)
			}
			if err != nil {
				t.Fatalf("TryPutOnce: %v", err)
			}
			if ok == tc.decline || later != tc.later {
				t.Fatalf("TryPutOnce ok %v later %v, want %v %v", ok, later, !tc.decline, tc.later)
			}
			if !ok {
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
			} else if r.log.pos() == pos || r.RequestTableLen() != reqs+1 {
				t.Fatalf("TryPutOnce ok but not applied: log %d -> %d, table %d -> %d", pos, r.log.pos(), reqs, r.RequestTableLen())
			}
			if later {
				select {
				case err := <-dones:
					if err != nil {
						t.Fatalf("acknowledged later with %v", err)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("done was not called")
				}
				if tc.mode == SyncModeSync && r.log.durable.Load() < r.log.pos() {
					t.Fatalf("acknowledged in sync mode before durable: durable %d, log at %d", r.log.durable.Load(), r.log.pos())
				}
			}
			got, err := r.Get([]byte("tryput"))
			if err != nil || !bytes.Equal(got, value) {
				t.Fatalf("the key holds %q (%v), want %q", got, err, value)
			}
			// The request is in the table either way: a retry is a duplicate.
			if ok, _, _ := r.TryPutOnce([]byte("tryput"), value, id(1), done); ok {
				t.Fatal("a retry of an applied request was not declined as a duplicate")
			}
			select {
			case err := <-dones:
				t.Fatalf("done called again (%v)", err)
			case <-time.After(10 * time.Millisecond):
			}
		})
	}
}

// mirroringListener wants the log's records, as a replication stream's
// mirror does.
type mirroringListener struct{ NopListener }

func (mirroringListener) WantsRecords() bool { return true }

// TestTryPutOnceErrors: what is wrong without waiting is reported with
// ok true.
func TestTryPutOnceErrors(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	done := func(err error) { t.Errorf("done called (%v) for a write that was not applied", err) }
	if ok, _, err := r.TryPutOnce(nil, []byte("v"), RequestID{}, done); !ok || !errors.Is(err, ErrEmptyKey) {
		t.Fatalf("empty key: ok %v, %v; want ok, ErrEmptyKey", ok, err)
	}
	if ok, _, err := r.TryPutOnce([]byte("k"), make([]byte, v.MaxValueSize()+1), RequestID{}, done); !ok || !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("oversized value: ok %v, %v; want ok, ErrValueTooLarge", ok, err)
	}
	if ok, _, err := r.TryPutOnce([]byte("k"), []byte("v"), RequestID{Client: 4, Seq: 0}, done); !ok || !errors.Is(err, ErrBadRequestID) {
		t.Fatalf("malformed id: ok %v, %v; want ok, ErrBadRequestID", ok, err)
	}
}

// TestTryPutOnceAcknowledgesLater: writes TryPutOnce applied while their
// replicator waits are reported to their done only when the replicator
// answers, each once and with its outcome, and meanwhile count as writes
// in progress: a Quiesce waits for them.
func TestTryPutOnceAcknowledgesLater(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("replication_fails=%v", fail), func(t *testing.T) {
			o := smallOpts(vfs.NewMem())
			o.L0Pairs = 1 << 20 // no freeze: a full L0 would decline
			v := mustOpen(t, o)
			defer v.Close()
			r := mustRegion(t, v, 1)
			rep := &blockingReplicator{release: make(chan error, 1)}
			r.SetReplicator(rep)
			defer func() { // a failed test's waits end too
				select {
				case rep.release <- errors.New("test over"):
				default:
				}
			}()
			const n = 200
			var mu sync.Mutex
			dones := make([]int, n)
			errs := make([]error, n)
			for i := range n {
				ok, later, err := tryPutTaken(r, key(i), []byte("v"), RequestID{Client: 3, Seq: uint64(i + 1)}, func(err error) {
					mu.Lock()
					dones[i]++
					errs[i] = err
					mu.Unlock()
				})
				if err != nil {
					t.Fatal(err)
				}
				if !ok || !later {
					t.Fatalf("put %d: ok %v later %v, want both", i, ok, later)
				}
			}
			quiesced := make(chan func(), 1)
			go func() {
				release, err := r.Quiesce()
				if err != nil {
					t.Error(err)
				}
				quiesced <- release
			}()
			select {
			case release := <-quiesced:
				release()
				t.Fatal("Quiesce returned while writes waited for their acknowledgement")
			case <-time.After(50 * time.Millisecond):
			}
			mu.Lock()
			for i, d := range dones {
				if d != 0 {
					t.Fatalf("put %d acknowledged before its replicator answered", i)
				}
			}
			mu.Unlock()
			var want error
			if fail {
				want = errors.New("backup lost")
			}
			rep.release <- want
			release := <-quiesced
			release()
			mu.Lock()
			defer mu.Unlock()
			for i := range n {
				if dones[i] != 1 || errs[i] != want {
					t.Fatalf("put %d: done called %d times with %v, want once with %v", i, dones[i], errs[i], want)
				}
			}
		})
	}
}

// failingReplicator fails every wait after d, as a stream whose backup
// hung fails once its timeout passes.
type failingReplicator struct {
	d     time.Duration
	calls atomic.Int64
}

func (f *failingReplicator) WaitReplicated(uint64) error {
	f.calls.Add(1)
	time.Sleep(f.d)
	return errors.New("backup timed out")
}

// TestTryPutOnceFailedWaitNotRepeated: once a replicator's wait fails,
// the writes queued after it get its error without a wait of their own:
// a hung backup costs the acknowledger one timeout per round, not one per
// write.
func TestTryPutOnceFailedWaitNotRepeated(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 20
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	rep := &failingReplicator{d: 20 * time.Millisecond}
	r.SetReplicator(rep)
	const n = 40
	errs := make(chan error, n)
	for i := range n {
		ok, _, err := tryPutTaken(r, key(i), []byte("v"), RequestID{}, func(err error) { errs <- err })
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			t.Fatalf("put %d declined", i)
		}
	}
	for i := range n {
		select {
		case err := <-errs:
			if err == nil {
				t.Fatalf("write %d acknowledged though its replicator failed", i)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%d of %d writes answered in 30 s", i, n)
		}
	}
	if c := rep.calls.Load(); c > n/4 {
		t.Fatalf("the replicator was waited for %d times for %d writes: a failed wait was repeated", c, n)
	}
}

// TestTryPutOnceFailedWaitStaysOnItsReplicator: a failed wait's error is
// given only to the writes after it on the same replicator: a write
// appended after the replicator was replaced is waited for on its own.
func TestTryPutOnceFailedWaitStaysOnItsReplicator(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 20
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	a := &blockingReplicator{release: make(chan error, 1)}
	r.SetReplicator(a)
	defer func() {
		select {
		case a.release <- errors.New("test over"):
		default:
		}
	}()
	errs := make([]chan error, 3)
	put := func(i int) {
		errs[i] = make(chan error, 1)
		for try := 0; try < 1000; try++ {
			ok, later, err := r.TryPutOnce(key(i), []byte("v"), RequestID{}, func(err error) { errs[i] <- err })
			if err != nil || (ok && !later) {
				t.Fatalf("put %d: ok %v later %v, %v", i, ok, later, err)
			}
			if ok {
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Fatalf("put %d declined", i)
	}
	put(0) // the acknowledger's first round: it waits on a
	for i := 0; len(a.waiting()) == 0; i++ {
		if i > 10000 {
			t.Fatal("the acknowledger did not wait")
		}
		time.Sleep(time.Millisecond)
	}
	put(1) // queued behind it, on a
	b := waiterReplicator{true}
	if !r.ReplaceReplicator(a, b) {
		t.Fatal("ReplaceReplicator failed")
	}
	put(2) // queued too, on b
	a.release <- errors.New("backup lost")
	for i, want := range []bool{true, true, false} {
		select {
		case err := <-errs[i]:
			if (err != nil) != want {
				t.Fatalf("put %d: %v, want failed %v", i, err, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("put %d not answered", i)
		}
	}
}

package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// holdingListener wants the log's records and is an AppendHolder, as a
// replication stream's mirror is: it counts holds, releases and the
// appends it saw held or not.
type holdingListener struct {
	NopListener
	busy                  bool // another goroutine holds its lock: TryHoldAppend fails
	held                  bool
	holds, releases       int
	heldSeen, unheldSeen  int
	releasedWithoutAppend int
	appendedSinceHold     bool
}

func (h *holdingListener) WantsRecords() bool { return true }

func (h *holdingListener) TryHoldAppend() bool {
	if h.busy || h.held {
		return false
	}
	h.held, h.appendedSinceHold = true, false
	h.holds++
	return true
}

func (h *holdingListener) ReleaseAppend() {
	if !h.appendedSinceHold {
		h.releasedWithoutAppend++
	}
	h.held = false
	h.releases++
}

func (h *holdingListener) LogAppended(e LogAppend) {
	if e.Record == nil {
		panic("a record listener got no record")
	}
	if e.Held != h.held {
		panic(fmt.Sprintf("LogAppended with Held %v, the listener held %v", e.Held, h.held))
	}
	if h.held {
		h.heldSeen++
		h.appendedSinceHold = true
	} else {
		h.unheldSeen++
	}
}

// TestTryPutOnceHoldsRecordListener: a region whose record listener is an
// AppendHolder takes TryPutOnce's puts, each LogAppended run held and
// released once right after it; a hold that fails declines the put with
// nothing changed; writers that may wait (Put) append unheld.
func TestTryPutOnceHoldsRecordListener(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 20 // a full L0 declines too
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	h := &holdingListener{}
	r.SetListener(h)
	noDone := func(error) { t.Error("done called for a write with nothing to wait for") }
	for i := range 100 {
		ok, later, err := tryPutTaken(r, key(i), []byte("v"), RequestID{Client: 3, Seq: uint64(i + 1)}, noDone)
		if !ok || later || err != nil {
			t.Fatalf("put %d: ok %v later %v err %v", i, ok, later, err)
		}
	}
	if h.holds != 100 || h.releases != 100 || h.heldSeen != 100 || h.unheldSeen != 0 || h.releasedWithoutAppend != 0 {
		t.Fatalf("holds %d releases %d, appends held %d unheld %d, released without its append %d; want 100 100 100 0 0",
			h.holds, h.releases, h.heldSeen, h.unheldSeen, h.releasedWithoutAppend)
	}

	h.busy = true
	pos, l0, reqs := r.log.pos(), r.mem.len(), r.RequestTableLen()
	ok, _, err := r.TryPutOnce([]byte("busy"), []byte("v"), RequestID{Client: 3, Seq: 101}, noDone)
	if ok || err != nil {
		t.Fatalf("with the listener's lock busy: ok %v err %v, want a decline", ok, err)
	}
	if r.log.pos() != pos || r.mem.len() != l0 || r.RequestTableLen() != reqs {
		t.Fatalf("a decline changed the region: log %d -> %d, L0 %d -> %d, table %d -> %d", pos, r.log.pos(), l0, r.mem.len(), reqs, r.RequestTableLen())
	}
	if _, err := r.Get([]byte("busy")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after a decline the key reads %v, want ErrNotFound", err)
	}
	if err := r.Put([]byte("busy"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if h.holds != 100 || h.releases != 100 || h.unheldSeen != 1 {
		t.Fatalf("after a failed hold and a Put: holds %d releases %d unheld appends %d, want 100 100 1", h.holds, h.releases, h.unheldSeen)
	}

	// A failed log: the hold, if taken, is let go with no append.
	h.busy = false
	r.log.mu.Lock()
	r.log.failed = errors.New("injected log failure")
	r.log.mu.Unlock()
	if ok, _, err := tryPutTaken(r, []byte("failed"), []byte("v"), RequestID{Client: 3, Seq: 102}, noDone); !ok || err == nil {
		t.Fatalf("on a failed log: ok %v err %v, want the log's error", ok, err)
	}
	if h.held || h.holds != h.releases {
		t.Fatalf("on a failed log: held %v, holds %d releases %d", h.held, h.holds, h.releases)
	}
}

// gateReplicator is a WriteGate and a TryWriteGate whose TryAdmitWrite
// tells what it was set to.
type gateReplicator struct {
	told  bool
	admit error
}

func (g *gateReplicator) WaitReplicated(uint64) error   { return nil }
func (g *gateReplicator) WaitAcknowledged(uint64) error { return nil }
func (g *gateReplicator) AdmitWrite() error             { return g.admit }
func (g *gateReplicator) TryAdmitWrite() (bool, error)  { return g.told, g.admit }
func (g *gateReplicator) Waits() bool                   { return false }

// TestTryPutOnceTryWriteGate: TryPutOnce asks a TryWriteGate without
// waiting: one that cannot tell declines the put, one that refuses it
// refuses it, one that admits it lets it in; PutOnce asks AdmitWrite.
func TestTryPutOnceTryWriteGate(t *testing.T) {
	v := mustOpen(t, smallOpts(vfs.NewMem()))
	defer v.Close()
	r := mustRegion(t, v, 1)
	refused := errors.New("refused")
	g := &gateReplicator{}
	r.SetReplicator(g)
	done := func(error) {}
	pos := r.log.pos()
	if ok, _, err := r.TryPutOnce([]byte("k"), []byte("v"), RequestID{}, done); ok || err != nil {
		t.Fatalf("a gate that cannot tell: ok %v err %v, want a decline", ok, err)
	}
	g.told, g.admit = true, refused
	if ok, _, err := r.TryPutOnce([]byte("k"), []byte("v"), RequestID{}, done); !ok || !errors.Is(err, refused) {
		t.Fatalf("a gate that refuses: ok %v err %v, want its refusal", ok, err)
	}
	if r.log.pos() != pos {
		t.Fatalf("a declined or refused put moved the log: %d -> %d", pos, r.log.pos())
	}
	g.admit = nil
	if ok, _, err := tryPutTaken(r, []byte("k"), []byte("v"), RequestID{}, done); !ok || err != nil {
		t.Fatalf("a gate that admits: ok %v err %v", ok, err)
	}
	g.told, g.admit = false, refused
	if err := r.Put([]byte("k2"), []byte("v")); !errors.Is(err, refused) {
		t.Fatalf("Put through a refusing gate: %v, want its refusal (AdmitWrite)", err)
	}
}

// tryAckReplicator is a replicator that waits, and a TryAcknowledger
// telling what it was set to; it records the positions it was asked.
type tryAckReplicator struct {
	now   bool
	asked []uint64
	waits atomic.Int32 // WaitReplicated calls
}

func (r *tryAckReplicator) WaitReplicated(uint64) error { r.waits.Add(1); return nil }
func (r *tryAckReplicator) TryAcknowledged(pos uint64) bool {
	r.asked = append(r.asked, pos)
	return r.now
}

// TestTryPutOnceAcknowledgedNow: a replicator that tells a write
// acknowledged at once (TryAcknowledger) has TryPutOnce answer it with
// later false and done never called, asked at the record's end; one
// that does not tell leaves it to the acknowledger; in sync mode a log
// not yet durable leaves it to the acknowledger whatever the replicator
// says.
func TestTryPutOnceAcknowledgedNow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mode  SyncMode
		now   bool
		later bool
	}{
		{"async, told", SyncModeAsync, true, false},
		{"async, not told", SyncModeAsync, false, true},
		{"sync, told, not durable", SyncModeSync, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := smallOpts(vfs.NewMem())
			o.SyncMode, o.L0Pairs = tc.mode, 1<<20
			v := mustOpen(t, o)
			defer v.Close()
			r := mustRegion(t, v, 1)
			rep := &tryAckReplicator{now: tc.now}
			r.SetReplicator(rep)
			dones := make(chan error, 1)
			ok, later, err := tryPutTaken(r, []byte("k"), []byte("v"), RequestID{Client: 1, Seq: 1}, func(err error) { dones <- err })
			if !ok || later != tc.later || err != nil {
				t.Fatalf("ok %v later %v err %v, want later %v", ok, later, err, tc.later)
			}
			if tc.mode == SyncModeAsync && (len(rep.asked) != 1 || rep.asked[0] != r.log.pos()) {
				t.Fatalf("asked at %v, want once at the record's end %d", rep.asked, r.log.pos())
			}
			if later {
				if err := <-dones; err != nil {
					t.Fatal(err)
				}
				return
			}
			// Told at once, the wait (which may block) is not made.
			if n := rep.waits.Load(); n != 0 {
				t.Fatalf("WaitReplicated called %d times for a write told acknowledged at once", n)
			}
			select {
			case err := <-dones:
				t.Fatalf("done called (%v) for a write acknowledged at once", err)
			default:
			}
		})
	}
}

package replication

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/rdma"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
)

// sealSpy is the region's listener in front of a Shipper: it reports each
// segment seal before the shipper handles it, and each writer that waits
// for a seal because a backup has not freed the buffer half.
type sealSpy struct {
	*Shipper
	sealed  chan engine.LogSeal
	waiting chan struct{}
}

func (s *sealSpy) LogSealed(e engine.LogSeal) {
	s.sealed <- e
	s.Shipper.LogSealed(e)
}

func (s *sealSpy) WaitSeal() {
	s.Shipper.mu.Lock()
	blocked := !s.Shipper.halfFreeLocked()
	s.Shipper.mu.Unlock()
	if blocked {
		select {
		case s.waiting <- struct{}{}:
		default:
		}
	}
	s.Shipper.WaitSeal()
}

// dropLogged is the message a stream logs when it drops a backup.
const dropLogged = "backup dropped from the region's replica set"

// TestHungBackupLeavesMirrorBeforeSwitch: a backup hung on the flush of a
// sealed segment S (its buffer half the only copy of S it has: its copy
// still counts as complete) while the next segment S+1 fills and seals, so
// the switch to S+2, which reuses S's half, waits for it. The watchdog
// drops it: no WRITE may reach that half before the backup left the mirror
// — else S+2's marker and records overwrite S in the hung backup's half,
// and the backup, resuming with the cancelled flush of S still in its ring
// (a stopped process's commands are applied when it resumes), adopts the
// overwritten bytes as S and, promoted after the primary failed (before
// the master published the group without it), has lost S's acknowledged
// writes; or, the flush never reaching it, is promoted with S+1 and S+2
// in its halves and S nowhere. Either way (resumes, flush-lost), the
// promoted backup must hold every acknowledged write.
//
// The interleaving is forced, not raced for: the drop's log line is held
// until the writer waiting for the switch has either posted into the half
// (the bug) or returned (the switch went on only once the backup had left
// the mirror). With the bug, the log line sat between the stream's mark of
// the backup as dead (which released the switch) and Mirror.Drop.
func TestHungBackupLeavesMirrorBeforeSwitch(t *testing.T) {
	for _, resumes := range []bool{true, false} {
		name := "resumes"
		if !resumes {
			name = "flush-lost"
		}
		t.Run(name, func(t *testing.T) { testHungBackupLeavesMirrorBeforeSwitch(t, resumes) })
	}
}

func testHungBackupLeavesMirrorBeforeSwitch(t *testing.T, resumes bool) {
	var (
		violated  atomic.Bool
		violation = make(chan struct{})
		vOnce     sync.Once
		written   = make(chan struct{}) // the writer stopped
		held      atomic.Bool           // the drop's log line was held once
	)
	hook := zap.Hooks(func(e zapcore.Entry) error {
		if e.Message != dropLogged || held.Swap(true) {
			return nil
		}
		select {
		case <-violation:
		case <-written:
		case <-time.After(10 * time.Second):
			t.Error("the writer blocked in the switch neither wrote into the hung backup's half nor returned")
		}
		return nil
	})
	r := newHungRig(t, true, 1, func(c *ShipperConfig) {
		c.Log = zaptest.NewLogger(t, zaptest.WrapOptions(hook))
	})
	g := r.g
	if err := g.pr.Compact(); err != nil { // L0 empty: the writes below start no compaction
		t.Fatal(err)
	}
	r.quiet()
	spy := &sealSpy{Shipper: g.shipper, sealed: make(chan engine.LogSeal, 16), waiting: make(chan struct{}, 1)}
	g.pr.SetListener(spy)
	// Every put is acknowledged and recorded, each in a record of its own.
	var acked sync.Map
	next := 0
	put := func() error {
		k := fmt.Sprintf("ow%04d", next)
		v := bytes.Repeat([]byte{byte('a' + next%26)}, 6000)
		next++
		if err := g.pr.Put([]byte(k), v); err != nil {
			return fmt.Errorf("put %s: %w", k, err)
		}
		acked.Store(k, v)
		return nil
	}
	// Fill the tail until it seals (every backup flushes it): segment S,
	// the next one, starts with this test's records.
	for sealed := false; !sealed; {
		if err := put(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-spy.sealed:
			sealed = true
		default:
		}
	}
	r.quiet()
	r.tick(0)
	r.link.stalled.Store(true) // b1 takes no command from here on

	// One writer fills S and S+1.
	stop := make(chan struct{})
	go func() {
		defer close(written)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := put(); err != nil {
				t.Logf("%v (not acknowledged)", err)
				return
			}
		}
	}()
	s := <-spy.sealed // segment S
	var flushS *Command
	select {
	case flushS = <-r.link.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the flush of the sealed segment did not reach b1")
	}
	if flushS.Kind != CmdFlush || !flushS.Sealed || flushS.Segment != s.Segment || flushS.Seq != s.Seq {
		t.Fatalf("b1 holds %s of segment %d (seq %d, sealed %v), want the sealed flush of segment %d (seq %d)",
			flushS.Kind, flushS.Segment, flushS.Seq, flushS.Sealed, s.Segment, s.Seq)
	}
	half := uint64(flushS.Half) * mirrorSeg
	r.qp.watch(func(wr rdma.WriteWR) {
		if wr.RemoteOff < half+mirrorSeg && wr.RemoteOff+uint64(wr.Len) > half {
			violated.Store(true)
			vOnce.Do(func() { close(violation) })
		}
	})
	// S+1 fills: the writer waits (engine.SealGate) for b1's flush of S
	// before it seals S+1 and switches to S+2, in S's half.
	select {
	case <-spy.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not wait for b1's flush of the sealed segment")
	}
	close(stop)

	r.hangUntilDropped("its flush of a sealed segment completing")
	select {
	case <-written:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer still waits after b1 was dropped")
	}
	if violated.Load() {
		t.Errorf("a WRITE reached b1's buffer half %d, which holds segment %d whose flush b1 never completed, before b1 left the mirror",
			flushS.Half, s.Segment)
	}

	// The primary fails; b1 resumes (with the cancelled flush in its ring,
	// or without it) and is promoted: it must hold every acknowledged
	// write.
	model := map[string][]byte{}
	acked.Range(func(k, v any) bool { model[k.(string)] = v.([]byte); return true })
	g.failPrimary()
	rep := g.reps[1]
	if resumes {
		if err := rep.Handle(flushS); err != nil {
			t.Fatalf("b1 resuming: its flush of segment %d: %v", s.Segment, err)
		}
	}
	if _, complete := rep.Report(4); !complete {
		t.Fatal("b1 reports its copy incomplete")
	}
	np, err := rep.Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "b1 promoted", np, model)
}

package replication

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/retry"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
)

// TestTryPutOnceHeldMirror: while another goroutine holds the mirror's
// lock (a waiter posting to a slow backup), a put that must not wait is
// declined with nothing appended and the stream's TryAdmitWrite cannot
// tell; once the lock is free the same put is taken on the caller's
// goroutine and, its WRITEs completing as they are posted (loopback),
// acknowledged there: both backups hold it when TryPutOnce returns.
func TestTryPutOnceHeldMirror(t *testing.T) {
	g := newReplGroup(t, 1<<20, []Mode{SendIndex, SendIndex}, nil)
	before, _ := g.pr.LogTail()
	noDone := func(err error) { t.Errorf("done called (%v) for a put acknowledged at once", err) }
	id := engine.RequestID{Client: 9, Seq: 1}

	g.mirror.mu.Lock()
	if told, _ := g.shipper.TryAdmitWrite(); told {
		t.Fatal("TryAdmitWrite told with the mirror's lock held")
	}
	ok, _, err := g.pr.TryPutOnce([]byte("k"), []byte("v"), id, noDone)
	after, _ := g.pr.LogTail()
	g.mirror.mu.Unlock()
	if ok || err != nil {
		t.Fatalf("with the mirror's lock held: ok %v err %v, want a decline", ok, err)
	}
	if after.Offset != before.Offset || after.Segment != before.Segment {
		t.Fatal("a declined put was appended")
	}

	ok, later, err := tryPutTaken(g.pr, []byte("k"), []byte("v"), id, noDone)
	if !ok || later || err != nil {
		t.Fatalf("with the mirror free: ok %v later %v err %v, want taken and acknowledged at once", ok, later, err)
	}
	tail, _ := g.pr.LogTail()
	if !g.mirror.Acked(Pos{gen: g.mirror.Tail().gen, end: tail.Offset}) {
		t.Fatal("acknowledged before every backup held the record")
	}
	if !g.mirror.mu.TryLock() {
		t.Fatal("the mirror's lock is still held after the put")
	}
	g.mirror.mu.Unlock()
}

// TestTryPutOnceLaterWhileWritePending: a put whose WRITE a backup has
// not completed is taken but not acknowledged on the trying goroutine:
// the region's acknowledger reports it once the completion arrives, not
// before.
func TestTryPutOnceLaterWhileWritePending(t *testing.T) {
	r := newHungRig(t, false, 0)
	// The rig's writes may have left its 64-pair L0 full; a put that must
	// not wait declines then (the freeze is a waiting writer's), every
	// time. Compacted, L0 has room for the put under test.
	if err := r.g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	r.qp.hold()
	dones := make(chan error, 1)
	id := engine.RequestID{Client: 9, Seq: 1}
	ok, later, err := tryPutTaken(r.g.pr, []byte("k"), []byte("v"), id, func(err error) { dones <- err })
	if !ok || !later || err != nil {
		t.Fatalf("with b1's WRITE pending: ok %v later %v err %v, want taken and acknowledged later", ok, later, err)
	}
	for deadline := time.Now().Add(5 * time.Second); r.qp.outstanding() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the put's WRITE to b1 was never posted")
		}
	}
	select {
	case err := <-dones:
		t.Fatalf("acknowledged (%v) before b1 completed the WRITE", err)
	case <-time.After(50 * time.Millisecond):
	}
	// A read on the spinner may not return it yet either (ReplicatedProbe).
	end := logEnd(t, r.g.pr)
	if r.g.shipper.Replicated(end) {
		t.Fatal("Replicated with b1's WRITE pending")
	}
	if _, ok, err := tryGetDeclined(r.g.pr, []byte("k")); ok || err != nil {
		t.Fatalf("TryGet of the pending put: ok %v err %v, want declined", ok, err)
	}
	for r.qp.outstanding() > 0 {
		r.qp.completeOne(t)
	}
	select {
	case err := <-dones:
		if err != nil {
			t.Fatalf("acknowledged with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not acknowledged after b1 completed the WRITE")
	}
	if !r.g.shipper.Replicated(end) {
		t.Fatal("not Replicated once both backups completed the WRITE")
	}
	if v, ok, err := tryGetAnswered(r.g.pr, []byte("k")); !ok || err != nil || string(v) != "v" {
		t.Fatalf("TryGet of the acknowledged put: %q ok %v err %v", v, ok, err)
	}
	r.g.mirror.mu.Lock()
	held := r.g.shipper.Replicated(end)
	r.g.mirror.mu.Unlock()
	if held {
		t.Fatal("Replicated told with the mirror's lock held")
	}
}

// TestTryPutOnceReplicatedContent: writers that try every put without
// waiting first (as a ring server's spinner does, falling back to PutOnce
// on a decline) race plain writers across segment switches and
// compactions of a 64-pair L0; every put acknowledged is on both
// Send-Index backups, which end identical to the primary, and most of
// the tried puts were taken on the trying goroutine.
func TestTryPutOnceReplicatedContent(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 41))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	const writers, ops, nkeys = 4, 1500, 2400
	var taken, declined [writers]int
	var dones [writers]chan error
	for w := range dones {
		dones[w] = make(chan error, 1)
	}
	model := g.writeOps(rng, writers, ops, nkeys, func(w, i int, r *rand.Rand, k []byte) ([]byte, error) {
		v := bytes.Repeat(fmt.Appendf(nil, "%d.%d.", w, i), 1+r.IntN(40))
		id := engine.RequestID{Client: uint64(w + 1), Seq: uint64(i + 1), Ack: uint64(i + 1)}
		if w%2 == 1 { // plain writers
			_, err := g.pr.PutOnce(k, v, id)
			return v, err
		}
		ok, later, err := g.pr.TryPutOnce(k, v, id, func(err error) { dones[w] <- err })
		switch {
		case !ok:
			declined[w]++
			_, err = g.pr.PutOnce(k, v, id)
		case later:
			taken[w]++
			err = <-dones[w]
		default:
			taken[w]++
		}
		return v, err
	})
	tk, dc := taken[0]+taken[2], declined[0]+declined[2]
	t.Logf("tried puts: %d taken, %d declined; %d compactions", tk, dc, g.pv.Stats().Compactions)
	if tk < (tk+dc)/2 {
		t.Fatalf("only %d of %d tried puts were taken without waiting", tk, tk+dc)
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	checkContent(t, "primary", g.pr, model)
	for i, r := range g.reps {
		checkContent(t, fmt.Sprintf("backup %d", i), copyOf(r), model)
	}
	g.stopAndCompare(model, g.bvs, "b0", "b1")
}

// TestMirrorTryHold: TryHold fails while another goroutine holds the
// mirror's lock; held, AppendHeld appends without taking it, and Release
// lets it go.
func TestMirrorTryHold(t *testing.T) {
	m, _ := newTestMirror(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("th%d", loopAddrs) }, 2)
	m.mu.Lock()
	if m.TryHold() {
		t.Fatal("TryHold with the lock held elsewhere")
	}
	m.mu.Unlock()
	if !m.TryHold() {
		t.Fatal("TryHold with the lock free")
	}
	rec := bytes.Repeat([]byte{5}, 100)
	pos, err := m.AppendHeld(engine.SegmentHeaderSize, rec)
	if err != nil {
		t.Fatal(err)
	}
	m.Release()
	if got := m.Tail(); got != pos { // Tail takes the lock: it was let go
		t.Fatalf("tail %+v after AppendHeld, want %+v", got, pos)
	}
	if !bytes.Equal(m.staging.Bytes()[engine.SegmentHeaderSize:engine.SegmentHeaderSize+100], rec) {
		t.Fatal("AppendHeld did not copy the record into the staging image")
	}
}

// TestMirrorTryHeldPostsOnlyImmediate: where every backup's WRITEs
// complete as they are posted (loopback, shm) TryHeld posts a record just
// appended and finds it held; over tcp, whose posts may wait, it posts
// nothing and tells the record not held until Wait posts it.
func TestMirrorTryHeldPostsOnlyImmediate(t *testing.T) {
	for name, tc := range transports(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := newTestMirror(t, tc.tr, tc.addr, 2)
			pos, err := m.Append(engine.SegmentHeaderSize, bytes.Repeat([]byte{6}, 100))
			if err != nil {
				t.Fatal(err)
			}
			held, c, told := m.TryHeld(pos, true, nil)
			if !told || c.live != 2 || c.outside != 2 || c.dropped {
				t.Fatalf("TryHeld told %v census %+v", told, c)
			}
			m.mu.Lock()
			posted := m.posted
			m.mu.Unlock()
			if name == "tcp" {
				if held || posted != 0 {
					t.Fatalf("over tcp: held %v, %d bytes posted, want neither", held, posted)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := m.Wait(ctx, pos); err != nil {
					t.Fatal(err)
				}
				held, _, told = m.TryHeld(pos, true, nil)
				if !told || !held {
					t.Fatalf("over tcp after Wait: held %v told %v", held, told)
				}
				return
			}
			if !held || posted != pos.end {
				t.Fatalf("over %s: held %v, posted to %d, want held and posted to %d", name, held, posted, pos.end)
			}
		})
	}
}

// TestTryAcknowledgedAgreesWithWait: in every acknowledgement rule of a
// stream (MinCopies met or not, a strict stream's drop, only joining
// backups: the primary must be durable), TryAcknowledged tells a write
// acknowledged only where WaitAcknowledged returns nil, and Replicated
// only where WaitReplicated does.
func TestTryAcknowledgedAgreesWithWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		min       int
		joining   []string
		strict    bool
		drop      bool
		wantAck   bool // WaitAcknowledged nil
		wantRepl  bool // WaitReplicated nil
		syncFirst bool // the primary's own fdatasync decides: TryAcknowledged false until it
	}{
		{name: "two backups", min: 1, wantAck: true, wantRepl: true},
		{name: "min_copies 3 met", min: 3, wantAck: true, wantRepl: true},
		{name: "min_copies 3, one dropped", min: 3, drop: true, wantAck: false, wantRepl: true},
		{name: "strict, one dropped", min: 1, strict: true, drop: true, wantAck: false, wantRepl: false},
		{name: "only joining backups", min: 1, joining: []string{"b0", "b1"}, wantAck: true, wantRepl: true, syncFirst: true},
		{name: "min_copies 2, one joining", min: 2, joining: []string{"b1"}, wantAck: true, wantRepl: true},
		{name: "min_copies 3, one joining", min: 3, joining: []string{"b1"}, wantAck: false, wantRepl: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newReplGroup(t, 1<<20, []Mode{SendIndex, SendIndex}, nil)
			g.shipper.Close()
			g.mirror.Close()
			g.minCopies, g.joining, g.strict = tc.min, tc.joining, tc.strict
			g.follow(g.pr, 3, g.reps, nil)
			if err := g.pr.Compact(); err != nil { // the primary durable up to here
				t.Fatal(err)
			}
			// A record appended through TryPutOnce's path, whose
			// acknowledgement is the question; a drop comes after its
			// admission, between its append and its acknowledgement.
			s := g.shipper
			ok, _, err := tryPutTaken(g.pr, []byte("k"), []byte("v"), engine.RequestID{}, func(error) {})
			if !ok && err == nil {
				t.Fatal("the put was never taken")
			}
			if err != nil { // refused at admission: nothing to compare
				if tc.wantAck {
					t.Fatalf("refused (%v) where WaitAcknowledged admits", err)
				}
				return
			}
			if tc.drop {
				g.mirror.Drop("b1", fmt.Errorf("test: b1 dropped"))
			}
			end := logEnd(t, g.pr)
			tryAck, tryRepl := s.TryAcknowledged(end), s.Replicated(end)
			if tc.syncFirst && (tryAck || tryRepl) && !g.pr.Synced(end) {
				t.Fatalf("told (ack %v, replicated %v) before the primary is durable, with only joining backups", tryAck, tryRepl)
			}
			waitAck := s.WaitAcknowledged(end)
			waitRepl := s.WaitReplicated(end)
			if (waitAck == nil) != tc.wantAck || (waitRepl == nil) != tc.wantRepl {
				t.Fatalf("WaitAcknowledged %v, WaitReplicated %v; want nil %v, %v", waitAck, waitRepl, tc.wantAck, tc.wantRepl)
			}
			if tryAck && waitAck != nil {
				t.Fatalf("TryAcknowledged true where WaitAcknowledged returns %v", waitAck)
			}
			if tryRepl && waitRepl != nil {
				t.Fatalf("Replicated true where WaitReplicated returns %v", waitRepl)
			}
			// Once the waits returned nil, nothing is left to wait for: the
			// probes tell so too.
			if waitAck == nil && !s.TryAcknowledged(end) {
				t.Fatal("TryAcknowledged false after WaitAcknowledged returned nil")
			}
			if waitRepl == nil && !s.Replicated(end) {
				t.Fatal("Replicated false after WaitReplicated returned nil")
			}
		})
	}
}

// tryGetAnswered is r.TryGet retried while it declines, at most 1000 times
// a millisecond apart: a decline may come from the region's or its log's
// lock held for a moment by a background goroutine (a flush check, a
// compaction's install, a sync), which TryGet does not wait for.
func tryGetAnswered(r *engine.Region, k []byte) (v []byte, ok bool, err error) {
	retry.Until(1000, time.Millisecond, func() bool {
		v, ok, err = r.TryGet(k)
		return ok
	})
	return v, ok, err
}

// tryGetDeclined tries r.TryGet 20 times, 100 µs apart: ok false and no
// error if every try declined, else the first answer. A lock held for a
// moment elsewhere cannot make a decline that should not be one pass: the
// key would be answered on some try.
func tryGetDeclined(r *engine.Region, k []byte) (v []byte, ok bool, err error) {
	if !retry.Until(20, 100*time.Microsecond, func() bool {
		v, ok, err = r.TryGet(k)
		return ok || err != nil
	}) {
		return nil, false, nil
	}
	return v, ok, err
}

// tryPutTaken retries r.TryPutOnce, a millisecond apart and at most 1000
// times, while it declines: the mirror's and the region's own goroutines
// hold their locks now and then, and a decline appends nothing, so a
// retry is the same put.
func tryPutTaken(r *engine.Region, k, v []byte, id engine.RequestID, done func(error)) (ok, later bool, err error) {
	retry.Until(1000, time.Millisecond, func() bool {
		ok, later, err = r.TryPutOnce(k, v, id, done)
		return ok || err != nil
	})
	return ok, later, err
}

package replication

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
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

	ok, later, err := g.pr.TryPutOnce([]byte("k"), []byte("v"), id, noDone)
	for i := 0; !ok && err == nil && i < 1000; i++ { // the mirror's own goroutines hold it now and then
		ok, later, err = g.pr.TryPutOnce([]byte("k"), []byte("v"), id, noDone)
	}
	if !ok || later || err != nil {
		t.Fatalf("with the mirror free: ok %v later %v err %v, want taken and acknowledged at once", ok, later, err)
	}
	tail, _ := g.pr.LogTail()
	if !g.mirror.Acked(Pos{gen: g.mirror.Tail().gen, end: tail.Offset}) {
		t.Fatal("acknowledged before every backup held the record")
	}
	if g.mirror.held.Load() || !g.mirror.mu.TryLock() {
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
	r.qp.hold()
	dones := make(chan error, 1)
	id := engine.RequestID{Client: 9, Seq: 1}
	ok, later, err := r.g.pr.TryPutOnce([]byte("k"), []byte("v"), id, func(err error) { dones <- err })
	for i := 0; !ok && err == nil && i < 1000; i++ {
		ok, later, err = r.g.pr.TryPutOnce([]byte("k"), []byte("v"), id, func(err error) { dones <- err })
	}
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
	seeds := make([]uint64, writers)
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	models := make([]map[string][]byte, writers)
	var taken, declined [writers]int
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seeds[w], 1))
			m := map[string][]byte{}
			dones := make(chan error, 1)
			for i := range ops {
				k := fmt.Appendf(nil, "k%06d", r.IntN(nkeys/writers)*writers+w)
				v := bytes.Repeat(fmt.Appendf(nil, "%d.%d.", w, i), 1+r.IntN(40))
				id := engine.RequestID{Client: uint64(w + 1), Seq: uint64(i + 1), Ack: uint64(i + 1)}
				if w%2 == 1 { // plain writers
					if _, err := g.pr.PutOnce(k, v, id); err != nil {
						errs <- err
						return
					}
					m[string(k)] = v
					continue
				}
				ok, later, err := g.pr.TryPutOnce(k, v, id, func(err error) { dones <- err })
				switch {
				case !ok:
					declined[w]++
					_, err = g.pr.PutOnce(k, v, id)
				case later:
					taken[w]++
					err = <-dones
				default:
					taken[w]++
				}
				if err != nil {
					errs <- err
					return
				}
				m[string(k)] = v
			}
			models[w] = m
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	model := map[string][]byte{}
	for _, m := range models {
		for k, v := range m {
			model[k] = v
		}
	}
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

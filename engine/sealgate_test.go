package engine

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// sealGateListener is a listener with a SealGate, shaped like replication's
// Shipper: after every seal the next one must wait until the test opens
// the gate (the backups freed the buffer half), and a LogSealed that finds
// the gate shut waits for it there, under the region's lock, counting
// the stall: the fallback the engine's admission must make unused.
type sealGateListener struct {
	NopListener
	ready   atomic.Bool
	open    chan struct{} // closed by the test: ready again
	waits   atomic.Int32  // WaitSeal calls
	stalls  atomic.Int32  // LogSealed calls that found the gate shut
	seals   atomic.Int32
	waiting chan struct{} // receives when WaitSeal starts waiting
}

func newSealGateListener() *sealGateListener {
	g := &sealGateListener{open: make(chan struct{}), waiting: make(chan struct{}, 16)}
	g.ready.Store(true)
	return g
}

func (g *sealGateListener) SealReady() bool { return g.ready.Load() }

func (g *sealGateListener) WaitSeal() {
	g.waits.Add(1)
	g.waiting <- struct{}{}
	<-g.open
	g.ready.Store(true)
}

func (g *sealGateListener) LogSealed(LogSeal) {
	if !g.ready.Load() {
		g.stalls.Add(1)
		<-g.open
	}
	g.seals.Add(1)
	g.ready.Store(false)
}

// TestSealWaitsForGateWithoutRegionLock: a write whose record seals the
// log's tail while the listener's SealGate is shut waits for the gate
// without the region's lock, so reads of the region go on; LogSealed is
// never called with the gate shut. The segments are the default 2 MiB:
// the seals are the ones users' writes cause.
func TestSealWaitsForGateWithoutRegionLock(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.SegmentSize, o.L0Pairs = DefaultSegmentSize, 1<<20
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	if err := r.Put([]byte("probe"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	g := newSealGateListener()
	r.SetListener(g)
	val := bytes.Repeat([]byte("x"), 4000)
	done := make(chan error, 1)
	go func() {
		// Through two seals: the first finds the gate open, the second
		// shut (the first seal shut it).
		for i := 0; g.seals.Load() < 2 && i < 10_000; i++ {
			if err := r.Put(key(i), val); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case <-g.waiting:
	case err := <-done:
		t.Fatalf("the writes ended (err %v) without waiting for the shut gate (seals %d)", err, g.seals.Load())
	case <-time.After(30 * time.Second):
		t.Fatal("no write waited for the gate in 30 s")
	}
	// The writer waits for the gate: reads of the region must not.
	for i := range 100 {
		got := make(chan error, 1)
		go func() {
			_, err := r.Get([]byte("probe"))
			got <- err
		}()
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			close(g.open)
			t.Fatalf("read %d blocked for 5 s while a write waited for the seal gate", i)
		}
	}
	close(g.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := g.stalls.Load(); n != 0 {
		t.Fatalf("LogSealed called %d times with the gate shut", n)
	}
	if st := v.Stats(); st.SealWaits == 0 {
		t.Fatalf("Stats.SealWaits = 0 after a write waited for the gate")
	}
}

// TestFreezeWaitsForGate: an L0 freeze appends the request table's
// checkpoint, which may seal the tail, so with the gate shut the write
// that freezes waits for it (without the lock) before freezing.
func TestFreezeWaitsForGate(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 8
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	g := newSealGateListener()
	g.ready.Store(false)
	r.SetListener(g)
	for i := range o.L0Pairs {
		if err := r.Put(key(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- r.Put(key(100), []byte("v")) }()
	select {
	case <-g.waiting:
	case err := <-done:
		t.Fatalf("the write that froze L0 did not wait for the shut gate (err %v)", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the write that froze L0 neither waited nor returned in 30 s")
	}
	if _, err := r.Get(key(0)); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if g.waits.Load() != 1 {
		t.Fatalf("WaitSeal called %d times, want 1", g.waits.Load())
	}
}

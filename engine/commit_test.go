package engine

import (
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// gate is a Replicator whose log is replicated up to what the test
// releases.
type gate struct {
	mu   sync.Mutex
	cond *sync.Cond
	upto uint64
}

func newGate() *gate {
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *gate) WaitReplicated(pos uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.upto < pos {
		g.cond.Wait()
	}
	return nil
}

func (g *gate) release(pos uint64) {
	g.mu.Lock()
	g.upto = pos
	g.cond.Broadcast()
	g.mu.Unlock()
}

// TestReadWaitsForReplication: a Get or Scan that finds a write in L0
// returns only once the write is replicated (a failover could otherwise
// take back a value a reader saw), and then returns it.
func TestReadWaitsForReplication(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	if err := r.Put(key(1), []byte("old")); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	g.release(r.log.pos()) // what is there is replicated
	r.SetReplicator(g)
	put := make(chan error, 1)
	go func() { put <- r.Put(key(1), []byte("new")) }()
	deadline := time.Now().Add(5 * time.Second)
	for r.log.pos() == g.upto && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // until the put is appended (in L0)
	}
	got := make(chan string, 2)
	go func() {
		val, err := r.Get(key(1))
		if err != nil {
			t.Error(err)
		}
		got <- string(val)
	}()
	go func() {
		it := r.Scan(key(1), key(2))
		defer it.Close()
		if it.Next() {
			got <- string(it.Value())
		} else {
			t.Error(it.Err())
			got <- ""
		}
	}()
	select {
	case val := <-got:
		t.Fatalf("a read returned %q before the write was replicated", val)
	case <-time.After(100 * time.Millisecond):
	}
	g.release(r.log.pos())
	for range 2 {
		if val := <-got; val != "new" {
			t.Fatalf("read %q after replication, want new", val)
		}
	}
	if err := <-put; err != nil {
		t.Fatal(err)
	}
}

// probeGate is a gate that answers Replicated (engine.ReplicatedProbe).
type probeGate struct{ *gate }

func (g probeGate) Replicated(pos uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.upto >= pos
}

// TestTryGetNeverWaits: TryGet answers an L0 hit only once the write is
// replicated (as Get would return it), reports ok false meanwhile instead
// of waiting, and with a Replicator that is no probe always defers an L0
// hit to Get; keys below L0 and missing keys are answered.
func TestTryGetNeverWaits(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	if err := r.Put(key(1), []byte("old")); err != nil {
		t.Fatal(err)
	}
	if val, ok, err := tryGetAnswered(r, key(1)); err != nil || !ok || string(val) != "old" {
		t.Fatalf("no replicator: TryGet = %q, %v, %v; want old", val, ok, err)
	}
	g := newGate()
	g.release(r.log.pos())
	r.SetReplicator(probeGate{g})
	if val, ok, err := tryGetAnswered(r, key(1)); err != nil || !ok || string(val) != "old" {
		t.Fatalf("replicated: TryGet = %q, %v, %v; want old", val, ok, err)
	}
	if _, ok, err := tryGetAnswered(r, key(7)); !ok || err != ErrNotFound {
		t.Fatalf("missing key: TryGet ok %v err %v; want ErrNotFound", ok, err)
	}
	put := make(chan error, 1)
	go func() { put <- r.Put(key(1), []byte("new")) }()
	deadline := time.Now().Add(5 * time.Second)
	for r.log.pos() == g.upto && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // until the put is appended (in L0)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if val, ok, err := tryGetDeclined(r, key(1)); ok || err != nil || val != nil {
			t.Errorf("unreplicated L0 hit: TryGet = %q, %v, %v; want ok false", val, ok, err)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("TryGet waited for replication")
	}
	g.release(r.log.pos())
	if val, ok, err := tryGetAnswered(r, key(1)); err != nil || !ok || string(val) != "new" {
		t.Fatalf("after replication: TryGet = %q, %v, %v; want new", val, ok, err)
	}
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	// A Replicator that cannot tell without waiting: every L0 hit is
	// Get's.
	r.SetReplicator(g)
	if _, ok, err := tryGetDeclined(r, key(1)); ok || err != nil {
		t.Fatalf("no probe: TryGet ok %v err %v; want ok false", ok, err)
	}
}

// TestTryGetDeclinesOnHeldLocks: while another goroutine holds the
// region's lock (a writer) or its log's (a writer whose listener waits
// under it, a segment switch's flush), TryGet declines, with ok false
// and nothing else, a key in L0 and a key in a level alike, where Get
// would wait; with the locks free it answers both.
func TestTryGetDeclinesOnHeldLocks(t *testing.T) {
	o := smallOpts(vfs.NewMem())
	o.L0Pairs = 1 << 20
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	if err := r.Put(key(1), []byte("in-level")); err != nil {
		t.Fatal(err)
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := r.Put(key(2), []byte("in-l0")); err != nil {
		t.Fatal(err)
	}
	check := func(state string, wantOK bool) {
		t.Helper()
		for k, want := range map[int]string{1: "in-level", 2: "in-l0"} {
			done := make(chan struct{})
			var val []byte
			var ok bool
			var err error
			go func() {
				defer close(done)
				if wantOK { // a background goroutine may hold a lock a moment
					val, ok, err = tryGetAnswered(r, key(k))
				} else {
					val, ok, err = r.TryGet(key(k))
				}
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: TryGet of key %d waited", state, k)
			}
			switch {
			case err != nil:
				t.Fatalf("%s: TryGet of key %d: %v", state, k, err)
			case ok != wantOK:
				t.Fatalf("%s: TryGet of key %d ok %v, want %v", state, k, ok, wantOK)
			case ok && string(val) != want:
				t.Fatalf("%s: TryGet of key %d = %q, want %q", state, k, val, want)
			case !ok && val != nil:
				t.Fatalf("%s: a declined TryGet returned %q", state, val)
			}
		}
	}
	held := func(state string, lock, unlock func()) {
		lock()
		defer unlock() // also when check fails: the region closes after
		check(state, false)
	}
	check("locks free", true)
	held("region lock held", r.mu.Lock, r.mu.Unlock)
	held("log lock held", r.log.mu.Lock, r.log.mu.Unlock)
	check("locks free again", true)
}

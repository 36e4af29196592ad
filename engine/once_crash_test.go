package engine

import (
	"errors"
	"fmt"
	"math/rand"
	rand2 "math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// onceCrashWorkload runs identified puts of client 1 (seq 1, 2, ...; its
// ack lags 20 behind) among plain writes that fill L0 (compactions), with
// syncs, GC and forced compactions, until the crash. It returns the
// highest seq applied before the last Sync that completed.
func onceCrashWorkload(t *testing.T, fs vfs.FS, c *crashFS, seed int64) (syncedSeq uint64) {
	rng := rand.New(rand.NewSource(seed))
	o := smallOpts(fs)
	o.L0Pairs = 32
	v, err := Open(o)
	if err != nil {
		if c.crashed.Load() {
			return 0
		}
		t.Fatalf("open: %v", err)
	}
	defer v.Close()
	r, err := v.CreateRegion(RegionDesc{ID: 1})
	if err != nil {
		if c.crashed.Load() {
			return 0
		}
		t.Fatalf("create region: %v", err)
	}
	seq := uint64(0)
	for op := 0; op < 1200 && !c.crashed.Load(); op++ {
		k := key(rng.Intn(300))
		switch p := rng.Intn(100); {
		case p < 30:
			seq++
			ack := uint64(1)
			if seq > 20 {
				ack = seq - 20
			}
			if _, err := r.PutOnce(k, fmt.Appendf(nil, "seq%d", seq), RequestID{Client: 1, Seq: seq, Ack: ack}); err != nil {
				if !c.crashed.Load() {
					t.Fatalf("put once: %v", err)
				}
				return syncedSeq
			}
		case p < 90:
			b := make([]byte, 20+rng.Intn(400))
			rng.Read(b)
			if r.Put(k, b) != nil {
				return syncedSeq
			}
		case p < 97:
			crashedBefore := c.crashed.Load()
			if r.Sync() == nil && !crashedBefore && !c.crashed.Load() {
				syncedSeq = seq
			}
		case p < 99:
			r.GC()
		default:
			r.Compact()
		}
	}
	return syncedSeq
}

// TestCrashSweepRequestTable crashes at every k-th file write of the
// workload above and checks that every identified write made durable
// before the crash is still known after recovery: its retry is a
// duplicate (or, below the client's ack, refused as stale), never applied
// again. The checkpoint written at each freeze must be durable before the
// compaction installs its recovery point.
func TestCrashSweepRequestTable(t *testing.T) {
	seed := testSeed(t)
	dry := &crashFS{mem: vfs.NewCrashableMem(), crashAt: -1, rng: rand2.New(rand2.NewPCG(uint64(seed), 1))}
	onceCrashWorkload(t, errorfs.Wrap(dry.mem, dry), dry, seed)
	total := dry.ops.Load()
	points := 200
	if testing.Short() {
		points = 50
	}
	step := max(total/int64(points), 1)
	t.Logf("workload does %d write ops; crashing every %d", total, step)
	checked := 0
	for k := int64(1); k <= total; k += step {
		c := &crashFS{mem: vfs.NewCrashableMem(), crashAt: k, rng: rand2.New(rand2.NewPCG(uint64(seed+k), 1))}
		syncedSeq := onceCrashWorkload(t, errorfs.Wrap(c.mem, c), c, seed)
		c.mu.Lock()
		clone := c.clone
		c.mu.Unlock()
		if clone == nil || syncedSeq == 0 {
			continue
		}
		what := fmt.Sprintf("crash at op %d (seed %d)", k, seed)
		o := smallOpts(clone)
		o.L0Pairs = 32
		v, err := Open(o)
		if err != nil {
			t.Fatalf("%s: reopen: %v", what, err)
		}
		r, ok := v.Region(1)
		if !ok {
			t.Fatalf("%s: region lost", what)
		}
		for s := uint64(1); s <= syncedSeq; s++ {
			applied, err := r.PutOnce([]byte("retry"), []byte("again"), RequestID{Client: 1, Seq: s, Ack: 1})
			if applied || (err != nil && !errors.Is(err, ErrStaleRequest)) {
				t.Fatalf("%s: retry of durable seq %d (of %d): applied %v, %v", what, s, syncedSeq, applied, err)
			}
		}
		if _, err := r.Get([]byte("retry")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: a retry was applied: %v", what, err)
		}
		checked++
		v.Close()
	}
	if checked < points/2 {
		t.Fatalf("only %d crash points checked", checked)
	}
}

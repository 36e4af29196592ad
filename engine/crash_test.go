package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	rand2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// crashFS counts write operations (writes, syncs, creates, ...) on a
// crashable MemFS and, at the crashAt-th, takes a crash clone: the state a
// machine would find after losing power right before that operation.
type crashFS struct {
	mem     *vfs.MemFS
	crashAt int64
	ops     atomic.Int64
	rng     *rand2.Rand
	mu      sync.Mutex
	clone   *vfs.MemFS
	crashed atomic.Bool
}

func (c *crashFS) MaybeError(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	if c.ops.Add(1) == c.crashAt {
		// Flag first: an operation that misses the clone completes after
		// it, so its caller sees the flag and does not count on it.
		c.crashed.Store(true)
		c.mu.Lock()
		c.clone = c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: c.rng.IntN(3) * 50, RNG: c.rng})
		c.mu.Unlock()
	}
	return nil
}

func (c *crashFS) String() string { return fmt.Sprintf("crash at write op %d", c.crashAt) }

// crashWorkload writes, deletes, syncs, compacts and GCs until the crash;
// it returns the state as of the last Sync that completed before the crash
// and, per key, the values written after it (any of which may survive).
//
// With follower set the region is a follower's copy (a Build-Index
// backup's), whose log and levels are written direct through fs's
// OpenDirect (dioFS), and so crash as the rest do.
func crashWorkload(t *testing.T, fs vfs.FS, c *crashFS, seed int64, stats *Stats, follower bool) (synced map[string][]byte, later map[string][][]byte) {
	rng := rand.New(rand.NewSource(seed))
	o := smallOpts(fs)
	o.L0Pairs = 32
	v, err := Open(o)
	if err != nil {
		if c.crashed.Load() {
			return map[string][]byte{}, nil
		}
		t.Fatalf("open: %v", err)
	}
	defer v.Close()
	if stats != nil {
		defer func() { *stats = v.Stats() }()
	}
	r, err := v.CreateRegion(RegionDesc{ID: 1})
	if err != nil {
		if c.crashed.Load() {
			return map[string][]byte{}, nil
		}
		t.Fatalf("create region: %v", err)
	}
	if follower {
		if err := v.SetFollower(1, true); err != nil {
			if c.crashed.Load() {
				return map[string][]byte{}, nil
			}
			t.Fatalf("set follower: %v", err)
		}
	}
	model := map[string][]byte{}
	synced = map[string][]byte{}
	later = map[string][][]byte{}
	for op := 0; op < 1200 && !c.crashed.Load(); op++ {
		k := key(rng.Intn(300))
		switch p := rng.Intn(100); {
		case p < 70:
			b := make([]byte, 20+rng.Intn(400))
			rng.Read(b)
			if r.Put(k, b) != nil {
				return
			}
			model[string(k)] = b
			later[string(k)] = append(later[string(k)], b)
		case p < 85:
			if r.Delete(k) != nil {
				return
			}
			model[string(k)] = nil
			later[string(k)] = append(later[string(k)], nil)
		case p < 97:
			crashedBefore := c.crashed.Load()
			if r.Sync() == nil && !crashedBefore && !c.crashed.Load() {
				synced = make(map[string][]byte, len(model))
				for k, v := range model {
					synced[k] = v
				}
				later = map[string][][]byte{}
			}
		case p < 99:
			r.GC()
		default:
			r.Compact()
		}
	}
	return synced, later
}

// TestCrashSweep crashes at every k-th file write operation of a workload
// that flushes, compacts and garbage-collects, then checks that the
// recovered volume holds every key as of the last successful Sync.
func TestCrashSweep(t *testing.T) { crashSweep(t, false, 520) }

// TestCrashSweepFollowerDirect is TestCrashSweep on a follower, whose log
// flushes, seals and compaction output are written direct.
func TestCrashSweepFollowerDirect(t *testing.T) { crashSweep(t, true, 120) }

func crashSweep(t *testing.T, follower bool, points int) {
	seed := testSeed(t)
	fsOf := func(c *crashFS) vfs.FS {
		if follower {
			return newDioFS(errorfs.Wrap(c.mem, c))
		}
		return errorfs.Wrap(c.mem, c)
	}
	// A dry run counts the workload's write operations.
	dry := &crashFS{mem: vfs.NewCrashableMem(), crashAt: -1, rng: rand2.New(rand2.NewPCG(uint64(seed), 1))}
	var st Stats
	crashWorkload(t, fsOf(dry), dry, seed, &st, follower)
	total := dry.ops.Load()
	if follower && st.DirectBytesWritten == 0 {
		t.Fatal("the follower wrote nothing direct")
	}
	t.Logf("dry run: %d compactions, %d level moves, %d GC-relocated bytes, %d log segments freed", st.Compactions, st.LevelMoves, st.GCRelocated, st.GCFreed)
	if st.Compactions == 0 || st.GCFreed == 0 {
		t.Fatalf("workload does not exercise compaction and GC")
	}
	if testing.Short() {
		points = 100
	}
	step := max(total/int64(points), 1)
	t.Logf("workload does %d write ops; crashing every %d", total, step)
	n := 0
	for k := int64(1); k <= total; k += step {
		n++
		runSeed := seed + k
		c := &crashFS{mem: vfs.NewCrashableMem(), crashAt: k, rng: rand2.New(rand2.NewPCG(uint64(runSeed), 1))}
		synced, later := crashWorkload(t, fsOf(c), c, seed, nil, follower)
		c.mu.Lock()
		clone := c.clone
		c.mu.Unlock()
		if clone == nil {
			continue // the run ended before op k (background timing differs)
		}
		verifyRecovered(t, clone, synced, later, fmt.Sprintf("crash at op %d (seed %d)", k, seed))
	}
	if n < points*24/25 && !testing.Short() {
		t.Fatalf("only %d crash points", n)
	}
}

func verifyRecovered(t *testing.T, fs vfs.FS, synced map[string][]byte, later map[string][][]byte, what string) {
	t.Helper()
	o := smallOpts(fs)
	o.L0Pairs = 32
	v, err := Open(o)
	if err != nil {
		t.Fatalf("%s: reopen: %v", what, err)
	}
	defer v.Close()
	r, ok := v.Region(1)
	if !ok {
		if len(synced) > 0 {
			t.Fatalf("%s: region lost", what)
		}
		return
	}
	for i := 0; i < 300; i++ {
		k := key(i)
		got, err := r.Get(k)
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: get %s: %v", what, k, err)
		}
		if errors.Is(err, ErrNotFound) {
			got = nil
		}
		want, ok := synced[string(k)]
		if ok && bytes.Equal(got, want) || !ok && got == nil {
			continue
		}
		found := false
		for _, l := range later[string(k)] {
			if bytes.Equal(l, got) {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: key %s has %d bytes, synced value %d bytes (present %v)", what, k, len(got), len(want), ok)
		}
	}
	// The recovered volume keeps working.
	for i := 0; i < 100; i++ {
		if err := r.Put(key(1000+i), []byte("after")); err != nil {
			t.Fatalf("%s: put after recovery: %v", what, err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatalf("%s: compact after recovery: %v", what, err)
	}
}

package engine

import (
	"fmt"
	"math/rand"
	rand2 "math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// armedCrash counts write operations on a crashable MemFS once armed and,
// at the at-th, takes a crash clone: what a machine would find after
// losing power right before that operation.
type armedCrash struct {
	mem   *vfs.MemFS
	at    int64 // set before armed
	armed atomic.Bool
	ops   atomic.Int64
	mu    sync.Mutex
	rng   *rand2.Rand
	clone *vfs.MemFS
}

func (c *armedCrash) MaybeError(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite || !c.armed.Load() {
		return nil
	}
	if c.ops.Add(1) == c.at {
		c.mu.Lock()
		c.clone = c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: c.rng.IntN(3) * 50, RNG: c.rng})
		c.mu.Unlock()
	}
	return nil
}

func (c *armedCrash) String() string { return fmt.Sprintf("crash at write op %d", c.at) }

// promoteAt opens the backup volume saved in base, promotes region 1 with
// tail and closes the volume, crashing at write op at (-1: never) of the
// promotion and the close; with direct, the backup's writes go direct
// (dioFS) through the crashing FS. It returns the crash clone (nil if there were
// fewer operations) and the operations counted in the promotion and in
// all.
func promoteAt(t *testing.T, base *vfs.MemFS, o Options, tail *PromoteTail, at int64, seed int64, direct bool) (clone *vfs.MemFS, promoteOps, ops int64) {
	t.Helper()
	c := &armedCrash{mem: base.CrashClone(vfs.CrashCloneCfg{}), at: at, rng: rand2.New(rand2.NewPCG(uint64(seed), uint64(at)))}
	o.FS = errorfs.Wrap(c.mem, c)
	if direct {
		o.FS = newDioFS(o.FS)
	}
	v := mustOpen(t, o)
	c.armed.Store(true)
	if _, err := v.PromoteBackup(1, 2, tail); err != nil {
		t.Fatalf("promote (crash clone at op %d): %v", at, err)
	}
	promoteOps = c.ops.Load()
	if direct && at < 0 && v.Stats().DirectBytesWritten == 0 {
		t.Fatal("the promotion wrote nothing direct")
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	c.armed.Store(false)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clone, promoteOps, c.ops.Load()
}

// TestPromoteBackupCrash crashes at every write operation of a promotion:
// the volume found afterwards checks clean and holds either the backup
// (which then promotes) or the promoted primary at the new epoch, with
// every key.
func TestPromoteBackupCrash(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	bfs := vfs.NewCrashableMem()
	p := newMirrorPair(t, bfs)
	p.write(t, p.pr, rng, 4000)
	p.settle(t)
	p.shortTail(t, rng)
	p.settle(t)
	tail := p.m.tail()
	p.pr.SetListener(nil)
	p.junkFree(t, rng, 3)
	if err := p.pv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.bv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, direct := range []bool{false, true} {
		promoteCrashSweep(t, bfs, p, tail, seed, direct)
	}
}

// promoteCrashSweep is TestPromoteBackupCrash's sweep over the promotion's
// write operations, the backup's writes direct or not.
func promoteCrashSweep(t *testing.T, bfs *vfs.MemFS, p *mirrorPair, tail *PromoteTail, seed int64, direct bool) {
	_, promoteOps, total := promoteAt(t, bfs, p.bo, tail, -1, seed, direct)
	t.Logf("direct %v: a promotion does %d write operations, the close after it %d", direct, promoteOps, total-promoteOps)
	outcomes := map[string]int{}
	for k := int64(1); k <= total; k++ {
		clone, _, _ := promoteAt(t, bfs, p.bo, tail, k, seed, direct)
		if clone == nil {
			continue
		}
		what := fmt.Sprintf("direct %v: crash at op %d of %d (seed %d)", direct, k, total, seed)
		sum := checkVolume(t, clone, "backup", what)
		role := sum.Regions[0].Role
		outcomes[role]++
		o := p.bo
		o.FS = clone
		v := mustOpen(t, o)
		r, _ := v.Region(1)
		_, isBackup := v.Backup(1)
		if isBackup != (role == roleBackup) || isBackup == (r != nil) {
			t.Fatalf("%s: inspector says %s, the volume opens a backup: %v, a primary: %v", what, role, isBackup, r != nil)
		}
		if isBackup {
			var err error
			if r, err = v.PromoteBackup(1, 2, tail); err != nil {
				t.Fatalf("%s: promote again: %v", what, err)
			}
		} else if r.Desc().Epoch != 2 {
			t.Fatalf("%s: primary at epoch %d", what, r.Desc().Epoch)
		}
		checkModel(t, r, p.model, what)
		for i := range 100 {
			if err := r.Put(key(mirrorKeys+i), []byte("after")); err != nil {
				t.Fatalf("%s: put: %v", what, err)
			}
		}
		if err := r.Compact(); err != nil {
			t.Fatalf("%s: compact: %v", what, err)
		}
		if err := v.Close(); err != nil {
			t.Fatal(err)
		}
		checkVolume(t, clone, "backup", what+", promoted and written")
	}
	t.Logf("direct %v: outcomes %v", direct, outcomes)
	if outcomes[roleBackup] == 0 || outcomes["primary"] == 0 {
		t.Fatalf("crashes left only %v", outcomes)
	}
}

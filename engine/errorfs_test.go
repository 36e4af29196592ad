package engine

import (
	"errors"
	"fmt"
	"math/rand"
	rand2 "math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failAt injects errorfs.ErrInjected into the k-th write operation on
// files whose path contains match, and into every later one.
type failAt struct {
	k, n  atomic.Int64
	match string
	fired atomic.Bool
}

func (f *failAt) MaybeError(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite || !strings.Contains(op.Path, f.match) {
		return nil
	}
	if f.n.Add(1) >= f.k.Load() {
		f.fired.Store(true)
		return errorfs.ErrInjected
	}
	return nil
}

func (f *failAt) String() string { return "failAt" }

// TestErrorInjection fails a write or sync of the segment file at random
// points: the error reaches the caller (never a panic), the region refuses
// further writes instead of losing them, and a reopen on a healthy file
// system finds every synced value.
func TestErrorInjection(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewSource(seed))
	for run := 0; run < 40; run++ {
		mem := vfs.NewCrashableMem()
		inj := &failAt{match: dataFileName}
		if run%2 == 1 {
			inj.match = "meta/"
		}
		inj.k.Store(int64(1 + rng.Intn(400)))
		synced, later := errorWorkload(t, errorfs.Wrap(mem, inj), seed+int64(run), inj)
		// Restart as after a process crash (the failed metadata store
		// is abandoned, not closed): a clone keeps written bytes, or with
		// power lost only the synced ones.
		clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100 * (run % 2), RNG: rand2.New(rand2.NewPCG(uint64(seed), uint64(run)))})
		verifyRecovered(t, clone, synced, later, fmt.Sprintf("run %d (match %s, write %d): after injected error", run, inj.match, inj.k.Load()))
	}
}

// errorWorkload runs until the injected error reaches it. An error in the
// segment file must reach a caller before the workload ends; one in the
// metadata store may be absorbed by pebble's own background retries.
func errorWorkload(t *testing.T, fs vfs.FS, seed int64, inj *failAt) (synced map[string][]byte, later map[string][][]byte) {
	sawErr := false
	rng := rand.New(rand.NewSource(seed))
	o := smallOpts(fs)
	o.L0Pairs = 32
	synced, later = map[string][]byte{}, map[string][][]byte{}
	v, err := Open(o)
	if err != nil {
		if !errors.Is(err, errorfs.ErrInjected) && !errors.Is(err, ErrMetadataFailed) {
			t.Fatalf("open: %v", err)
		}
		return synced, later
	}
	defer v.Close()
	defer func() {
		if inj.fired.Load() && !sawErr && inj.match == dataFileName {
			t.Fatalf("injected error at write %d never reached a caller", inj.k.Load())
		}
	}()
	r, err := v.CreateRegion(RegionDesc{ID: 1})
	if err != nil {
		if !errors.Is(err, errorfs.ErrInjected) && !errors.Is(err, ErrMetadataFailed) {
			t.Fatalf("create region: %v", err)
		}
		sawErr = true
		return synced, later
	}
	model := map[string][]byte{}
	check := func(err error) bool {
		if err == nil {
			return false
		}
		if !errors.Is(err, errorfs.ErrInjected) && !errors.Is(err, ErrMetadataFailed) {
			t.Fatalf("error does not wrap the injected one: %v", err)
		}
		sawErr = true
		return true
	}
	for op := 0; op < 1500 && !sawErr; op++ {
		k := key(rng.Intn(300))
		switch p := rng.Intn(100); {
		case p < 70:
			b := make([]byte, 20+rng.Intn(400))
			rng.Read(b)
			later[string(k)] = append(later[string(k)], b)
			if check(r.Put(k, b)) {
				break
			}
			model[string(k)] = b
		case p < 85:
			later[string(k)] = append(later[string(k)], nil)
			if check(r.Delete(k)) {
				return
			}
			model[string(k)] = nil
		case p < 97:
			if check(r.Sync()) {
				return
			}
			synced = make(map[string][]byte, len(model))
			for k, v := range model {
				synced[k] = v
			}
			later = map[string][][]byte{}
		case p < 99:
			if _, err := r.GC(); check(err) {
				return
			}
		default:
			if check(r.Compact()) {
				// A failed background write poisons the region: writes now fail.
				if err := r.Put(key(0), []byte("x")); err == nil {
					t.Fatalf("put succeeded after a failed compaction")
				}
				return
			}
		}
	}
	return
}

// TestReadErrors: an injected read error surfaces from Get and Scan.
func TestReadErrors(t *testing.T) {
	mem := vfs.NewMem()
	var on atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if on.Load() && op.Kind == errorfs.OpFileReadAt && strings.Contains(op.Path, dataFileName) {
			return errorfs.ErrInjected
		}
		return nil
	})
	o := smallOpts(errorfs.Wrap(mem, inj))
	o.CacheBytes = -1
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	for i := 0; i < 500; i++ {
		if err := r.Put(key(i), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	on.Store(true)
	if _, err := r.Get(key(3)); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("get: %v", err)
	}
	it := r.Scan(nil, nil)
	for it.Next() {
	}
	if err := it.Close(); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("scan: %v", err)
	}
	on.Store(false)
	if got, err := r.Get(key(3)); err != nil || string(got) != "value" {
		t.Fatalf("get after errors stop: %q %v", got, err)
	}
}

package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestConcurrent runs writers, readers and scanners at once while
// compactions and automatic GC run; every read must see a value some writer
// wrote for that key, and the end state must match the writers' last puts.
func TestConcurrent(t *testing.T) {
	seed := testSeed(t)
	o := smallOpts(vfs.NewMem())
	o.GCInterval = 5 * time.Millisecond
	o.SyncMode = SyncModeSync
	v := mustOpen(t, o)
	defer v.Close()
	r := mustRegion(t, v, 1)
	const writers, keysPer, rounds = 4, 200, 30
	val := func(w, k, round int) []byte {
		return []byte(fmt.Sprintf("w%d-k%d-r%d-%s", w, k, round, bytes.Repeat([]byte("p"), (k*7+round)%150)))
	}
	wkey := func(w, k int) []byte { return []byte(fmt.Sprintf("w%d-k%05d", w, k)) }
	var wg sync.WaitGroup
	errc := make(chan error, 100)
	report := func(err error) {
		select {
		case errc <- err:
		default: // enough errors to fail already
		}
	}
	stop := make(chan struct{})
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seed + int64(w)))
			for round := 0; round < rounds; round++ {
				for _, k := range rng.Perm(keysPer) {
					var err error
					if round == rounds-1 && k%5 == 0 {
						err = r.Delete(wkey(w, k))
					} else {
						err = r.Put(wkey(w, k), val(w, k, round))
					}
					if err != nil {
						report(err)
						return
					}
				}
			}
		}(w)
	}
	var readers sync.WaitGroup
	for i := 0; i < 3; i++ {
		readers.Add(1)
		go func(i int) {
			defer readers.Done()
			rng := rand.New(rand.NewSource(seed + 100 + int64(i)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				w, k := rng.Intn(writers), rng.Intn(keysPer)
				if i == 0 {
					it := r.Scan(wkey(w, k), wkey(w, k+20))
					for it.Next() {
						if !bytes.HasPrefix(it.Value(), []byte(fmt.Sprintf("w%d-", w))) {
							report(fmt.Errorf("scan %s: foreign value %q", it.Key(), it.Value()))
						}
					}
					if err := it.Close(); err != nil {
						report(err)
					}
					continue
				}
				got, err := r.Get(wkey(w, k))
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					report(err)
					return
				}
				if !bytes.HasPrefix(got, []byte(fmt.Sprintf("w%d-k%d-r", w, k))) {
					report(fmt.Errorf("get %s: foreign value %q", wkey(w, k), got))

				}
			}
		}(i)
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for w := 0; w < writers; w++ {
		for k := 0; k < keysPer; k++ {
			got, err := r.Get(wkey(w, k))
			if k%5 == 0 {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("deleted %s: %v", wkey(w, k), err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, val(w, k, rounds-1)) {
				t.Fatalf("%s: %q %v", wkey(w, k), got, err)
			}
		}
	}
	st := v.Stats()
	t.Logf("compactions %d, gc runs %d, gc freed %d, stall %v", st.Compactions, st.GCRuns, st.GCFreed, st.StallTime)
}

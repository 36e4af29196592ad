package ring

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/testseed"
)

// TestStress: many goroutines share one connection with the smallest
// rings, payloads from empty to the largest a ring takes (so the request
// and reply rings wrap and fill), replies larger than their slot (TOO_SMALL
// retries) and a low in-flight limit, with GOMAXPROCS above the core count
// and goroutines hogging the CPU so copies are preempted midway. Every
// reply must be the request's payload and no message may count as
// malformed. It runs 200 ms per transport; TEBIS_RING_STRESS=<duration>
// runs it that long instead.
func TestStress(t *testing.T) {
	d := 200 * time.Millisecond
	if v := os.Getenv("TEBIS_RING_STRESS"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			t.Fatalf("TEBIS_RING_STRESS=%q: %v", v, err)
		}
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4 * runtime.NumCPU()))
	forEnv(t, func(t *testing.T, e env) {
		seed := testseed.Seed(t)
		s, _ := start(t, e, ServerConfig{Spinners: 2, Workers: 3, QueueDepth: 2, MaxInflight: 4})
		c := dial(t, e, s, ClientConfig{RequestRing: MinRing, ReplyRing: MinRing, ReplyHint: 64, SpinTime: time.Microsecond})
		stop := make(chan struct{})
		var hogs sync.WaitGroup
		for range runtime.NumCPU() {
			hogs.Add(1)
			go func() {
				defer hogs.Done()
				x := 0
				for {
					select {
					case <-stop:
						return
					default:
					}
					for i := range 100000 {
						x += i
					}
				}
			}()
		}
		defer func() { close(stop); hogs.Wait() }()

		max := MaxPayload(MinRing)
		sizes := []int{0, 1, 55, 56, 57, 63, 64, 65, 120, 121, max - 64, max - 1, max}
		end := time.Now().Add(d)
		var calls atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(g)))
				for i := 0; time.Now().Before(end); i++ {
					n := rng.IntN(max + 1)
					if rng.IntN(2) == 0 {
						n = sizes[rng.IntN(len(sizes))]
					}
					p := make([]byte, n)
					for j := range p {
						p[j] = byte(rng.Uint32())
					}
					if n >= 8 {
						binary.LittleEndian.PutUint64(p, uint64(g)<<32|uint64(i))
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					rep, err := c.Call(ctx, Request{Type: typeEcho, Payload: p, ReplySize: rng.IntN(n + 1)})
					cancel()
					if err == nil && !bytes.Equal(rep.Payload, p) {
						err = fmt.Errorf("goroutine %d call %d (%d bytes): reply of %d bytes differs", g, i, n, len(rep.Payload))
					}
					if err != nil {
						errs <- fmt.Errorf("goroutine %d call %d (%d bytes): %w", g, i, n, err)
						return
					}
					calls.Add(1)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		st := s.Stats()
		if st.Malformed != 0 || st.Noops == 0 || calls.Load() == 0 {
			t.Fatalf("%d calls, stats %+v: want no malformed message and ring wraps", calls.Load(), st)
		}
		t.Logf("%d calls, stats %+v", calls.Load(), st)
	})
}

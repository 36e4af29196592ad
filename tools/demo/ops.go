package demo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tebis-go/tebis/tools/bench"
	"github.com/tebis-go/tebis/tools/ycsb"
)

// runOps runs gen's operations on cfg.Threads goroutines, calling do for
// each and timing it, and stops at the first error or when ctx is done.
func runOps(ctx context.Context, cfg Config, gen *ycsb.Generator, desc string, do func(ycsb.Op) (int, error)) (PhaseStats, error) {
	var (
		claimed  atomic.Int64
		bytes    atomic.Int64
		stopped  atomic.Bool
		errMu    sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		histMu   sync.Mutex
		hists    bench.OpHists
	)
	failed := func() error {
		errMu.Lock()
		defer errMu.Unlock()
		return firstErr
	}
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		stopped.Store(true)
	}
	stop := context.AfterFunc(ctx, func() { fail(ctx.Err()) })
	defer stop()
	track := cfg.Progress.Start(desc, gen.Ops())
	start := time.Now()
	for i := range cfg.Threads {
		wg.Go(func() {
			wk := gen.Worker(i)
			var (
				n int64
				h bench.OpHists
			)
			defer func() {
				bytes.Add(n)
				histMu.Lock()
				hists.Merge(&h)
				histMu.Unlock()
			}()
			for !stopped.Load() && claimed.Add(1) <= gen.Ops() {
				op := wk.Next()
				t0 := time.Now()
				moved, err := do(op)
				h.Record(op.Kind, time.Since(t0))
				if err == nil {
					err = wk.Ack(op)
				}
				if err != nil {
					fail(err)
					return
				}
				n += int64(moved)
				track.Add(1)
			}
		})
	}
	wg.Wait()
	st := PhaseStats{Ops: gen.Ops(), Seconds: elapsedSince(start), UserBytes: bytes.Load(), Latency: perKind(&hists)}
	track.Done()
	return st, failed()
}

// Package progress reports the advance of a long operation: a progress bar
// on a terminal, plain periodic lines otherwise.
//
// Contracts: Tracker.Add is safe for concurrent use and costs one atomic
// add (a single goroutine polls the count and renders), so hot loops may
// call it per operation. Done must be called exactly once; nothing is
// written after it returns.
package progress

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Reporter reports an operation's advance: a progress bar when Bar is set (the
// writer is a terminal), else a plain line every Interval. A zero Reporter
// (nil W) reports nothing.
type Reporter struct {
	W        io.Writer
	Bar      bool
	Interval time.Duration // plain-line period; default 5s
}

// Tracker polls a counter the workers bump, so the hot path only does an
// atomic add and the bar's lock is never contended.
type Tracker struct {
	done atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

// Start begins reporting desc, an operation of total steps.
func (p Reporter) Start(desc string, total int64) *Tracker {
	t := &Tracker{stop: make(chan struct{})}
	if p.W == nil {
		return t
	}
	interval := p.Interval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	var bar *progressbar.ProgressBar
	if p.Bar {
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(p.W),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionShowIts(),
			progressbar.OptionSetItsString("ops"),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.W) }),
		)
		interval = 100 * time.Millisecond
	}
	start := time.Now()
	t.wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-t.stop:
				if bar != nil {
					_ = bar.Set64(t.done.Load())
					_ = bar.Finish()
				}
				return
			case <-tick.C:
				n := t.done.Load()
				if bar != nil {
					_ = bar.Set64(n)
					continue
				}
				el := time.Since(start)
				fmt.Fprintf(p.W, "%s: %d/%d ops (%.0f%%), %.0f ops/s, %s elapsed\n",
					desc, n, total, 100*float64(n)/float64(max(total, 1)), float64(n)/el.Seconds(), el.Round(time.Second))
			}
		}
	})
	return t
}

// Add counts n finished steps.
func (t *Tracker) Add(n int64) { t.done.Add(n) }

// Done stops reporting.
func (t *Tracker) Done() {
	close(t.stop)
	t.wg.Wait()
}

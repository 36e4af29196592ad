package rdma

import (
	"context"
	"sync"
	"sync/atomic"
)

// CQ is a completion queue, shared by any number of QPs. Safe for
// concurrent use.
type CQ struct {
	mu     sync.Mutex
	items  []Completion
	queued atomic.Int32  // len(items), readable without mu (spinning pollers)
	notify chan struct{} // capacity 1: something was pushed
}

// NewCQ returns an empty completion queue.
func NewCQ() *CQ { return &CQ{notify: make(chan struct{}, 1)} }

func (c *CQ) push(e Completion) {
	c.mu.Lock()
	c.items = append(c.items, e)
	c.queued.Store(int32(len(c.items)))
	c.mu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Poll moves up to len(dst) completions into dst without blocking.
func (c *CQ) Poll(dst []Completion) int {
	if c.queued.Load() == 0 {
		return 0
	}
	c.mu.Lock()
	n := copy(dst, c.items)
	rest := copy(c.items, c.items[n:])
	clear(c.items[rest:])
	c.items = c.items[:rest]
	c.queued.Store(int32(rest))
	c.mu.Unlock()
	return n
}

// Wait blocks until at least one completion is queued (or ctx ends), then
// polls.
func (c *CQ) Wait(ctx context.Context, dst []Completion) (int, error) {
	for {
		if n := c.Poll(dst); n > 0 {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-c.notify:
		}
	}
}

// Notify is a channel that receives a value after a push; a receiver must
// Poll afterwards (it may find nothing: pushes and polls race).
func (c *CQ) Notify() <-chan struct{} { return c.notify }

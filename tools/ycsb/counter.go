package ycsb

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// ErrAckWindow is returned by Ack when more inserts are outstanding
// (drawn but not acknowledged) than the counter's window holds.
var ErrAckWindow = errors.New("ycsb: too many unacknowledged inserts")

// ackWindow is the number of inserts that may be outstanding at once.
const ackWindow = 1 << 16

// ackCounter is YCSB's AcknowledgedCounterGenerator: Next hands out
// consecutive record numbers; Limit is one past the highest record number
// below which every insert has been acknowledged. Readers choose only
// records below Limit, so they never ask for a record still being written.
type ackCounter struct {
	next   atomic.Int64
	limit  atomic.Int64
	mu     sync.Mutex              // held by whoever advances limit
	window [ackWindow]atomic.Int64 // record n+1 when n is acknowledged, else 0
}

func newAckCounter(start int64) *ackCounter {
	c := &ackCounter{}
	c.next.Store(start)
	c.limit.Store(start)
	return c
}

// Next returns a fresh record number.
func (c *ackCounter) Next() int64 { return c.next.Add(1) - 1 }

// Limit returns the count of records known to be inserted.
func (c *ackCounter) Limit() int64 { return c.limit.Load() }

// Issued returns the number of record numbers handed out, acknowledged or not.
func (c *ackCounter) Issued() int64 { return c.next.Load() }

// Ack marks record n as inserted and advances Limit over any contiguous
// run of acknowledged records. It never blocks: if another goroutine is
// advancing, that goroutine or a later Ack picks n up.
func (c *ackCounter) Ack(n int64) error {
	slot := &c.window[n&(ackWindow-1)]
	if !slot.CompareAndSwap(0, n+1) {
		return fmt.Errorf("%w: record %d", ErrAckWindow, n)
	}
	for c.mu.TryLock() {
		l := c.limit.Load()
		for {
			s := &c.window[l&(ackWindow-1)]
			if s.Load() != l+1 {
				break
			}
			s.Store(0)
			l++
		}
		c.limit.Store(l)
		c.mu.Unlock()
		// An Ack that lost TryLock while we held the lock may have filled
		// slot l after we looked; go round again so it is not stranded.
		if c.window[l&(ackWindow-1)].Load() != l+1 {
			return nil
		}
	}
	return nil
}

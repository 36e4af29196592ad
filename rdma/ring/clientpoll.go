package ring

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// poller watches the reply slots of pending calls: it spins after a reply
// or after a new call that woke it (spinPolicy), then arms the
// doorbell and parks until a new call, a doorbell or a CQ event; not while
// a reply is seen incomplete.
func (c *Client) poller() {
	defer close(c.done)
	var (
		calls []*Call
		cqbuf [16]rdma.Completion
		spin  = newSpinPolicy(c.cfg.SpinTime, time.Now())
		clk   coarseClock
		// deadlines wakes a parked poller at the earliest deadline of the
		// pending calls (CallUntil), armed for Client.armed.
		deadlines = time.NewTimer(time.Hour)
	)
	deadlines.Stop()
	defer deadlines.Stop()
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		now := clk.read()
		calls = c.pendingCalls(calls)
		progressed, arriving := c.scan(calls, now)
		if n := c.cq.Poll(cqbuf[:]); n > 0 {
			c.events(cqbuf[:n])
		}
		if progressed {
			spin.progress(clk.fresh())
			continue
		}
		if len(calls) > 0 && (arriving || spin.spinning(now)) {
			runtime.Gosched()
			continue
		}
		if len(calls) == 0 && !c.parkIdle() {
			continue // a call came since the snapshot
		}
		if len(calls) > 0 {
			c.qp.ReqNotify()
			// Calls may have completed since the snapshot (their slots
			// reused by new calls): scan the pending ones.
			calls = c.pendingCalls(calls)
			p, arriving := c.scan(calls, now)
			if p {
				spin.progress(clk.fresh())
				continue
			}
			if arriving {
				// First seen incomplete just now: its writer may have
				// found the doorbell unarmed, and a malformed reply is
				// never completed. Poll on.
				continue
			}
			// Deadlines mostly grow with later calls: a timer armed for
			// an earlier one fires early, and the scan then re-arms it;
			// a call sent with an earlier one kicks us (send).
			if next := earliestDeadline(calls); !next.IsZero() {
				c.mu.Lock()
				if c.armed.IsZero() || next.Before(c.armed) {
					deadlines.Reset(time.Until(next))
					c.armed = next
				}
				c.mu.Unlock()
			}
		}
		clk.forget()
		select {
		case <-c.stop:
			return
		case <-c.kick:
			spin.woke(time.Now()) // a new call: its reply may come soon
		case <-c.cq.Notify():
		case <-deadlines.C:
			c.mu.Lock()
			c.armed = time.Time{}
			c.mu.Unlock()
		}
	}
}

// earliestDeadline is the earliest deadline of calls not yet expired
// (zero: none).
func earliestDeadline(calls []*Call) time.Time {
	var next time.Time
	for _, call := range calls {
		if !call.until.IsZero() && !call.expired && (next.IsZero() || call.until.Before(next)) {
			next = call.until
		}
	}
	return next
}

// parkIdle marks the poller idle (the next call kicks it) if no call is
// pending, and reports whether it did.
func (c *Client) parkIdle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idle = len(c.bySlot) == 0
	return c.idle
}

// pendingCalls copies the pending calls into buf. Only the poller
// completes a call, so the snapshot stays pending until the poller's next
// scan completes some of them.
func (c *Client) pendingCalls(buf []*Call) []*Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append(buf[:0], c.bySlot...)
}

// events handles completions: a broken connection or a failed WRITE
// breaks the client.
func (c *Client) events(cs []rdma.Completion) {
	for _, e := range cs {
		if e.Op == rdma.OpDisconnect || e.Err != nil {
			c.fail(fmt.Errorf("%v: %w", e.Op, e.Err))
		}
	}
}

// scan checks every pending call's reply slot once, and tells the waiter
// of a call whose deadline passed before now (CallUntil). arriving: a
// reply is still arriving (its header does not verify yet). A call it
// completed may be reused at once (Call's pool): scan reads nothing of it
// afterwards.
func (c *Client) scan(calls []*Call, now time.Time) (progressed, arriving bool) {
	for _, call := range calls {
		ok, err := c.check(call)
		if err != nil {
			c.fail(err)
			return true, false
		}
		progressed = progressed || ok
		arriving = arriving || (!ok && !call.badSince.IsZero())
		if !ok && !call.until.IsZero() && !call.expired && !now.Before(call.until) {
			call.expired = true
			select {
			case call.expire <- struct{}{}:
			default:
			}
		}
	}
	return progressed, arriving
}

// check completes call if its whole reply has arrived.
func (c *Client) check(call *Call) (bool, error) {
	buf := c.repMR.Bytes()
	off := int(call.slot % c.rep.size)
	w := rdma.LoadWord(buf, off+56)
	if w == 0 {
		return false, nil
	}
	h, err := decodeHeader(buf[off:off+HeaderSize], call.slotSize)
	if err != nil {
		// A wrong magic or checksum may mean the rest of the header is
		// still arriving (tcp fills memory as bytes come; on shm the
		// header's first bytes land last, after the whole payload): poll
		// on, without parking, for ArriveWait.
		if (w != magic || errors.Is(err, errChecksum)) && call.badSince.IsZero() {
			call.badSince = time.Now()
			return false, nil
		}
		if (w != magic || errors.Is(err, errChecksum)) && time.Since(call.badSince) < c.cfg.ArriveWait {
			return false, nil
		}
		return false, fmt.Errorf("reply to request %d: %w", call.id, err)
	}
	call.badSince = time.Time{}
	if h.ReqID != call.id || h.Flags&FlagReply == 0 || h.Type != call.Req.Type {
		return false, fmt.Errorf("%w: reply slot of request %d holds id %d type %d flags %#x", ErrMalformed, call.id, h.ReqID, h.Type, h.Flags)
	}
	n := MsgSize(int(h.Len))
	if h.Len > 0 && rdma.LoadWord(buf, off+n-8) != tailMagic^h.ReqID {
		return false, nil
	}
	var payload []byte
	if h.Len > 0 {
		payload = append([]byte(nil), buf[off+HeaderSize:off+HeaderSize+int(h.Len)]...)
	}
	clear(buf[off : off+n])
	c.received.Add(uint64(n))
	c.complete(call, h, payload)
	return true, nil
}

// complete frees the call's ring room and delivers or retries it.
func (c *Client) complete(call *Call, h Header, payload []byte) {
	c.mu.Lock()
	if c.pending[call.id] != call {
		c.mu.Unlock()
		return
	}
	delete(c.pending, call.id)
	for i, p := range c.bySlot {
		if p == call {
			c.bySlot = append(c.bySlot[:i], c.bySlot[i+1:]...)
			break
		}
	}
	c.rep.release(call.slot)
	c.req.releaseTo(call.reqEnd)
	if c.spaceWait {
		close(c.space)
		c.space, c.spaceWait = make(chan struct{}), false
	}
	retry := h.Status == StatusTooSmall && !call.retried
	if retry {
		call.retried = true
		call.Reply.Aux = h.Aux
		c.hint = max(c.hint, int(h.Aux)-HeaderSize)
	}
	c.mu.Unlock()
	if retry {
		// Not on the poller: send may wait for room the poller frees.
		callerDone := call.ctxDone // read before the call can be delivered (and reused)
		go func() {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go func() {
				select {
				case <-callerDone:
					cancel()
				case <-ctx.Done():
				}
			}()
			if err := c.send(ctx, call); err != nil {
				call.Err = err
				deliver(call)
			}
		}()
		return
	}
	call.Reply = Reply{Status: h.Status, Aux: h.Aux, Payload: payload}
	if h.Status == StatusTooSmall || h.Status == StatusUnknownType {
		call.Err = fmt.Errorf("%w: status %d", ErrStatus, h.Status)
	}
	deliver(call)
}

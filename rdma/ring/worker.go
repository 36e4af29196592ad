package ring

import (
	"sync/atomic"
	"time"
)

// stallAfter is how long a worker's handler may run before the requests
// queued behind it go to an idle worker (a handler that says it waits,
// ServerRequest.WillBlock, hands them over at once). Waking a worker for
// every request queued behind a busy one costs a wake-up per request
// where the busy worker would have served it a few microseconds later.
const stallAfter = 50 * time.Microsecond

// workerState is what the spinners see of a worker's running handler.
type workerState struct {
	since   atomic.Int64 // when its handler started (Server.clock; 0: none running)
	blocked atomic.Bool  // its handler said it waits (WillBlock)
}

// clock is nanoseconds on the monotonic clock since the server started
// (never 0 once it started).
func (s *Server) clock() int64 { return int64(time.Since(s.epoch)) + 1 }

// stalled reports whether worker i's running handler waits or has run
// for stallAfter: requests queued behind it should go to an idle worker.
func (s *Server) stalled(i int, now int64) bool {
	w := &s.ws[i]
	if w.blocked.Load() {
		return true
	}
	since := w.since.Load()
	return since != 0 && now-since >= int64(s.cfg.stallAfter)
}

// wakeStealers wakes idle workers to steal n queued requests: as many as
// are idle, less those woken already and not yet stealing (a spinner
// asks again, every few rounds, while the requests wait).
func (s *Server) wakeStealers(n int) {
	for range min(n-int(s.waking.Load()), int(s.idle.Load())) {
		s.waking.Add(1)
		select {
		case s.steal <- struct{}{}:
		default:
			s.waking.Add(-1)
			return
		}
	}
}

// unstick wakes an idle worker for each request queued behind a stalled
// handler, and reports whether requests wait behind a running handler not
// stalled yet while a worker is idle (the spinner must not park: it looks
// again until that handler finishes or stalls, at most stallAfter).
// Spinners call it after every round that queued requests on workers,
// every few other rounds, and before they arm their doorbells and park.
func (s *Server) unstick() (waiting bool) {
	if s.cfg.Inline || s.idle.Load() == 0 {
		return false
	}
	var now int64
	stuck := 0 // requests queued behind stalled handlers
	for i, q := range s.workers {
		if len(q) > 0 && now == 0 {
			now = s.clock()
		}
		switch {
		case len(q) == 0:
		case s.stalled(i, now):
			stuck += len(q)
		case s.ws[i].since.Load() != 0:
			waiting = true
		}
		// (A worker not in a handler serves its queue itself once it
		// runs: the spinner need not watch it.)
	}
	if stuck > 0 {
		s.wakeStealers(stuck)
	}
	return waiting
}

// WillBlock tells the server that the handler is about to wait for other
// goroutines (a group commit, a replication acknowledgement): the
// requests queued behind it go to an idle worker now rather than after
// stallAfter. Only a handler's own goroutine may call it; on a spinner
// (a ShortFunc, an Inline server) it does nothing.
func (r *ServerRequest) WillBlock() {
	if r.s == nil {
		return
	}
	r.s.ws[r.w].blocked.Store(true)
	r.s.wakeStealers(len(r.s.workers[r.w]))
}

// worker serves requests from its queue until the server stops. With its
// own queue empty it steals from the others before it sleeps. A spinner
// that queues behind a stalled handler (one that waits, such as a sync
// put waiting for its group commit, or one running for stallAfter) wakes
// an idle worker to steal, so such a handler does not hold up the
// requests queued behind it.
func (s *Server) worker(i int) {
	defer s.wg.Done()
	q := s.workers[i]
	req := &ServerRequest{s: s, w: i} // the request its handler serves, reused
	run := func(t task) {
		s.ws[i].since.Store(s.clock())
		if len(q) > 0 && s.parked.Load() > 0 && s.idle.Load() > 0 {
			// Requests wait behind this handler and no spinner
			// watches: one must, should it stall.
			select {
			case s.watch <- struct{}{}:
			default:
			}
		}
		s.handle(t, req)
		s.ws[i].blocked.Store(false)
		s.ws[i].since.Store(0)
	}
	stealing := false // woken to steal: first from behind stalled handlers
	for {
		if stealing {
			stealing = false
			// What woke us waits behind a stalled handler: take it
			// before our own queue, which we serve next anyway.
			if t, ok := s.stealStalled(); ok {
				run(t)
				continue
			}
		}
		select {
		case t := <-q:
			run(t)
			continue
		default:
		}
		if t, ok := s.stealOne(); ok {
			run(t)
			continue
		}
		s.idle.Add(1)
		// Idle from here on: a spinner that queues behind a stalled
		// handler now wakes us. Look once more for what it queued
		// before it could see us.
		if t, ok := s.stealOne(); ok {
			s.idle.Add(-1)
			run(t)
			continue
		}
		select {
		case <-s.stop:
			s.idle.Add(-1)
			// Answer nothing more; queued requests' connections close.
			for {
				select {
				case t := <-q:
					t.c.done()
				default:
					return
				}
			}
		case t := <-q:
			s.idle.Add(-1)
			run(t)
		case <-s.steal:
			s.waking.Add(-1)
			s.idle.Add(-1)
			stealing = true
		}
	}
}

// stealStalled takes a request queued behind a stalled handler.
func (s *Server) stealStalled() (task, bool) {
	now := s.clock()
	for i, q := range s.workers {
		if len(q) == 0 || !s.stalled(i, now) {
			continue
		}
		select {
		case t := <-q:
			return t, true
		default:
		}
	}
	return task{}, false
}

// stealOne takes a request from any worker's queue.
func (s *Server) stealOne() (task, bool) {
	for _, q := range s.workers {
		select {
		case t := <-q:
			return t, true
		default:
		}
	}
	return task{}, false
}

// handle runs the request's handler and writes its reply; req is where
// the handler gets the request (the caller's, reused: no allocation per
// request).
func (s *Server) handle(t task, req *ServerRequest) {
	defer t.c.done()
	var rep Reply
	if h, ok := s.cfg.Handlers[t.req.Type]; ok {
		rs, rw := req.s, req.w
		*req = t.req
		req.s, req.w = rs, rw
		rep = h(req)
		*req = ServerRequest{s: rs, w: rw}
	} else {
		rep = Reply{Status: StatusUnknownType}
	}
	if !t.c.closed.Load() {
		t.c.reply(t.req.Header, rep)
	}
	putBuf(t.buf)
}

// done retires one request of the connection; if that gives a connection
// at its in-flight limit room again, its spinner is woken.
func (c *sconn) done() {
	if int(c.inflight.Add(-1)) == c.s.cfg.MaxInflight-1 {
		select {
		case c.sp.wake <- struct{}{}:
		default:
		}
	}
	c.tasks.Done()
}

package ring

import (
	"runtime"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/rdma"
)

// spinner polls the request rings of its connections. It spins after a
// request (spinPolicy: SpinTime at the default), then
// arms every connection's doorbell, checks once more and parks on its CQ;
// not while a ring holds a message seen incomplete.
type spinner struct {
	s     *Server
	cq    *rdma.CQ
	add   chan *sconn
	wake  chan struct{} // a connection at its in-flight limit got room
	conns []*sconn
	cur   int           // the worker it currently feeds
	req   ServerRequest // the request its ShortFunc serves
	// scratch is lent to each ShortFunc as ServerRequest.Scratch.
	scratch []byte
	// dispatched is set by pollAll when it queued a request on a worker
	// (cleared by run when it looks for stalled handlers).
	dispatched bool
	// now is Arrived for pollAll's next request: read when a request is
	// taken, again at every round and after a ShortFunc or an inline
	// handler ran or a hand-off waited for a worker's room (a hand-off
	// that did not wait takes next to no time: the requests behind it
	// share the reading).
	now time.Time
}

// ScratchSize is the capacity of ServerRequest.Scratch on a spinner.
const ScratchSize = 64 << 10

// perConnBatch bounds the requests taken from one ring per round, so one
// busy client cannot starve the others.
const perConnBatch = 16

func (sp *spinner) run() {
	defer sp.s.wg.Done()
	defer func() {
		for _, c := range sp.conns {
			c.close(ErrClosed)
		}
	}()
	var cqbuf [16]rdma.Completion
	spin := newSpinPolicy(sp.s.cfg.SpinTime, time.Now())
	clk := coarseClock{}
	waiting, round := false, 0
	for {
		// One-channel checks: a select over both would lock both
		// channels on every round.
		select {
		case <-sp.s.stop:
			return
		default:
		}
		if len(sp.add) > 0 { // the spinner is add's only receiver
			sp.conns = append(sp.conns, <-sp.add)
		}
		progressed := sp.pollAll()
		if n := sp.cq.Poll(cqbuf[:]); n > 0 {
			sp.events(cqbuf[:n])
		}
		// Requests queued behind a stalled handler go to idle workers;
		// ones queued behind a handler that may yet stall keep the
		// spinner from parking (a timer that short would sleep a
		// millisecond in an idle process). Looked at after every round
		// that queued requests on workers and every clockEvery other
		// rounds (a few microseconds against stallAfter); again before
		// the spinner arms its doorbells and once more before it parks.
		if round++; sp.dispatched || round%clockEvery == 1 {
			sp.dispatched = false
			waiting = sp.s.unstick()
		}
		if progressed {
			spin.progress(clk.fresh())
			continue
		}
		if waiting || sp.incomplete() || spin.spinning(clk.read()) {
			runtime.Gosched()
			continue
		}
		if waiting = sp.s.unstick(); waiting { // the cached answer may be stale
			continue
		}
		for _, c := range sp.conns {
			c.qp.ReqNotify()
		}
		if sp.pollAll() {
			spin.progress(clk.fresh())
			continue
		}
		if sp.incomplete() {
			// First seen incomplete just now: its writer may have found
			// the doorbell unarmed, and a malformed message is never
			// completed, so nothing may wake a parked spinner. Poll on
			// until it arrives or times out.
			continue
		}
		// Parked from here on: a worker that starts a handler with
		// requests queued behind it now wakes us (watch); look once
		// more for one that started before it could see us.
		clk.forget()
		sp.s.parked.Add(1)
		if sp.s.unstick() {
			sp.s.parked.Add(-1)
			waiting = true
			continue
		}
		select {
		case <-sp.s.stop:
			sp.s.parked.Add(-1)
			return
		case c := <-sp.add:
			sp.conns = append(sp.conns, c)
		case <-sp.cq.Notify():
		case <-sp.wake:
		case <-sp.s.watch:
		}
		sp.s.parked.Add(-1)
	}
}

// pollAll takes up to perConnBatch requests from each ring.
func (sp *spinner) pollAll() bool {
	progressed := false
	sp.now = time.Time{}
	for i := 0; i < len(sp.conns); i++ {
		c := sp.conns[i]
		for range perConnBatch {
			if int(c.inflight.Load()) >= sp.s.cfg.MaxInflight {
				break // its worker will wake us when it answers one
			}
			t, ok, err := c.poll()
			if err != nil {
				sp.s.log.Warn("closing connection: malformed request", zap.Error(err))
				sp.s.malformed.Add(1)
				sp.drop(i)
				c.close(err)
				i--
				break
			}
			if !ok {
				break
			}
			progressed = true
			if t.c == nil {
				sp.s.noops.Add(1)
			} else {
				if sp.now.IsZero() {
					sp.now = time.Now()
				}
				t.req.Arrived = sp.now
				sp.s.requests.Add(1)
				c.tasks.Add(1)
				c.inflight.Add(1)
				if !sp.short(t) {
					sp.dispatch(t)
					sp.dispatched = true
				}
			}
		}
	}
	return progressed
}

// incomplete reports whether a ring holds a message still arriving: the
// spinner keeps polling it (until it completes or times out as malformed).
func (sp *spinner) incomplete() bool {
	for _, c := range sp.conns {
		if !c.waitFrom.IsZero() {
			return true
		}
	}
	return false
}

func (sp *spinner) drop(i int) {
	sp.conns = append(sp.conns[:i], sp.conns[i+1:]...)
}

// events closes connections whose QP broke or whose reply WRITE failed.
func (sp *spinner) events(cs []rdma.Completion) {
	for _, e := range cs {
		if e.Op != rdma.OpDisconnect && e.Err == nil {
			continue
		}
		for i, c := range sp.conns {
			if c.qp == e.QP {
				sp.drop(i)
				c.close(e.Err)
				break
			}
		}
	}
}

// short answers t on the spinner if its type has a ShortFunc that answers
// it, and reports whether it did.
func (sp *spinner) short(t task) bool {
	f, ok := sp.s.cfg.Short[t.req.Type]
	if !ok {
		return false
	}
	// The request lives in the spinner (no allocation per request); it
	// is valid only during the call.
	sp.req = t.req
	sp.req.c = t.c
	sp.req.Scratch = sp.scratch[:0]
	rep, ok := f(&sp.req)
	sp.now = time.Time{} // f took time: the next request reads the clock
	later := sp.req.later
	sp.req = ServerRequest{}
	if !ok {
		return false
	}
	sp.s.short.Add(1)
	if later {
		putBuf(t.buf) // the request's payload is the ShortFunc's only during the call
		return true   // its Later replies and retires it
	}
	if !t.c.closed.Load() {
		t.c.reply(t.req.Header, rep) // the reply's payload may be the request's
	}
	putBuf(t.buf)
	t.c.done()
	return true
}

// dispatch hands a request to a worker: the current one while its queue
// has room, else the next with room; if all are full it waits on the
// current one (backpressure on every client of this spinner). The
// current one goes round the first Server.parallel workers (the cores the
// spinners leave): the others serve what handlers that stall leave
// queued (stalled).
func (sp *spinner) dispatch(t task) {
	s := sp.s
	if s.cfg.Inline {
		s.handle(t, &sp.req)
		sp.now = time.Time{} // the handler took time: the next request reads the clock
		return
	}
	for range len(s.workers) {
		select {
		case s.workers[sp.cur] <- t:
			// Behind a handler that waits, it goes to an idle
			// worker when the spinner next looks (unstick).
			sp.cur = (sp.cur + 1) % s.parallel
			return
		default:
			sp.cur = (sp.cur + 1) % len(s.workers)
		}
	}
	select {
	case s.workers[sp.cur] <- t:
	case <-s.stop:
		t.c.done()
	}
	sp.now = time.Time{} // it waited for room: the next request reads the clock
}

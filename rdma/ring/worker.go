package ring

// worker serves requests from its queue until the server stops. With its
// own queue empty it steals from the others before it sleeps, and a
// spinner that queues behind a busy worker wakes an idle one (steal), so
// a handler that blocks (a sync put waiting for its group commit) does not
// hold up the requests queued behind it.
func (s *Server) worker(i int) {
	defer s.wg.Done()
	q := s.workers[i]
	req := new(ServerRequest) // the request its handler serves, reused
	run := func(t task) {
		s.handle(t, req)
		s.pending[t.w].Add(-1)
	}
	for {
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
		select {
		case <-s.stop:
			// Answer nothing more; queued requests' connections close.
			for {
				select {
				case t := <-q:
					s.pending[t.w].Add(-1)
					t.c.done()
				default:
					return
				}
			}
		case t := <-q:
			run(t)
		case <-s.steal:
		}
	}
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
		*req = t.req
		rep = h(req)
		*req = ServerRequest{}
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

package ring

// worker serves requests from its queue until the server stops.
func (s *Server) worker(q chan task) {
	defer s.wg.Done()
	for {
		select {
		case <-s.stop:
			// Answer nothing more; queued requests' connections close.
			for {
				select {
				case t := <-q:
					t.c.tasks.Done()
				default:
					return
				}
			}
		case t := <-q:
			s.handle(t)
		}
	}
}

// handle runs the request's handler and writes its reply.
func (s *Server) handle(t task) {
	defer t.c.tasks.Done()
	var rep Reply
	if h, ok := s.cfg.Handlers[t.req.Type]; ok {
		rep = h(&t.req)
	} else {
		rep = Reply{Status: StatusUnknownType}
	}
	if !t.c.closed.Load() {
		t.c.reply(t.req.Header, rep)
	}
	putBuf(t.buf)
}

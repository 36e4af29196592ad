package region

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
)

// The controller is the one goroutine that changes what this server is
// for its regions. Every event that can change a region's role or its
// stream is sent to it and handled in order, with mapMu held:
//
//   - mapEvent: a new map (the watch, a fresh read after a session
//     expiry or a step-down, a static reload): install runs plan and
//     carries out its actions (install.go, plan.go);
//   - fenceEvent: the session expired or the server stepped down: every
//     hosted region refuses, is unrouted, then detached;
//   - attachEvent: the regions waiting for their streams are attached
//     (at start, on the re-attach tick);
//   - steppedEvent: an attach's step 2 returned: step 3 (attach.go);
//   - preseededEvent: a joining backup is pre-seeded: its region
//     re-attaches with it (preseed.go);
//   - abortEvent: the server closes: every attach in flight is cancelled.
//
// What the events do in between runs elsewhere, without the controller:
// an attach's dials and seeds (step 2), pre-seeds, reports to the master.
// Their results come back as events. Handling an event never waits for
// another event, so the controller cannot wait on itself; the only wait
// in it for other goroutines is a superseded attach's step 2 (attach.go
// abort), which ends promptly once cancelled.
type controller struct {
	events chan event
	stop   context.CancelFunc
	done   chan struct{} // closed when the loop returned
}

// event is one input of the controller; handle runs on its goroutine
// with mapMu held.
type event interface {
	handle(s *Server)
}

// errStopped: the controller stopped (the server closed).
var errStopped = errors.New("region: the server is closing")

// startController starts the controller's loop.
func (s *Server) startController() {
	ctx, stop := context.WithCancel(context.Background())
	s.ctl = controller{events: make(chan event), stop: stop, done: make(chan struct{})}
	go func() {
		defer close(s.ctl.done)
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-s.ctl.events:
				s.mapMu.Lock()
				ev.handle(s)
				s.mapMu.Unlock()
			}
		}
	}()
}

// stopController ends the loop once every goroutine that may send to it
// (attach step 2) returned.
func (s *Server) stopController() {
	if s.ctl.stop == nil {
		return
	}
	s.ctl.stop()
	<-s.ctl.done
}

// submit hands ev to the controller; false once it stopped. It must not
// be called from the controller's goroutine.
func (s *Server) submit(ev event) bool {
	if s.ctl.events == nil {
		return false // never started
	}
	select {
	case s.ctl.events <- ev:
		return true
	case <-s.ctl.done:
		return false
	}
}

// mapEvent installs m; done (if set) gets install's error.
type mapEvent struct {
	m    *regionmap.Map
	done chan error
}

func (e mapEvent) handle(s *Server) {
	err := s.installLocked(e.m)
	if e.done != nil {
		e.done <- err
	}
}

// install has the controller install m and returns its error. A
// standalone server's install then waits for the attaches it started and
// returns their failures too (a static map is installed whole, or says
// what is missing); a managed server's does not wait (the next map must
// not wait for this one's backups).
func (s *Server) install(m *regionmap.Map) error {
	done := make(chan error, 1)
	if !s.submit(mapEvent{m: m, done: done}) {
		return errStopped
	}
	if err := <-done; err != nil || s.cluster != nil || len(s.rings) == 0 {
		return err
	}
	return s.attachAll()
}

// fenceEvent stops serving every region as primary (cluster.go fence).
type fenceEvent struct{ done chan struct{} }

func (e fenceEvent) handle(s *Server) {
	s.fenceLocked()
	close(e.done)
}

// fence has the controller stop serving every region as primary, and
// returns once it has.
func (s *Server) fence() {
	done := make(chan struct{})
	if s.submit(fenceEvent{done: done}) {
		<-done
	}
}

// attachEvent attaches the regions waiting for their streams; wait (if
// set) gets, once every one of them has an outcome, their errors.
type attachEvent struct{ wait *attachBatch }

func (e attachEvent) handle(s *Server) { s.attachLocked(e.wait) }

// attachAll attaches the regions waiting for their streams and returns
// once each is attached or failed, with the failures.
func (s *Server) attachAll() error {
	b := newAttachBatch()
	done := b.done // b's fields are the controller's from the submit on
	if !s.submit(attachEvent{wait: b}) {
		return errStopped
	}
	return <-done
}

// steppedEvent: job j's step 2 returned.
type steppedEvent struct{ j *attachJob }

func (e steppedEvent) handle(s *Server) { s.stepped(e.j) }

// preseededEvent: backup name of region id is pre-seeded.
type preseededEvent struct {
	id   uint64
	name string
}

func (e preseededEvent) handle(s *Server) { s.attachPreseededLocked(e.id, e.name) }

// abortEvent cancels every attach in flight (the server closes).
type abortEvent struct{ done chan struct{} }

func (e abortEvent) handle(s *Server) {
	s.abortAttaches()
	close(e.done)
}

// attachBatch collects the outcomes of the attaches one caller waits for
// (attachAll). Used by the controller's goroutine only.
type attachBatch struct {
	pending int
	started bool // every attach of the batch is counted in pending
	sent    bool
	errs    []error
	done    chan error // gets the joined errors once, when pending is 0 (buffered)
}

func newAttachBatch() *attachBatch { return &attachBatch{done: make(chan error, 1)} }

// add counts one more attach of the batch.
func (b *attachBatch) add() {
	if b != nil {
		b.pending++
	}
}

// finish records the outcome of one attach of the batch.
func (b *attachBatch) finish(err error) {
	if b == nil {
		return
	}
	if err != nil {
		b.errs = append(b.errs, err)
	}
	b.pending--
	b.settle()
}

// seal marks the batch complete: no attach is added after it.
func (b *attachBatch) seal() {
	if b == nil {
		return
	}
	b.started = true
	b.settle()
}

func (b *attachBatch) settle() {
	if b.started && b.pending == 0 && !b.sent {
		b.sent = true
		b.done <- errors.Join(b.errs...)
	}
}

// logAttachErr logs an attach that failed for another reason than a
// newer map.
func (s *Server) logAttachErr(id uint64, err error) {
	if err != nil && !onlySuperseded(err) {
		s.log.Warn("region still waiting for its backups", zap.Uint64("region", id), zap.Error(err))
	}
}

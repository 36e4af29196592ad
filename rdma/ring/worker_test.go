package ring

import (
	"context"
	"encoding/binary"
	"runtime"
	"sync"
	"testing"
	"time"
)

const (
	typeHold = TypeFirstApp + 10 // signals started, then blocks until released
	typeWho  = TypeFirstApp + 11 // replies with the index of the worker that served it
)

// holdServer starts a loopback server whose typeHold handler signals
// started, calls WillBlock once declare is closed (if declare is not nil),
// and returns once release is closed; typeEcho echoes.
func holdServer(t *testing.T, cfg ServerConfig, started chan<- struct{}, declare, release <-chan struct{}) *Server {
	cfg.Workers = 4
	cfg.parallel = 1
	cfg.Handlers = map[uint16]HandlerFunc{
		typeHold: func(r *ServerRequest) Reply {
			started <- struct{}{}
			if declare != nil {
				<-declare
				r.WillBlock()
			}
			<-release
			return Reply{}
		},
		typeEcho: func(r *ServerRequest) Reply { return Reply{Payload: r.Payload} },
		typeWho: func(r *ServerRequest) Reply {
			return Reply{Payload: binary.LittleEndian.AppendUint32(nil, uint32(r.w))}
		},
	}
	s, _ := start(t, envs[0], cfg)
	return s
}

// echoes sends n echo requests at once and returns a channel that is
// closed when all were answered; an error fails the test.
func echoes(t *testing.T, c *Client, n int) <-chan struct{} {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := c.Call(ctx, Request{Type: typeEcho, Payload: []byte{byte(i)}}); err != nil {
				t.Errorf("echo %d: %v", i, err)
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

// TestStalledHandlerHandsOffQueue: requests queued behind a handler that
// blocks without saying so go to an idle worker once it has run for
// stallAfter, also when they were queued before it stalled and no request
// came since (the spinner does not park while they wait).
func TestStalledHandlerHandsOffQueue(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	const stall = 200 * time.Millisecond
	s := holdServer(t, ServerConfig{stallAfter: stall}, started, nil, release)
	c := dial(t, envs[0], s, ClientConfig{})
	hold := c.Go(context.Background(), Request{Type: typeHold}, nil)
	<-started
	t0 := time.Now()
	done := echoes(t, c, 8) // queued behind the hold, which has not stalled yet
	select {
	case <-done:
		if took := time.Since(t0); took < stall/2 {
			t.Fatalf("echoes answered after %v, before the hold could have stalled (%v): not queued behind it", took, stall)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("echoes queued behind a stalled handler not answered in 5 s")
	}
	// Queued behind it once it has stalled.
	select {
	case <-echoes(t, c, 8):
	case <-time.After(5 * time.Second):
		t.Fatal("echoes sent after the handler stalled not answered in 5 s")
	}
	select {
	case <-hold.Done:
		t.Fatal("the hold answered before its release")
	default:
	}
}

// TestWillBlockHandsOffQueue: a handler that says it waits (WillBlock)
// hands the requests queued behind it to idle workers at once, long
// before it would count as stalled.
func TestWillBlockHandsOffQueue(t *testing.T) {
	started, declare, release := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	defer close(release)
	s := holdServer(t, ServerConfig{stallAfter: time.Hour}, started, declare, release)
	c := dial(t, envs[0], s, ClientConfig{})
	c.Go(context.Background(), Request{Type: typeHold}, nil)
	<-started
	done := echoes(t, c, 8)
	select {
	case <-done:
		t.Fatal("echoes answered while queued behind a running handler that had not said it waits")
	case <-time.After(200 * time.Millisecond):
	}
	close(declare)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("echoes queued behind a handler that called WillBlock not answered in 5 s")
	}
	// Sent after.
	select {
	case <-echoes(t, c, 8):
	case <-time.After(5 * time.Second):
		t.Fatal("echoes sent after WillBlock not answered in 5 s")
	}
}

// TestShortHandlersStayOnOneWorker: with one worker to go round
// (parallel 1) and handlers that neither wait nor stall, every request is
// served by that worker: none wakes another to steal.
func TestShortHandlersStayOnOneWorker(t *testing.T) {
	s := holdServer(t, ServerConfig{stallAfter: time.Hour}, nil, nil, nil)
	c := dial(t, envs[0], s, ClientConfig{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 100 {
				rep, err := call(t, c, Request{Type: typeWho})
				if err != nil {
					t.Errorf("goroutine %d call %d: %v", g, i, err)
					return
				}
				if w := binary.LittleEndian.Uint32(rep.Payload); w != 0 {
					t.Errorf("goroutine %d call %d served by worker %d, want 0", g, i, w)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestParkedSpinnerWatchesStartedHandler: a spinner that parked while a
// woken worker had not started yet learns when that worker starts a
// handler with requests queued behind it (watch), and hands them over
// once it stalls. One P and no spinning fix the order: the spinner
// dispatches both requests and parks before the worker runs.
func TestParkedSpinnerWatchesStartedHandler(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	started, release := make(chan struct{}, 1), make(chan struct{})
	defer close(release)
	s := holdServer(t, ServerConfig{stallAfter: 20 * time.Millisecond, SpinTime: time.Nanosecond}, started, nil, release)
	c := dial(t, envs[0], s, ClientConfig{SpinTime: time.Nanosecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hold := c.Go(ctx, Request{Type: typeHold}, nil)
	echo := c.Go(ctx, Request{Type: typeEcho, Payload: []byte("e")}, nil)
	select {
	case <-echo.Done:
		if echo.Err != nil {
			t.Fatal(echo.Err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the request queued behind a stalled handler was not answered in 3 s")
	}
	select {
	case <-hold.Done:
		t.Fatal("the hold answered before its release")
	default:
	}
}

// TestStealStalledTakesFromBehindStalledHandler: a worker woken to steal
// takes a request queued behind a handler that waits or has run for
// stallAfter, not one behind a handler still short of it nor one waiting
// for a worker that is not in a handler (which serves its own queue).
func TestStealStalledTakesFromBehindStalledHandler(t *testing.T) {
	s := &Server{cfg: ServerConfig{stallAfter: time.Hour}, epoch: time.Now().Add(-2 * time.Hour)}
	for range 4 {
		s.workers = append(s.workers, make(chan task, 4))
	}
	s.ws = make([]workerState, 4)
	for i := range s.workers {
		s.workers[i] <- task{req: ServerRequest{Header: Header{ReqID: uint64(i)}}} // tagged with its queue
	}
	// Worker 0 is in no handler; 1 runs one started now; 2's says it
	// waits; 3's started two hours ago.
	s.ws[1].since.Store(s.clock())
	s.ws[2].since.Store(s.clock())
	s.ws[2].blocked.Store(true)
	s.ws[3].since.Store(1)
	var got []uint64
	for {
		tk, ok := s.stealStalled()
		if !ok {
			break
		}
		got = append(got, tk.req.ReqID)
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("stole from the queues of workers %v, want [2 3]", got)
	}
	if len(s.workers[0]) != 1 || len(s.workers[1]) != 1 {
		t.Fatal("took a request not queued behind a stalled handler")
	}
}

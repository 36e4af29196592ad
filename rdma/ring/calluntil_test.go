package ring

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestCallUntilEndsAtDeadline: a call whose reply does not come ends at
// its deadline with context.DeadlineExceeded, both while the poller spins
// (other calls answered meanwhile) and once it has parked (nothing else
// pending), with no timer of the call's own.
func TestCallUntilEndsAtDeadline(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		release := make(chan struct{})
		defer close(release)
		s, _ := start(t, e, ServerConfig{Workers: 4, Handlers: map[uint16]HandlerFunc{
			typeEcho: func(r *ServerRequest) Reply { return Reply{Payload: r.Payload} },
			typeSlow: func(r *ServerRequest) Reply { <-release; return Reply{} },
		}})
		for _, busy := range []bool{false, true} {
			// A connection each: a hung call's reply slot holds its
			// connection's reply ring once the ring wraps.
			c := dial(t, e, s, ClientConfig{})
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { // keeps the poller busy with answered calls
				defer close(done)
				for busy && ctx.Err() == nil {
					if _, err := c.Call(ctx, Request{Type: typeEcho, Payload: []byte("x")}); err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
				}
			}()
			const wait = 100 * time.Millisecond
			begin := time.Now()
			_, err := c.CallUntil(context.Background(), begin.Add(wait), Request{Type: typeSlow, Payload: []byte{0}})
			took := time.Since(begin)
			stop()
			<-done
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("busy %v: a hung call: %v, want DeadlineExceeded", busy, err)
			}
			if took < wait || took > wait+2*time.Second {
				t.Fatalf("busy %v: a hung call with a %v deadline ended after %v", busy, wait, took)
			}
		}
	})
}

// TestCallUntilNoStaleExpiry: a call that expires as its reply comes
// leaves nothing behind for the next use of its pooled Call: a later call
// with a far deadline never fails as expired. (A stress test: whether an
// expiry and its reply meet in one caller's wake-up is up to the
// scheduler.)
func TestCallUntilNoStaleExpiry(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		s, _ := start(t, e, ServerConfig{Workers: 2})
		c := dial(t, e, s, ClientConfig{})
		expired := 0
		for i := range 2000 {
			// A deadline about as long as a round trip: some expire.
			_, err := c.CallUntil(context.Background(), time.Now().Add(time.Duration(i%40)*time.Microsecond), Request{Type: typeEcho, Payload: []byte("x")})
			switch {
			case errors.Is(err, context.DeadlineExceeded):
				expired++
			case err != nil:
				t.Fatal(err)
			}
			if _, err := c.CallUntil(context.Background(), time.Now().Add(time.Minute), Request{Type: typeEcho, Payload: []byte("y")}); err != nil {
				t.Fatalf("call %d with a far deadline after one that raced its own: %v", i, err)
			}
		}
		t.Logf("%d of 2000 short-deadline calls expired", expired)
	})
}

// TestCallUntilAfterAnExpiredCall: a call sent while the poller is parked
// with another call pending (one that expired and is still unanswered)
// ends at its deadline too: its send wakes the poller to set its timer.
func TestCallUntilAfterAnExpiredCall(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		release := make(chan struct{})
		defer close(release)
		s, _ := start(t, e, ServerConfig{Workers: 4, Handlers: map[uint16]HandlerFunc{
			typeSlow: func(r *ServerRequest) Reply { <-release; return Reply{} },
		}})
		c := dial(t, e, s, ClientConfig{})
		const wait = 50 * time.Millisecond
		for i := range 3 {
			hungCallExpires(t, c, i, wait)
		}
	})
}

// TestCallUntilWaitingForRoom: a call that waits for ring room (the rings
// full of unanswered calls, each holding its reply slot) ends at its
// deadline too.
func TestCallUntilWaitingForRoom(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		release := make(chan struct{})
		defer close(release)
		s, _ := start(t, e, ServerConfig{Workers: 4, MaxInflight: 1 << 10, Handlers: map[uint16]HandlerFunc{
			typeSlow: func(r *ServerRequest) Reply { <-release; return Reply{} },
		}})
		c := dial(t, e, s, ClientConfig{RequestRing: MinRing, ReplyRing: MinRing, ReplyHint: 1024})
		const wait = 20 * time.Millisecond
		for i := range 64 {
			hungCallExpires(t, c, i, wait)
		}
	})
}

// hungCallExpires makes call i, of the hung type, with a deadline wait
// from now: it must end with DeadlineExceeded, not before wait, and not
// 5 s later still waiting.
func hungCallExpires(t *testing.T, c *Client, i int, wait time.Duration) {
	t.Helper()
	type result struct {
		took time.Duration
		err  error
	}
	got := make(chan result, 1)
	go func() {
		begin := time.Now()
		_, err := c.CallUntil(context.Background(), begin.Add(wait), Request{Type: typeSlow, Payload: []byte{0}})
		got <- result{time.Since(begin), err}
	}()
	select {
	case r := <-got:
		if !errors.Is(r.err, context.DeadlineExceeded) || r.took < wait {
			t.Fatalf("hung call %d: %v after %v, want DeadlineExceeded after %v", i, r.err, r.took, wait)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("hung call %d with a %v deadline still waiting after 5 s", i, wait)
	}
}

// TestAbandonedCallNotResent: a call whose caller gave up before its
// reply (its context ended, or its CallUntil deadline passed) is not
// sent again when the reply asks for a larger slot: the caller may be
// reusing its request's memory by then.
func TestAbandonedCallNotResent(t *testing.T) {
	for _, byDeadline := range []bool{false, true} {
		t.Run(map[bool]string{false: "context", true: "deadline"}[byDeadline], func(t *testing.T) {
			testAbandonedCallNotResent(t, byDeadline)
		})
	}
}

func testAbandonedCallNotResent(t *testing.T, byDeadline bool) {
	forEnv(t, func(t *testing.T, e env) {
		release := make(chan struct{})
		var served atomic.Int64
		seen := make(chan []byte, 4)
		cfg := ServerConfig{Workers: 2, Handlers: map[uint16]HandlerFunc{
			typeEcho: func(r *ServerRequest) Reply {
				seen <- append([]byte(nil), r.Payload...)
				if served.Add(1) == 1 {
					<-release
				}
				return Reply{Status: StatusFirstApp, Payload: make([]byte, 4096)} // over its slot: TOO_SMALL
			},
		}}
		s, _ := start(t, e, cfg)
		c := dial(t, e, s, ClientConfig{})
		tail := []byte("original")
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		until := time.Time{}
		if byDeadline {
			ctx, cancel = context.WithCancel(context.Background())
			until = time.Now().Add(50 * time.Millisecond)
		}
		_, err := c.CallUntil(ctx, until, Request{Type: typeEcho, Payload: []byte("p:"), Tail: tail, ReplySize: 64})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call: %v, want its deadline", err)
		}
		copy(tail, "reused!!") // the caller's memory, its own again
		close(release)
		if got := <-seen; string(got) != "p:original" {
			t.Fatalf("first request %q", got)
		}
		select {
		case got := <-seen:
			t.Fatalf("the abandoned call was sent again: %q", got)
		case <-time.After(300 * time.Millisecond):
		}
		// The connection goes on: a call that waits is resent and answered.
		rep, err := call(t, c, Request{Type: typeEcho, Payload: []byte("q"), ReplySize: 64})
		if err != nil || len(rep.Payload) != 4096 {
			t.Fatalf("a later call: %d bytes, %v", len(rep.Payload), err)
		}
	})
}

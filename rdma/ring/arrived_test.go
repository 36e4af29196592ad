package ring

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestServerRequestArrived: a request's Arrived is stamped when the
// spinner takes it off the ring, for a ShortFunc and a worker's handler
// alike: after its call began, before its handler ran and before its
// reply came back.
func TestServerRequestArrived(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		type seen struct{ arrived, ran time.Time }
		var mu sync.Mutex
		got := map[byte]seen{}
		record := func(r *ServerRequest) {
			mu.Lock()
			got[r.Payload[0]] = seen{r.Arrived, time.Now()}
			mu.Unlock()
		}
		cfg := ServerConfig{Workers: 2, Handlers: map[uint16]HandlerFunc{
			typeEcho: func(r *ServerRequest) Reply {
				record(r)
				return Reply{Payload: r.Payload}
			},
		}, Short: map[uint16]ShortFunc{
			typeEcho: func(r *ServerRequest) (Reply, bool) {
				if r.Payload[0]%2 == 1 {
					return Reply{}, false // odd: the worker's
				}
				record(r)
				return Reply{Payload: r.Payload}, true
			},
		}}
		s, _ := start(t, e, cfg)
		c := dial(t, e, s, ClientConfig{})
		for i := range 20 {
			before := time.Now()
			if _, err := call(t, c, Request{Type: typeEcho, Payload: []byte{byte(i)}}); err != nil {
				t.Fatal(err)
			}
			after := time.Now()
			mu.Lock()
			g, ok := got[byte(i)]
			mu.Unlock()
			switch {
			case !ok:
				t.Fatalf("request %d: no handler saw it", i)
			case g.arrived.IsZero():
				t.Fatalf("request %d: Arrived not set", i)
			case g.arrived.Before(before) || g.arrived.After(g.ran) || g.arrived.After(after):
				t.Fatalf("request %d: arrived %v, want within its call (from %v) and before its handler ran (%v)",
					i, g.arrived, before, g.ran)
			}
		}
	})
}

// TestServerRequestArrivedAfterInlineHandler: on a server whose handlers
// run on the spinner (Inline), a request that came while the handler
// before it ran, in the same poll round, is stamped after it came, not
// with the reading taken for the one before.
func TestServerRequestArrivedAfterInlineHandler(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		started, sent := make(chan struct{}), make(chan struct{})
		arrived := make(chan time.Time, 2)
		cfg := ServerConfig{Inline: true, Handlers: map[uint16]HandlerFunc{
			typeEcho: func(r *ServerRequest) Reply {
				arrived <- r.Arrived
				if r.Payload[0] == 0 {
					close(started)
					<-sent // the second request is on the ring before this one is answered
				}
				return Reply{Payload: r.Payload}
			},
		}}
		s, _ := start(t, e, cfg)
		c := dial(t, e, s, ClientConfig{})
		first := c.Go(context.Background(), Request{Type: typeEcho, Payload: []byte{0}}, nil)
		<-started
		before := time.Now()
		second := c.Go(context.Background(), Request{Type: typeEcho, Payload: []byte{1}}, nil)
		close(sent)
		for _, call := range []*Call{first, second} {
			select {
			case <-call.Done:
				if call.Err != nil {
					t.Fatal(call.Err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no reply")
			}
		}
		<-arrived
		if a := <-arrived; a.Before(before) {
			t.Fatalf("the second request arrived %v, before it was sent (%v)", a, before)
		}
	})
}

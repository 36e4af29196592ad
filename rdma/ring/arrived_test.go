package ring

import (
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

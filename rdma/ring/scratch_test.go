package ring

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestShortFuncScratch: a ShortFunc is lent the spinner's scratch (empty,
// ScratchSize of capacity) and may reply from it: under concurrent calls
// every reply so built carries its own request's bytes, though the next
// request's ShortFunc overwrites the same buffer. A worker's handler
// gets no scratch.
func TestShortFuncScratch(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		var mu sync.Mutex
		var bad []string
		note := func(f string, a ...any) {
			mu.Lock()
			bad = append(bad, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
		cfg := ServerConfig{Workers: 2, Handlers: map[uint16]HandlerFunc{
			typeEcho: func(r *ServerRequest) Reply {
				if r.Scratch != nil {
					note("a worker's handler got a scratch of %d bytes", cap(r.Scratch))
				}
				return Reply{Payload: append([]byte(nil), r.Payload...)}
			},
		}, Short: map[uint16]ShortFunc{
			typeEcho: func(r *ServerRequest) (Reply, bool) {
				if r.Payload[0]%4 == 3 {
					return Reply{}, false // the worker's
				}
				if len(r.Scratch) != 0 || cap(r.Scratch) != ScratchSize {
					note("scratch of len %d cap %d, want 0 and %d", len(r.Scratch), cap(r.Scratch), ScratchSize)
					return Reply{}, false
				}
				// Reversed, so the reply is built in the scratch and not the request's.
				out := r.Scratch[:len(r.Payload)]
				for i, b := range r.Payload {
					out[len(out)-1-i] = b
				}
				return Reply{Payload: out}, true
			},
		}}
		s, _ := start(t, e, cfg)
		c := dial(t, e, s, ClientConfig{})
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					p := bytes.Repeat([]byte{byte(g*31 + i)}, 1+(g*200+i)%3000)
					p[len(p)-1] = byte(g)
					rep, err := c.Call(context.Background(), Request{Type: typeEcho, Payload: p, ReplySize: len(p)})
					if err != nil {
						note("call %d/%d: %v", g, i, err)
						return
					}
					want := p
					if p[0]%4 != 3 {
						want = make([]byte, len(p))
						for j, b := range p {
							want[len(p)-1-j] = b
						}
					}
					if !bytes.Equal(rep.Payload, want) {
						note("call %d/%d: reply of %d bytes is not its request's", g, i, len(rep.Payload))
						return
					}
				}
			})
		}
		wg.Wait()
		for _, b := range bad {
			t.Error(b)
		}
	})
}

package ring

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
)

const (
	typeEcho  = TypeFirstApp
	typeSized = TypeFirstApp + 1 // reply payload of the size in the request's first 4 bytes
	typeSlow  = TypeFirstApp + 2 // echo after the delay in ms in byte 0
)

var loopN atomic.Uint64

type env struct {
	name string
	tr   func() rdma.Transport
	addr func(t *testing.T) string
}

var envs = []env{
	{"loopback", func() rdma.Transport { return sharedLoop }, func(*testing.T) string { return fmt.Sprintf("l%d", loopN.Add(1)) }},
	{"shm", func() rdma.Transport { return &rdma.Shm{} }, func(t *testing.T) string { return filepath.Join(t.TempDir(), "s") }},
	{"tcp", func() rdma.Transport { return &rdma.TCP{} }, func(*testing.T) string { return "127.0.0.1:0" }},
}

var sharedLoop = rdma.NewLoopback()

func handlers(served *atomic.Int64) map[uint16]HandlerFunc {
	return map[uint16]HandlerFunc{
		typeEcho: func(r *ServerRequest) Reply {
			served.Add(1)
			return Reply{Status: StatusFirstApp, Payload: r.Payload}
		},
		typeSized: func(r *ServerRequest) Reply {
			served.Add(1)
			n := binary.LittleEndian.Uint32(r.Payload)
			out := make([]byte, n)
			for i := range out {
				out[i] = byte(i)
			}
			return Reply{Payload: out}
		},
		typeSlow: func(r *ServerRequest) Reply {
			served.Add(1)
			time.Sleep(time.Duration(r.Payload[0]) * time.Millisecond)
			return Reply{Payload: r.Payload}
		},
	}
}

func start(t *testing.T, e env, cfg ServerConfig) (*Server, *atomic.Int64) {
	t.Helper()
	served := new(atomic.Int64)
	cfg.Transport, cfg.Addr = e.tr(), e.addr(t)
	if cfg.Handlers == nil {
		cfg.Handlers = handlers(served)
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, served
}

func dial(t *testing.T, e env, s *Server, cfg ClientConfig) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg.Transport, cfg.Addr = e.tr(), s.Addr()
	c, err := Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func call(t *testing.T, c *Client, req Request) (Reply, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.Call(ctx, req)
}

func forEnv(t *testing.T, fn func(t *testing.T, e env)) {
	for _, e := range envs {
		t.Run(e.name, func(t *testing.T) { fn(t, e) })
	}
}

func TestEcho(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		s, _ := start(t, e, ServerConfig{})
		c := dial(t, e, s, ClientConfig{})
		rep, err := call(t, c, Request{Type: typeEcho, Region: 3, Epoch: 9, Payload: []byte("hello")})
		if err != nil || rep.Status != StatusFirstApp || string(rep.Payload) != "hello" {
			t.Fatalf("reply %+v, %v", rep, err)
		}
	})
}

// TestSizes: payloads from 0 B to beyond half the ring, with the reply
// hint smaller than most replies (each of those costs one retry).
func TestSizes(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		const ring = 16 << 10
		s, _ := start(t, e, ServerConfig{})
		c := dial(t, e, s, ClientConfig{RequestRing: ring, ReplyRing: ring, ReplyHint: 64})
		max := ring/2 - HeaderSize - 8
		for _, n := range []int{0, 1, 55, 56, 57, 63, 64, 65, 1000, 4096, max - 1, max} {
			p := bytes.Repeat([]byte{byte(n)}, n)
			rep, err := call(t, c, Request{Type: typeEcho, Payload: p})
			if err != nil || !bytes.Equal(rep.Payload, p) {
				t.Fatalf("%d bytes: %v (got %d bytes)", n, err, len(rep.Payload))
			}
		}
		if _, err := call(t, c, Request{Type: typeEcho, Payload: make([]byte, max+1)}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("request over half the ring: %v, want ErrTooLarge", err)
		}
		// A reply over half the reply ring: ErrTooLarge after the retry.
		req := binary.LittleEndian.AppendUint32(nil, uint32(max+1))
		if _, err := call(t, c, Request{Type: typeSized, Payload: req}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("reply over half the ring: %v, want ErrTooLarge", err)
		}
		// The connection still works.
		if _, err := call(t, c, Request{Type: typeEcho, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRequestTail: a request's Tail arrives after its Payload as one
// payload, at sizes across the ring's padding and its limit; the limit
// counts both.
func TestRequestTail(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		const ring = 16 << 10
		s, _ := start(t, e, ServerConfig{})
		c := dial(t, e, s, ClientConfig{RequestRing: ring, ReplyRing: ring})
		max := ring/2 - HeaderSize - 8
		for _, n := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {3, 4}, {55, 1}, {1, 63}, {100, 4000}, {1, max - 1}, {max - 7, 7}} {
			head, tail := bytes.Repeat([]byte{'h'}, n[0]), bytes.Repeat([]byte{'t'}, n[1])
			rep, err := call(t, c, Request{Type: typeEcho, Payload: head, Tail: tail})
			if want := append(append([]byte(nil), head...), tail...); err != nil || !bytes.Equal(rep.Payload, want) {
				t.Fatalf("%d+%d bytes: %v (got %d bytes)", n[0], n[1], err, len(rep.Payload))
			}
		}
		if _, err := call(t, c, Request{Type: typeEcho, Payload: make([]byte, 8), Tail: make([]byte, max-7)}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("payload and tail over half the ring: %v, want ErrTooLarge", err)
		}
	})
}

// TestTooSmallRetry: a reply larger than its slot is retried once with the
// size the server asked for.
func TestTooSmallRetry(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		s, served := start(t, e, ServerConfig{})
		c := dial(t, e, s, ClientConfig{ReplyHint: 64})
		req := binary.LittleEndian.AppendUint32(nil, 3000)
		rep, err := call(t, c, Request{Type: typeSized, Payload: req, ReplySize: 16})
		if err != nil || len(rep.Payload) != 3000 || rep.Payload[2999] != byte(2999%256) {
			t.Fatalf("reply %d bytes, %v", len(rep.Payload), err)
		}
		if n := served.Load(); n != 2 {
			t.Fatalf("server served %d times, want 2 (one retry)", n)
		}
		// The hint grew: the next call needs no retry.
		if _, err := call(t, c, Request{Type: typeSized, Payload: req}); err != nil || served.Load() != 3 {
			t.Fatalf("second call: %v, served %d", err, served.Load())
		}
	})
}

// TestWrap: messages that do not divide the ring make it wrap with NOOPs.
func TestWrap(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		s, _ := start(t, e, ServerConfig{})
		c := dial(t, e, s, ClientConfig{RequestRing: MinRing, ReplyRing: MinRing})
		rng := rand.New(rand.NewPCG(testseed.Seed(t), 2))
		for i := range 500 {
			p := make([]byte, rng.IntN(1500))
			for j := range p {
				p[j] = byte(i + j)
			}
			rep, err := call(t, c, Request{Type: typeEcho, Payload: p, ReplySize: len(p)})
			if err != nil || !bytes.Equal(rep.Payload, p) {
				t.Fatalf("call %d (%d bytes): %v", i, len(p), err)
			}
		}
		if st := s.Stats(); st.Noops == 0 || st.Requests != 500 {
			t.Fatalf("stats %+v: want NOOP wraps and 500 requests", st)
		}
	})
}

// TestOutOfOrder: a slow request's reply arrives after later fast ones.
func TestOutOfOrder(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		s, _ := start(t, e, ServerConfig{Workers: 4, QueueDepth: 1})
		c := dial(t, e, s, ClientConfig{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done := make(chan *Call, 10)
		slow := c.Go(ctx, Request{Type: typeSlow, Payload: []byte{200, 'S'}}, done)
		var fast []*Call
		for i := range 5 {
			fast = append(fast, c.Go(ctx, Request{Type: typeSlow, Payload: []byte{0, byte('a' + i)}}, done))
		}
		var order []*Call
		for range 6 {
			select {
			case cl := <-done:
				if cl.Err != nil || !bytes.Equal(cl.Reply.Payload, cl.Req.Payload) {
					t.Fatalf("call %+v: %v", cl.Req, cl.Err)
				}
				order = append(order, cl)
			case <-ctx.Done():
				t.Fatal("timeout")
			}
		}
		// The slow request went first; later ones overtook it.
		if order[0] == slow {
			t.Fatalf("the slow request's reply came first")
		}
		_ = fast
	})
}

// TestManyClients: concurrent clients and goroutines, random sizes.
func TestManyClients(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		seed := testseed.Seed(t)
		s, _ := start(t, e, ServerConfig{Spinners: 2, Workers: 4})
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for ci := range 8 {
			c := dial(t, e, s, ClientConfig{RequestRing: 32 << 10, ReplyRing: 32 << 10, ReplyHint: 256})
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(seed, uint64(ci*16+g)))
					for i := range 150 {
						p := make([]byte, 8+rng.IntN(3000))
						for j := range p {
							p[j] = byte(rng.Uint32())
						}
						binary.LittleEndian.PutUint64(p, uint64(i))
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						rep, err := c.Call(ctx, Request{Type: typeEcho, Region: uint64(ci), Payload: p})
						cancel()
						if err == nil && !bytes.Equal(rep.Payload, p) {
							err = fmt.Errorf("client %d goroutine %d call %d: payload differs", ci, g, i)
						}
						if err != nil {
							errs <- err
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if st := s.Stats(); st.Requests < 8*4*150 {
			t.Fatalf("stats %+v", st)
		}
	})
}

func TestUnknownType(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		s, _ := start(t, e, ServerConfig{})
		c := dial(t, e, s, ClientConfig{})
		rep, err := call(t, c, Request{Type: 999})
		if !errors.Is(err, ErrStatus) || rep.Status != StatusUnknownType {
			t.Fatalf("unknown type: %+v, %v", rep, err)
		}
		if _, err := call(t, c, Request{Type: typeEcho}); err != nil {
			t.Fatalf("after an unknown type: %v", err)
		}
		if _, err := call(t, c, Request{Type: TypeNoop}); err == nil {
			t.Fatal("sending a reserved type succeeded")
		}
	})
}

// rawConn is a hand-made client: valid connection parameters, then
// whatever bytes the test writes into the request ring.
type rawConn struct {
	qp  rdma.QP
	cq  *rdma.CQ
	mr  *rdma.MR
	rep *rdma.MR
}

func rawDial(t *testing.T, e env, s *Server, params []byte) (*rawConn, error) {
	t.Helper()
	r := &rawConn{cq: rdma.NewCQ()}
	var err error
	if r.mr, err = rdma.Register(DefaultRing); err != nil {
		t.Fatal(err)
	}
	if r.rep, err = rdma.Register(DefaultRing); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.mr.Deregister(); r.rep.Deregister() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.qp, err = e.tr().Dial(ctx, s.Addr(), rdma.ConnConfig{CQ: r.cq, Expose: []*rdma.MR{r.rep}, Private: params})
	if err == nil {
		t.Cleanup(func() { r.qp.Close() })
	}
	return r, err
}

func (r *rawConn) write(t *testing.T, off int, b []byte) {
	t.Helper()
	copy(r.mr.Bytes()[off:], b)
	if err := r.qp.PostWrite(rdma.WriteWR{Local: r.mr, LocalOff: off, Len: len(b), Remote: r.qp.PeerRegions()[0], RemoteOff: uint64(off), Solicited: true}); err != nil {
		t.Fatal(err)
	}
}

func (r *rawConn) waitClosed(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		var c [1]rdma.Completion
		if _, err := r.cq.Wait(ctx, c[:]); err != nil {
			t.Fatalf("%s: server did not close the connection", name)
		}
		if c[0].Op == rdma.OpDisconnect {
			return
		}
	}
}

func TestMalformed(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		// A short arrival bound: the bad magic case waits it out.
		s, _ := start(t, e, ServerConfig{ArriveWait: 200 * time.Millisecond})
		good := dial(t, e, s, ClientConfig{})
		params := connParams{reqRing: DefaultRing, repRing: DefaultRing}.encode()
		hdr := func(h Header) []byte {
			b := make([]byte, HeaderSize)
			h.put(b)
			return b
		}
		cases := []struct {
			name string
			msg  []byte
		}{
			{"bad magic", bytes.Repeat([]byte{0xEE}, HeaderSize)},
			{"length past the ring", hdr(Header{Type: typeEcho, Len: DefaultRing, ReplySize: 64})},
			{"reply slot past the ring", hdr(Header{Type: typeEcho, ReplyOff: DefaultRing, ReplySize: 64})},
			{"empty reply slot", hdr(Header{Type: typeEcho})},
			{"short noop", hdr(Header{Type: TypeNoop, Len: 64})},
			{"reply flag", hdr(Header{Type: typeEcho, Flags: FlagReply, ReplySize: 64})},
		}
		bad := s.Stats().Malformed
		for _, tc := range cases {
			r, err := rawDial(t, e, s, params)
			if err != nil {
				t.Fatal(err)
			}
			r.write(t, 0, tc.msg)
			r.waitClosed(t, tc.name)
			bad++
			if st := s.Stats(); st.Malformed != bad {
				t.Fatalf("%s: malformed count %d, want %d", tc.name, st.Malformed, bad)
			}
			// Everybody else is still served.
			if _, err := call(t, good, Request{Type: typeEcho, Payload: []byte(tc.name)}); err != nil {
				t.Fatalf("after %s: %v", tc.name, err)
			}
		}
		// Bad connection parameters are refused at set-up.
		for _, p := range [][]byte{nil, []byte("junk"), connParams{reqRing: 100, repRing: DefaultRing}.encode()} {
			if _, err := rawDial(t, e, s, p); !errors.Is(err, rdma.ErrRejected) {
				t.Fatalf("params %x: %v, want rejected", p, err)
			}
		}
	})
}

// TestIdleNoCPU: once parked, an idle server and client use no CPU.
func TestIdleNoCPU(t *testing.T) {
	for _, e := range envs[1:] {
		t.Run(e.name, func(t *testing.T) {
			s, _ := start(t, e, ServerConfig{SpinTime: time.Millisecond})
			c := dial(t, e, s, ClientConfig{SpinTime: time.Millisecond})
			if _, err := call(t, c, Request{Type: typeEcho}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
			before := cpuTime(t)
			time.Sleep(500 * time.Millisecond)
			if used := cpuTime(t) - before; used > 50*time.Millisecond {
				t.Fatalf("idle for 500ms used %v of CPU", used)
			}
			// And it wakes up.
			if _, err := call(t, c, Request{Type: typeEcho, Payload: []byte("wake")}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func cpuTime(t testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestClientGone: a closed client's connection is freed; a server that
// goes away fails pending calls.
func TestClientGone(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		s, _ := start(t, e, ServerConfig{})
		c := dial(t, e, s, ClientConfig{})
		if _, err := call(t, c, Request{Type: typeEcho}); err != nil {
			t.Fatal(err)
		}
		c.Close()
		deadline := time.Now().Add(5 * time.Second)
		for s.Stats().Conns != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("server still holds %d connections", s.Stats().Conns)
			}
			time.Sleep(5 * time.Millisecond)
		}
		c2 := dial(t, e, s, ClientConfig{})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		slow := c2.Go(ctx, Request{Type: typeSlow, Payload: []byte{250}}, nil)
		time.Sleep(20 * time.Millisecond)
		s.Close()
		select {
		case cl := <-slow.Done:
			if cl.Err == nil {
				t.Fatalf("call survived the server: %+v", cl.Reply)
			}
		case <-ctx.Done():
			t.Fatal("pending call never failed")
		}
	})
}

// TestInflightLimit: a connection at its in-flight limit is left alone
// (its requests wait in its ring) while other connections are served, and
// it resumes when its requests are answered.
func TestInflightLimit(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		release := make(chan struct{})
		var releaseOnce sync.Once
		defer releaseOnce.Do(func() { close(release) })
		var blocked atomic.Int64
		h := map[uint16]HandlerFunc{
			typeEcho: func(r *ServerRequest) Reply { return Reply{Payload: r.Payload} },
			typeSlow: func(r *ServerRequest) Reply {
				blocked.Add(1)
				<-release
				return Reply{Payload: r.Payload}
			},
		}
		s, _ := start(t, e, ServerConfig{Handlers: h, Workers: 8, MaxInflight: 2})
		greedy := dial(t, e, s, ClientConfig{})
		other := dial(t, e, s, ClientConfig{})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done := make(chan *Call, 10)
		for range 6 {
			greedy.Go(ctx, Request{Type: typeSlow, Payload: []byte{1}}, done)
		}
		time.Sleep(100 * time.Millisecond)
		if n := blocked.Load(); n != 2 {
			t.Fatalf("%d requests of one connection in handlers, limit 2", n)
		}
		if _, err := call(t, other, Request{Type: typeEcho, Payload: []byte("served")}); err != nil {
			t.Fatalf("other client: %v", err)
		}
		releaseOnce.Do(func() { close(release) })
		for range 6 {
			select {
			case cl := <-done:
				if cl.Err != nil {
					t.Fatal(cl.Err)
				}
			case <-ctx.Done():
				t.Fatal("the limited connection did not resume")
			}
		}
	})
}

// workerEcho is an echo handler whose replies say a worker served them
// (StatusFirstApp+1), counting them in served.
func workerEcho(served *atomic.Int64) map[uint16]HandlerFunc {
	return map[uint16]HandlerFunc{
		typeEcho: func(r *ServerRequest) Reply {
			served.Add(1)
			return Reply{Status: StatusFirstApp + 1, Payload: r.Payload}
		},
	}
}

// TestShortHandlers: a ShortFunc answers on the spinner what it can and
// declines the rest, which the type's worker handler answers; replies
// match their requests either way, on every transport.
func TestShortHandlers(t *testing.T) {
	poisonFreed = true // the echo's reply is the request's payload: freed only after the reply
	defer func() { poisonFreed = false }()
	forEnv(t, func(t *testing.T, e env) {
		var onWorker atomic.Int64
		cfg := ServerConfig{Workers: 2, Handlers: workerEcho(&onWorker), Short: map[uint16]ShortFunc{
			typeEcho: func(r *ServerRequest) (Reply, bool) {
				if r.Payload[0]%2 == 1 {
					return Reply{}, false // odd: the worker's
				}
				return Reply{Status: StatusFirstApp, Payload: r.Payload}, true
			},
		}}
		s, _ := start(t, e, cfg)
		c := dial(t, e, s, ClientConfig{})
		const n = 200
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range n / 8 {
					p := []byte{byte(g*n/8 + i), 1, 2, 3}
					rep, err := call(t, c, Request{Type: typeEcho, Payload: p})
					if err != nil {
						t.Error(err)
						return
					}
					want := StatusFirstApp
					if p[0]%2 == 1 {
						want = StatusFirstApp + 1
					}
					if rep.Status != want || !bytes.Equal(rep.Payload, p) {
						t.Errorf("request %v: reply status %d payload %v, want %d and the request's", p, rep.Status, rep.Payload, want)
					}
				}
			})
		}
		wg.Wait()
		if st := s.Stats(); st.Requests != n || st.Short != n/2 || onWorker.Load() != n/2 {
			t.Fatalf("requests %d, short %d, on workers %d; want %d, %d, %d", st.Requests, st.Short, onWorker.Load(), n, n/2, n/2)
		}
	})
}

// TestShortHandlerLater: a ShortFunc that takes its request's reply with
// Later has it sent from another goroutine, after the spinner went on to
// other requests; one that takes it and then declines leaves the request
// to a worker, whose reply is the one sent.
func TestShortHandlerLater(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		var onWorker atomic.Int64
		held := make(chan func(), 256)
		cfg := ServerConfig{Workers: 2, Handlers: workerEcho(&onWorker), Short: map[uint16]ShortFunc{
			typeEcho: func(r *ServerRequest) (Reply, bool) {
				switch r.Payload[0] % 3 {
				case 0: // later: answered once the requests answered now are
					l := r.Later()
					p := append([]byte(nil), r.Payload...)
					held <- func() { l.Reply(Reply{Status: StatusFirstApp + 2, Payload: p}) }
					return Reply{}, true
				case 1: // taken, then declined: the worker's
					r.Later()
					return Reply{}, false
				}
				return Reply{Status: StatusFirstApp, Payload: r.Payload}, true
			},
		}}
		s, _ := start(t, e, cfg)
		c := dial(t, e, s, ClientConfig{})
		const n = 30 // the client's rings hold them all: a held reply keeps its request's room
		var wg, now sync.WaitGroup
		now.Add(n / 3)
		for i := range n {
			wg.Go(func() {
				if i%3 == 2 {
					defer now.Done()
				}
				p := []byte{byte(i), 1, 2, 3}
				rep, err := call(t, c, Request{Type: typeEcho, Payload: p})
				if err != nil {
					t.Error(err)
					return
				}
				want := map[int]uint16{0: StatusFirstApp + 2, 1: StatusFirstApp + 1, 2: StatusFirstApp}[i%3]
				if rep.Status != want || !bytes.Equal(rep.Payload, p) {
					t.Errorf("request %v: reply status %d payload %v, want %d and the request's", p, rep.Status, rep.Payload, want)
				}
			})
		}
		now.Wait() // every request answered now was, with the later ones held
		for range n / 3 {
			(<-held)()
		}
		wg.Wait()
		if st := s.Stats(); st.Requests != n || st.Short != 2*n/3 || onWorker.Load() != n/3 {
			t.Fatalf("requests %d, short %d, on workers %d; want %d, %d, %d", st.Requests, st.Short, onWorker.Load(), n, 2*n/3, n/3)
		}
	})
}

// TestLaterRetiresRequest: a reply sent through Later retires its request
// as a spinner's or a worker's does, so a connection at its in-flight
// limit gets room again.
func TestLaterRetiresRequest(t *testing.T) {
	forEnv(t, func(t *testing.T, e env) {
		cfg := ServerConfig{Workers: 1, MaxInflight: 2, Short: map[uint16]ShortFunc{
			typeEcho: func(r *ServerRequest) (Reply, bool) {
				l := r.Later()
				p := append([]byte(nil), r.Payload...)
				go l.Reply(Reply{Status: StatusFirstApp, Payload: p})
				return Reply{}, true
			},
		}}
		s, _ := start(t, e, cfg)
		c := dial(t, e, s, ClientConfig{})
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 10 {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					rep, err := c.Call(ctx, Request{Type: typeEcho, Payload: []byte{byte(g), byte(i)}})
					cancel()
					if err != nil || rep.Status != StatusFirstApp {
						t.Errorf("goroutine %d call %d: status %d, %v", g, i, rep.Status, err)
						return
					}
				}
			})
		}
		wg.Wait()
	})
}

// TestCanReplyLater: a connection may be answered later from any
// goroutine unless its transport could wait for the client to read its
// replies: tcp with a reply ring bigger than its queue.
func TestCanReplyLater(t *testing.T) {
	for _, tc := range []struct {
		name string
		tr   rdma.Transport
		addr func(*testing.T) string
		ring int
		want bool
	}{
		{"shm, large ring", &rdma.Shm{}, envs[1].addr, 8 << 20, true},
		{"tcp, default ring", &rdma.TCP{}, envs[2].addr, 0, true},
		{"tcp, ring over its queue", &rdma.TCP{MaxQueued: 1 << 20}, envs[2].addr, 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := make(chan bool, 1)
			cfg := ServerConfig{Transport: tc.tr, Addr: tc.addr(t), Handlers: handlers(new(atomic.Int64)), Short: map[uint16]ShortFunc{
				typeEcho: func(r *ServerRequest) (Reply, bool) {
					select {
					case seen <- r.CanReplyLater():
					default:
					}
					return Reply{Status: StatusFirstApp, Payload: r.Payload}, true
				},
			}}
			s, err := Listen(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, err := Dial(ctx, ClientConfig{Transport: tc.tr, Addr: s.Addr(), ReplyRing: tc.ring})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Call(ctx, Request{Type: typeEcho, Payload: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			if got := <-seen; got != tc.want {
				t.Fatalf("CanReplyLater %v, want %v", got, tc.want)
			}
		})
	}
}

package ring

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/rdma"
)

// HandlerFunc serves one request, on a worker goroutine (handlers run
// concurrently). req.Payload is valid only during the call; the reply's
// payload is copied out before the reply is sent, so the handler may reuse
// it once it returns.
type HandlerFunc func(req *ServerRequest) Reply

// ShortFunc serves a request on the spinner that took it off its ring,
// without a hand-off to a worker: it answers (ok true) only if it can
// without waiting for other goroutines (a group commit, a replication
// acknowledgement; a file read is allowed: every ring of its spinner
// waits meanwhile), else it returns ok false, having changed nothing,
// and the request goes to a worker and the type's HandlerFunc. What
// must wait once begun may go on elsewhere: the ShortFunc takes the reply
// with req.Later and returns ok true, and the reply is sent when the wait
// ends. As with a HandlerFunc, req.Payload is valid only during the call
// and the reply's payload is copied out before the reply is sent.
type ShortFunc func(req *ServerRequest) (rep Reply, ok bool)

// ServerRequest is a request as a handler sees it.
type ServerRequest struct {
	Header
	Payload []byte
	// MaxReply is the largest reply payload the client's reply ring can
	// ever take (MaxPayload of its size; 0: not known): a handler bounds
	// what it builds by it.
	MaxReply int
	// Arrived is when the spinner took the request off its ring (zero
	// outside a server): a clock reading it takes then, or that it took
	// for an earlier request of the same poll round which it only queued
	// for a worker without waiting (no handler ran on the spinner
	// between the two). A handler's latency counted from it includes the
	// request's wait in a worker's queue.
	Arrived time.Time
	// Scratch, on a spinner, is a buffer of ScratchSize bytes' capacity
	// (length 0) that the spinner owns and lends to the ShortFunc it runs:
	// the Reply the ShortFunc returns may alias it, as the spinner writes
	// that reply into the client's ring before it serves another request.
	// A reply taken with Later must not alias it. Nil for a handler (on
	// a worker, or on the spinner of an Inline server) and outside a
	// server (NewShortRequest).
	Scratch []byte

	s *Server // the worker's server (nil on a spinner): WillBlock
	w int     // the worker's index

	c       *sconn      // on a spinner: the request's connection (Later)
	laterTo func(Reply) // outside a server (NewShortRequest): where Later's reply goes
	later   bool        // a ShortFunc took its reply (Later)
}

// NewShortRequest is a request as a ShortFunc sees it, for running one
// outside a server (tests): a reply taken with Later goes to reply. With
// reply nil it stands for a connection whose replies may wait for its
// client (CanReplyLater false), and Later must not be called.
func NewShortRequest(h Header, payload []byte, reply func(Reply)) *ServerRequest {
	return &ServerRequest{Header: h, Payload: payload, laterTo: reply}
}

// Later is a request's reply, taken out of its ShortFunc: the reply is
// sent by Reply, once, from any goroutine, for a request whose handling
// goes on after the ShortFunc returned (a put waiting for its group
// commit or its backups, without a worker held meanwhile).
type Later struct {
	c  *sconn
	h  Header
	to func(Reply) // NewShortRequest's
}

// Later takes the request's reply out of a ShortFunc. If the ShortFunc
// then returns ok true, the spinner sends no reply: the caller must call
// Reply exactly once (the connection is not freed before). If it returns
// ok false, the request goes to a worker as any declined one, and Reply
// must not be called. Only a ShortFunc may call it; on a worker it panics.
func (r *ServerRequest) Later() Later {
	if r.c == nil && r.laterTo == nil {
		panic("ring: Later outside a ShortFunc")
	}
	r.later = true
	return Later{c: r.c, h: r.Header, to: r.laterTo}
}

// CanReplyLater reports whether a reply taken with Later may be sent
// from another goroutine at any time without waiting for the client: its
// connection's transport never waits while the client leaves its whole
// reply ring unread (shm; tcp while that fits its queue). Otherwise a
// Later's reply may wait for the client, and a ShortFunc should send it
// before it returns or decline.
func (r *ServerRequest) CanReplyLater() bool {
	return r.laterTo != nil || (r.c != nil && r.c.laterOK)
}

// TookLater reports whether the request's reply was taken by Later.
func (r *ServerRequest) TookLater() bool { return r.later }

// Reply sends the reply (not if the connection closed meanwhile) and
// retires the request. As with a ShortFunc's reply, the payload is copied
// out before Reply returns.
func (l Later) Reply(rep Reply) {
	if l.to != nil {
		l.to(rep)
		return
	}
	if !l.c.closed.Load() {
		l.c.reply(l.h, rep)
	}
	l.c.done()
}

// ServerConfig configures a ring server.
type ServerConfig struct {
	Transport rdma.Transport
	Addr      string
	// Handlers by request type; other types get StatusUnknownType.
	Handlers map[uint16]HandlerFunc
	// Short, by request type, are tried first on the spinner (ShortFunc):
	// a request they answer costs no hand-off. A type here must also
	// have a Handlers entry, which serves what its ShortFunc declines.
	Short    map[uint16]ShortFunc
	Spinners int           // polling goroutines (default 1)
	Workers  int           // handler goroutines (default 4; 0 with Inline)
	Inline   bool          // run handlers on the spinner (no hand-off)
	SpinTime time.Duration // longest spin before parking (default DefaultSpin; spinPolicy)
	// QueueDepth is a worker's queue length; a spinner keeps giving a
	// worker requests until its queue holds this many (default 64); idle
	// workers steal from busy workers' queues.
	QueueDepth int
	// MaxInflight bounds one connection's requests taken off its ring and
	// not yet answered (default 256): beyond it the spinner leaves that
	// ring alone, so one client cannot fill every worker queue.
	MaxInflight int
	// ArriveWait bounds how long a message whose rendezvous word is
	// visible may take to arrive whole (its header verified, its tail
	// present) before its connection is closed as malformed (default
	// DefaultArriveWait). Meanwhile the spinner does not park.
	ArriveWait time.Duration
	Log        *zap.Logger
	// parallel and stallAfter, for tests: the workers dispatch goes round
	// (0: the cores the spinners leave) and how long a handler runs
	// before the requests queued behind it go to another worker (0:
	// stallAfter).
	parallel   int
	stallAfter time.Duration
	// Other, if set, takes the connection requests that are not ring
	// connections (their private data does not start with the ring
	// magic): it accepts or rejects them and owns what it accepts.
	Other func(rdma.ConnRequest) error
}

// Server accepts ring connections and serves them. Close stops it.
type Server struct {
	cfg      ServerConfig
	ln       rdma.Listener
	spinners []*spinner
	workers  []chan task
	ws       []workerState // worker i's running handler
	idle     atomic.Int32  // workers waiting for a request
	waking   atomic.Int32  // steal wake-ups sent and not yet taken by a worker
	parked   atomic.Int32  // spinners parked
	watch    chan struct{} // wakes a parked spinner: a handler started with requests queued behind it
	epoch    time.Time     // clock's zero
	parallel int           // workers dispatch goes round: the cores the spinners leave
	steal    chan struct{} // wakes idle workers to steal queued requests
	next     atomic.Uint32
	stop     chan struct{}
	wg       sync.WaitGroup
	closed   sync.Once
	log      *zap.Logger

	conns     atomic.Int64
	requests  atomic.Int64
	short     atomic.Int64
	noops     atomic.Int64
	malformed atomic.Int64
}

// Stats are a server's counters.
type Stats struct {
	Conns     int   // open connections
	Requests  int64 // requests handed to handlers
	Short     int64 // of which answered on a spinner (ServerConfig.Short)
	Noops     int64 // ring wraps (NOOP messages)
	Malformed int64 // connections closed for breaking the protocol
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	return Stats{Conns: int(s.conns.Load()), Requests: s.requests.Load(), Short: s.short.Load(), Noops: s.noops.Load(), Malformed: s.malformed.Load()}
}

type task struct {
	c   *sconn
	req ServerRequest
	buf *[]byte // pooled copy of the message's payload (getBuf)
}

// Listen starts a server on cfg.Addr.
func Listen(cfg ServerConfig) (*Server, error) {
	ln, err := cfg.Transport.Listen(cfg.Addr)
	if err != nil {
		return nil, err
	}
	s := newServer(cfg, ln)
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// NewServer starts a server without a listener of its own: it serves the
// connections given to Adopt (another server's Other hook hands them
// over), with its own spinners and workers.
func NewServer(cfg ServerConfig) *Server { return newServer(cfg, nil) }

// Adopt accepts a connection request on s. private is the request's ring
// parameters (the request's private data without the prefix the client
// put before them; see ClientConfig.PrivatePrefix).
func (s *Server) Adopt(req rdma.ConnRequest, private []byte) error {
	return s.acceptParams(req, private)
}

func newServer(cfg ServerConfig, ln rdma.Listener) *Server {
	if cfg.Spinners <= 0 {
		cfg.Spinners = 1
	}
	if cfg.Workers <= 0 && !cfg.Inline {
		cfg.Workers = 4
	}
	if cfg.SpinTime == 0 {
		cfg.SpinTime = DefaultSpin
	}
	if cfg.QueueDepth <= 0 {
		cfg.QueueDepth = 64
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 256
	}
	if cfg.ArriveWait <= 0 {
		cfg.ArriveWait = DefaultArriveWait
	}
	if cfg.stallAfter <= 0 {
		cfg.stallAfter = stallAfter
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	s := &Server{cfg: cfg, ln: ln, stop: make(chan struct{}), log: cfg.Log, epoch: time.Now()}
	if !cfg.Inline {
		s.steal = make(chan struct{}, cfg.Workers)
		s.watch = make(chan struct{}, 1)
		s.ws = make([]workerState, cfg.Workers)
		s.parallel = min(cfg.Workers, max(1, runtime.GOMAXPROCS(0)-cfg.Spinners))
		if cfg.parallel > 0 {
			s.parallel = min(cfg.Workers, cfg.parallel)
		}
		for range cfg.Workers {
			s.workers = append(s.workers, make(chan task, cfg.QueueDepth))
		}
		for i := range cfg.Workers {
			s.wg.Add(1)
			go pprof.Do(context.Background(), pprof.Labels("component", "ring-reply"), func(context.Context) { s.worker(i) })
		}
	}
	for range cfg.Spinners {
		sp := &spinner{s: s, cq: rdma.NewCQ(), add: make(chan *sconn, 16), wake: make(chan struct{}, 1), scratch: make([]byte, ScratchSize)}
		s.spinners = append(s.spinners, sp)
		s.wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("component", "ring-poll"), func(context.Context) { sp.run() })
	}
	return s
}

// Addr is the address the server listens on ("" without a listener).
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr()
}

// Close stops accepting, closes every connection and waits for the
// goroutines.
func (s *Server) Close() error {
	s.closed.Do(func() {
		close(s.stop)
		if s.ln != nil {
			s.ln.Close()
		}
	})
	s.wg.Wait()
	// The accept loop has exited: close connections still queued for a
	// spinner that stopped first.
	for _, sp := range s.spinners {
		for {
			select {
			case c := <-sp.add:
				c.close(ErrClosed)
				continue
			default:
			}
			break
		}
	}
	return nil
}

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	for {
		req, err := s.ln.Accept(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, rdma.ErrClosed) {
				return
			}
			s.log.Warn("accept failed", zap.Error(err))
			continue
		}
		if err := s.accept(req); err != nil {
			s.log.Info("connection refused", zap.Error(err))
		}
	}
}

// accept sets a connection up and gives it to a spinner.
func (s *Server) accept(req rdma.ConnRequest) error {
	if pd := req.Private(); s.cfg.Other != nil && (len(pd) < 4 || binary.LittleEndian.Uint32(pd) != connMagic) {
		return s.cfg.Other(req)
	}
	return s.acceptParams(req, req.Private())
}

// acceptParams sets up a connection whose ring parameters are private.
func (s *Server) acceptParams(req rdma.ConnRequest, private []byte) error {
	select {
	case <-s.stop:
		req.Reject()
		return ErrClosed
	default:
	}
	p, err := decodeConnParams(private)
	if err == nil && (len(req.PeerRegions()) != 1 || req.PeerRegions()[0].Len != uint64(p.repRing)) {
		err = fmt.Errorf("%w: client exposed %d regions, want its reply ring", ErrMalformed, len(req.PeerRegions()))
	}
	if err != nil {
		req.Reject()
		return err
	}
	c := &sconn{s: s, reqSize: int(p.reqRing), repSize: int(p.repRing), remote: req.PeerRegions()[0]}
	if c.reqMR, err = rdma.Register(c.reqSize); err != nil {
		req.Reject()
		return err
	}
	if c.repMR, err = rdma.Register(c.repSize); err != nil {
		c.reqMR.Deregister()
		req.Reject()
		return err
	}
	sp := s.spinners[int(s.next.Add(1))%len(s.spinners)]
	c.sp = sp
	if c.qp, err = req.Accept(rdma.ConnConfig{CQ: sp.cq, Expose: []*rdma.MR{c.reqMR}}); err != nil {
		c.reqMR.Deregister()
		c.repMR.Deregister()
		return err
	}
	// Unanswered replies are at most the reply ring's bytes, each at
	// least a header.
	c.laterOK = rdma.PostsWithoutWaiting(c.qp, c.repSize, c.repSize/HeaderSize)
	s.conns.Add(1)
	select {
	case sp.add <- c:
	case <-s.stop:
		c.close(ErrClosed)
	}
	return nil
}

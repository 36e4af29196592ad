package ring

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// ClientConfig configures a connection to a ring server.
type ClientConfig struct {
	Transport   rdma.Transport
	Addr        string
	RequestRing int           // bytes (default DefaultRing)
	ReplyRing   int           // bytes (default DefaultRing)
	SpinTime    time.Duration // longest poller spin before parking (default DefaultSpin; spinPolicy)
	// ReplyHint is the payload size reserved for a reply when a request
	// does not say (default 4 KiB); a larger reply costs one retry.
	ReplyHint int
	// ArriveWait bounds how long a reply header whose rendezvous word is
	// visible may fail to verify (its bytes still arriving) before the
	// connection breaks as malformed (default DefaultArriveWait).
	ArriveWait time.Duration
	// PrivatePrefix goes before the ring parameters in the connection
	// request: a server's Other hook recognizes it and hands the request
	// to the server it is meant for (Server.Adopt).
	PrivatePrefix []byte
}

// Request is one request message.
type Request struct {
	Type   uint16
	Region uint64
	Epoch  uint64
	// Payload is copied into the ring when the request is sent, and again
	// if the server asks for a larger reply slot: the caller must not
	// change it until Call or CallUntil returns, or a Go call completes.
	// A call whose Call returned unanswered (its context or deadline
	// ended) is not sent again.
	Payload []byte
	// Tail, if any, follows Payload in the request's payload: a caller
	// sends a header and a large body without joining them first. The
	// same rule as Payload's holds.
	Tail []byte
	// ReplySize is the reply payload to reserve room for (0: the hint).
	ReplySize int
}

// Reply is the server's answer. Payload is the caller's to keep.
type Reply struct {
	Status  uint16
	Aux     uint32
	Payload []byte
}

// Call is a request in flight (the asynchronous API).
type Call struct {
	Req   Request
	Reply Reply
	Err   error
	Done  chan *Call // receives the call when it completes

	id       uint64
	slot     uint64 // reply slot counter
	slotSize int
	reqEnd   uint64 // request ring counter after the message
	retried  bool
	ctxDone  <-chan struct{}
	badSince time.Time // when its reply header first failed to verify
	// until ends a CallUntil's wait (zero: none): once it has passed, the
	// poller sends on expire, once (expired).
	until   time.Time
	expire  chan struct{}
	expired bool
	// abandoned: its CallUntil returned before the reply (under mu): a
	// resend must not read its request again (the caller may reuse it).
	abandoned bool
}

// Client is one connection's client end. Safe for concurrent use.
type Client struct {
	cfg    ClientConfig
	qp     rdma.QP
	cq     *rdma.CQ
	reqMR  *rdma.MR // mirror of the request ring, written from
	repMR  *rdma.MR // reply ring, written by the server
	remote rdma.RemoteMR

	mu      sync.Mutex
	req     spans
	rep     spans
	nextID  uint64
	pending map[uint64]*Call // by id
	bySlot  []*Call          // pending calls, for the poller
	space   chan struct{}    // closed when ring room frees, if spaceWait
	// spaceWait: a sender waits on space (complete closes and replaces
	// it only then: no allocation per reply otherwise).
	spaceWait bool
	err       error // set once the connection is broken
	hint      int

	// kick wakes the poller parked with no call pending (idle, under
	// mu); parked with calls pending, it waits for their replies'
	// doorbell, and a new call need not wake it, unless its deadline
	// (CallUntil) comes before armed, the deadline the poller's timer is
	// set for (under mu; zero: none).
	kick      chan struct{}
	idle      bool
	armed     time.Time
	stop      chan struct{}
	closeOnce sync.Once
	done      chan struct{}

	sent, received atomic.Uint64 // message bytes WRITten each way
}

// ClientStats are a connection's transport byte counts.
type ClientStats struct {
	BytesSent     uint64 // request messages (and NOOPs) written to the server
	BytesReceived uint64 // reply messages the server wrote to us
}

// Stats returns the connection's byte counts so far.
func (c *Client) Stats() ClientStats {
	return ClientStats{BytesSent: c.sent.Load(), BytesReceived: c.received.Load()}
}

// Dial connects to a ring server.
func Dial(ctx context.Context, cfg ClientConfig) (*Client, error) {
	if cfg.RequestRing == 0 {
		cfg.RequestRing = DefaultRing
	}
	if cfg.ReplyRing == 0 {
		cfg.ReplyRing = DefaultRing
	}
	if cfg.SpinTime == 0 {
		cfg.SpinTime = DefaultSpin
	}
	if cfg.ArriveWait <= 0 {
		cfg.ArriveWait = DefaultArriveWait
	}
	if cfg.ReplyHint == 0 {
		cfg.ReplyHint = 4 << 10
	}
	if err := checkRing(cfg.RequestRing); err != nil {
		return nil, err
	}
	if err := checkRing(cfg.ReplyRing); err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, cq: rdma.NewCQ(), pending: map[uint64]*Call{}, space: make(chan struct{}),
		hint: cfg.ReplyHint, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	c.req.size, c.rep.size = uint64(cfg.RequestRing), uint64(cfg.ReplyRing)
	var err error
	if c.reqMR, err = rdma.Register(cfg.RequestRing); err != nil {
		return nil, err
	}
	if c.repMR, err = rdma.Register(cfg.ReplyRing); err != nil {
		c.reqMR.Deregister()
		return nil, err
	}
	params := connParams{reqRing: uint32(cfg.RequestRing), repRing: uint32(cfg.ReplyRing)}
	c.qp, err = cfg.Transport.Dial(ctx, cfg.Addr, rdma.ConnConfig{CQ: c.cq, Expose: []*rdma.MR{c.repMR}, Private: append(append([]byte(nil), cfg.PrivatePrefix...), params.encode()...)})
	if err == nil && (len(c.qp.PeerRegions()) != 1 || c.qp.PeerRegions()[0].Len != uint64(cfg.RequestRing)) {
		c.qp.Close()
		err = fmt.Errorf("%w: server exposed %v, want one request ring of %d bytes", ErrMalformed, c.qp.PeerRegions(), cfg.RequestRing)
	}
	if err != nil {
		c.reqMR.Deregister()
		c.repMR.Deregister()
		return nil, err
	}
	c.remote = c.qp.PeerRegions()[0]
	go c.poller()
	return c, nil
}

// callPool recycles the calls of Call (with their Done channels): a call
// goes back only once the poller delivered its reply (no error), after
// which nothing of the client reads it; one failed by a broken connection
// may still be in the middle of the poller's scan, and is not reused.
var callPool = sync.Pool{New: func() any { return &Call{Done: make(chan *Call, 1), expire: make(chan struct{}, 1)} }}

// Call sends req and waits for its reply.
func (c *Client) Call(ctx context.Context, req Request) (Reply, error) {
	return c.CallUntil(ctx, time.Time{}, req)
}

// CallUntil is Call that also ends once until has passed (zero: never),
// with an error wrapping context.DeadlineExceeded, without a timer of its
// own: the poller watches the pending calls' deadlines (a wait may end
// a few poller rounds late, never early: coarseClock); only a wait for ring room (rings full of
// unanswered calls) takes a timer. As when ctx ends, the call's reply
// slot stays reserved until its reply arrives.
func (c *Client) CallUntil(ctx context.Context, until time.Time, req Request) (Reply, error) {
	call := callPool.Get().(*Call)
	done, expire := call.Done, call.expire
	*call = Call{Req: req, Done: done, ctxDone: ctx.Done(), until: until, expire: expire}
	if err := c.send(ctx, call); err != nil {
		return Reply{}, err // not registered: dropped
	}
	select {
	case <-done:
		rep, err := call.Reply, call.Err
		// One told of its deadline as its reply came (expired: written
		// before the delivery) holds a token on expire: not reused.
		if err == nil && !call.expired {
			*call = Call{Done: done, expire: expire}
			callPool.Put(call)
		}
		return rep, err
	case <-ctx.Done():
		// The reply slot stays reserved until the reply arrives; the
		// call is not reused.
		c.abandon(call)
		return Reply{}, ctx.Err()
	case <-expire:
		c.abandon(call)
		return Reply{}, fmt.Errorf("ring: request %d unanswered at its deadline: %w", call.id, context.DeadlineExceeded)
	}
}

// abandon marks a call its caller no longer waits for: a resend (a
// larger reply slot) does not read its request, which the caller may
// reuse once this returns (send copies it under mu).
func (c *Client) abandon(call *Call) {
	c.mu.Lock()
	call.abandoned = true
	c.mu.Unlock()
}

// errAbandoned: a call's resend found its caller gone.
var errAbandoned = errors.New("ring: call abandoned by its caller before its resend")

// Go sends req asynchronously; done (nil for a new one; else it must have
// room, or the notification is dropped) receives the call when its reply
// arrives or it fails. ctx bounds only the
// wait for ring room.
func (c *Client) Go(ctx context.Context, req Request, done chan *Call) *Call {
	if done == nil {
		done = make(chan *Call, 1)
	}
	call := &Call{Req: req, Done: done, ctxDone: ctx.Done()}
	if err := c.send(ctx, call); err != nil {
		call.Err = err
		deliver(call)
	}
	return call
}

// errNoRoomInTime: a CallUntil's deadline passed while it waited for ring
// room.
var errNoRoomInTime = fmt.Errorf("ring: no room for the request before its deadline: %w", context.DeadlineExceeded)

// send reserves a reply slot and request ring room (waiting for room) and
// posts the request.
func (c *Client) send(ctx context.Context, call *Call) error {
	if req := call.Req; req.Type < TypeFirstApp && req.Type != 0 {
		return fmt.Errorf("ring: request type %d is reserved", req.Type)
	}
	msgSize := MsgSize(len(call.Req.Payload) + len(call.Req.Tail))
	if msgSize > c.cfg.RequestRing/2 {
		return fmt.Errorf("%w: request of %d bytes, limit %d", ErrTooLarge, len(call.Req.Payload)+len(call.Req.Tail), c.cfg.RequestRing/2-HeaderSize-8)
	}
	c.mu.Lock()
	replySize := call.Req.ReplySize
	if replySize == 0 {
		replySize = c.hint
	}
	if call.retried {
		replySize = int(call.Reply.Aux)
	}
	call.slotSize = min(MsgSize(replySize), c.cfg.ReplyRing/2)
	if call.retried && call.slotSize < int(call.Reply.Aux) {
		c.mu.Unlock()
		return fmt.Errorf("%w: reply of %d bytes, limit %d", ErrTooLarge, call.Reply.Aux, c.cfg.ReplyRing/2)
	}
	var deadline <-chan time.Time // a CallUntil's, while it waits for room
	for {
		// Checked under mu on every pass, the last one held until the
		// request is copied into the ring.
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return err
		}
		if call.abandoned {
			c.mu.Unlock()
			return errAbandoned
		}
		if c.roomLocked(uint64(call.slotSize), uint64(msgSize)) {
			break
		}
		if !call.until.IsZero() && deadline == nil {
			left := time.Until(call.until)
			if left <= 0 {
				c.mu.Unlock()
				return errNoRoomInTime
			}
			t := time.NewTimer(left) // the slow path only: the rings are full
			defer t.Stop()
			deadline = t.C
		}
		space := c.space
		c.spaceWait = true
		c.mu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return errNoRoomInTime
		}
		c.mu.Lock()
	}
	slot, _, _ := c.rep.reserve(uint64(call.slotSize))
	at, skip, _ := c.req.reserve(uint64(msgSize))
	c.nextID++
	call.id, call.slot, call.reqEnd = c.nextID, slot, at+uint64(msgSize)
	buf := c.reqMR.Bytes()
	if skip > 0 {
		// Fill the lap's end with a NOOP: the server skips to the start.
		off := int((at - skip) % c.req.size)
		h := Header{Type: TypeNoop, Len: uint32(skip - HeaderSize)}
		h.put(buf[off:])
		if err := c.post(off, HeaderSize, false); err != nil {
			return c.breakUnlock(err)
		}
		c.sent.Add(HeaderSize)
	}
	off := int(at % c.req.size)
	h := Header{Type: call.Req.Type, ReqID: call.id, ReplyOff: uint32(slot % c.rep.size), ReplySize: uint32(call.slotSize),
		Region: call.Req.Region, Epoch: call.Req.Epoch}
	encode(buf[off:], h, call.Req.Payload, call.Req.Tail)
	if err := c.post(off, msgSize, true); err != nil {
		return c.breakUnlock(err)
	}
	c.sent.Add(uint64(msgSize))
	c.pending[call.id] = call
	c.bySlot = append(c.bySlot, call)
	// The poller parked only for what it saw: a call that must end
	// before its deadline timer (CallUntil) wakes it to re-arm.
	kick := c.idle || (!call.until.IsZero() && (c.armed.IsZero() || call.until.Before(c.armed)))
	c.idle = false
	c.mu.Unlock()
	if kick {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// breakUnlock breaks the client (mu held), unlocks, fails the pending
// calls and returns the error for the caller's own call.
func (c *Client) breakUnlock(err error) error {
	calls := c.breakLocked(err)
	err = c.err
	c.mu.Unlock()
	for _, call := range calls {
		deliver(call)
	}
	return err
}

// fail breaks the client and fails every pending call.
func (c *Client) fail(err error) {
	c.mu.Lock()
	_ = c.breakUnlock(err)
}

// deliver hands a finished call to its Done channel, which must have room
// (as in net/rpc, a full channel drops the notification rather than stall
// the client).
func deliver(call *Call) {
	select {
	case call.Done <- call:
	default:
	}
}

// roomLocked reports whether both rings have room now.
func (c *Client) roomLocked(slot, msg uint64) bool {
	fits := func(s *spans, n uint64) bool {
		off := s.tail % s.size
		skip := uint64(0)
		if off+n > s.size {
			skip = s.size - off
		}
		return s.tail+skip+n-s.head <= s.size
	}
	return fits(&c.rep, slot) && fits(&c.req, msg)
}

func (c *Client) post(off, n int, solicited bool) error {
	return c.qp.PostWrite(rdma.WriteWR{Local: c.reqMR, LocalOff: off, Len: n, Remote: c.remote, RemoteOff: uint64(off), Solicited: solicited})
}

// breakLocked marks the client broken and returns the pending calls, failed,
// for the caller to deliver once it has unlocked mu.
func (c *Client) breakLocked(err error) []*Call {
	if c.err != nil {
		return nil
	}
	c.err = fmt.Errorf("%w: %w", ErrClosed, err)
	calls := make([]*Call, 0, len(c.pending))
	for _, call := range c.pending {
		call.Err = c.err
		calls = append(calls, call)
	}
	clear(c.pending)
	c.bySlot = nil
	close(c.space)
	c.space, c.spaceWait = make(chan struct{}), false
	return calls
}

// Close breaks the connection; pending calls fail with ErrClosed.
func (c *Client) Close() error {
	c.fail(fmt.Errorf("client closed"))
	c.closeOnce.Do(func() { close(c.stop) })
	<-c.done
	c.qp.Close()
	c.reqMR.Deregister()
	c.repMR.Deregister()
	return nil
}

// Err is non-nil once the connection is broken or closed: the client
// must be replaced.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

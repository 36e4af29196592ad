package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/pki"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

// Config configures a client.
type Config struct {
	Map regionmap.Source // required: where the region map comes from
	// Transport is "tcp" (default) or "shm"; a server without an address
	// on it is reached on the other.
	Transport string
	// DialTransport, if set, carries every connection in place of the tcp
	// and shm transports, at the address Transport picks (an in-process
	// rdma.Loopback, in tests).
	DialTransport rdma.Transport
	RingSize      int // bytes per ring (default ring.DefaultRing)
	// SpinTime is how long a connection's reply poller spins after a
	// reply, or a call that woke it, before it parks on its doorbell
	// (default ring.DefaultSpin). A client that shares its cores with
	// the servers it calls wants less: a spinning poller takes the core
	// a server needs.
	SpinTime time.Duration
	// Retries bounds the WRONG_REGION redirects (and reconnections) of
	// one operation (default 8). A region the map shows moving its
	// primary (regionmap.Assignment.MoveTo), and a server that has not
	// installed the client's map yet, are retried past Retries,
	// following newer maps, until RetryWindow has passed since the
	// operation's first attempt.
	Retries int
	// ReplyHint is the reply payload a get reserves room for (default
	// 4 KiB); larger values cost one retry and raise the hint.
	ReplyHint int
	// RetryWindow bounds how long a put or delete is attempted, from its
	// first attempt (default DefaultRetryWindow, at most MaxRetryWindow):
	// no attempt of it is sent later, so the regions, which remember a
	// write's outcome for longer (engine.DefaultRequestRetention), never
	// apply a retry twice.
	RetryWindow time.Duration
	// ClientID names this client in its writes' request identities; 0
	// (the default) picks a random one. Two clients must never share one.
	ClientID uint64
	// TLSCert, TLSKey and TLSCA (PEM files, all three or none) make tcp
	// connections mutually authenticated TLS: the client presents TLSCert
	// and accepts only servers whose certificate TLSCA signed for the
	// host it dials. None: plaintext, which a server configured with TLS
	// refuses. They do not apply to shm or DialTransport.
	TLSCert, TLSKey, TLSCA string
}

// Client talks to a tebis cluster.
type Client struct {
	cfg Config
	tls *tls.Config // tcp's; nil: plaintext
	m   atomic.Pointer[regionmap.Map]
	// newer is closed, and replaced, when m is (storeMap): a retry
	// waiting out its backoff goes at once on a newer map.
	newer atomic.Pointer[chan struct{}]

	mu     sync.Mutex
	conns  map[string]*ring.Client // by server name
	closed bool

	refreshMu sync.Mutex
	dropped   ring.ClientStats // byte counts of connections closed

	id   uint64      // request identity: this client's id
	seqs *seqTracker // and its write sequence numbers
}

// Stats are the transport bytes of every connection so far.
func (c *Client) Stats() ring.ClientStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.dropped
	for _, rc := range c.conns {
		s := rc.Stats()
		st.BytesSent += s.BytesSent
		st.BytesReceived += s.BytesReceived
	}
	return st
}

// Open loads the region map; connections are made on first use.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.Map == nil {
		return nil, fmt.Errorf("client: no region map source")
	}
	if cfg.Transport == "" {
		cfg.Transport = "tcp"
	}
	if cfg.Transport != "tcp" && cfg.Transport != "shm" {
		return nil, fmt.Errorf("client: transport %q: want tcp or shm", cfg.Transport)
	}
	if cfg.RingSize == 0 {
		cfg.RingSize = ring.DefaultRing
	}
	if cfg.Retries < 0 {
		return nil, fmt.Errorf("client: Retries %d is negative", cfg.Retries)
	}
	if cfg.Retries == 0 {
		cfg.Retries = 8
	}
	if cfg.ReplyHint == 0 {
		cfg.ReplyHint = 4 << 10
	}
	if cfg.RetryWindow == 0 {
		cfg.RetryWindow = DefaultRetryWindow
	}
	if cfg.RetryWindow < 0 || cfg.RetryWindow > MaxRetryWindow {
		return nil, fmt.Errorf("client: RetryWindow %v outside (0, %v]", cfg.RetryWindow, MaxRetryWindow)
	}
	if cfg.SpinTime < 0 || cfg.SpinTime > time.Second {
		return nil, fmt.Errorf("client: SpinTime %v outside [0, 1s]", cfg.SpinTime)
	}
	tlsCfg, err := pki.Load(pki.Files{Cert: cfg.TLSCert, Key: cfg.TLSKey, CA: cfg.TLSCA})
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	id := cfg.ClientID
	if id == 0 {
		var err error
		if id, err = newClientID(); err != nil {
			return nil, err
		}
	}
	m, err := cfg.Map.Load(ctx)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, tls: tlsCfg, conns: map[string]*ring.Client{}, id: id, seqs: newSeqTracker()}
	c.storeMap(m)
	if z, ok := cfg.Map.(*ZooKeeper); ok {
		z.subscribe(c.adopt)
	}
	return c, nil
}

// Map is the region map the client currently routes by.
func (c *Client) Map() *regionmap.Map { return c.m.Load() }

// MaxValue is the largest value a put can carry over this client's rings
// (the server may allow less).
func (c *Client) MaxValue(keyLen int) int {
	return c.cfg.RingSize/2 - ring.HeaderSize - 8 - 12 - wire.RequestIDLen - keyLen
}

// Close closes every connection; later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	c.closed = true
	conns := c.conns
	c.conns = map[string]*ring.Client{}
	c.mu.Unlock()
	for _, rc := range conns {
		rc.Close()
	}
	return nil
}

// cachedConn returns the open connection to server name, if any, without
// waiting (ErrClosed: the client is closed).
func (c *Client) cachedConn(name string) (*ring.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	return c.conns[name], nil
}

// conn returns the connection to a server, dialing it if needed.
func (c *Client) conn(ctx context.Context, m *regionmap.Map, name string) (*ring.Client, error) {
	if rc, err := c.cachedConn(name); rc != nil || err != nil {
		return rc, err
	}
	srv, ok := m.Server(name)
	if !ok {
		return nil, fmt.Errorf("%w: server %q not in map version %d", ErrUnavailable, name, m.Version)
	}
	tname := c.cfg.Transport
	addr := srv.Addr(tname)
	if addr == "" && tname == "tcp" && c.tls != nil {
		// A client that authenticates servers by TLS does not fall back
		// to shm, whose listener it cannot authenticate.
		return nil, fmt.Errorf("%w: server %s has no tcp address (this client uses TLS and does not fall back to shm)", ErrUnavailable, name)
	}
	if addr == "" {
		tname = map[string]string{"tcp": "shm", "shm": "tcp"}[tname]
		addr = srv.Addr(tname)
	}
	var tr rdma.Transport = &rdma.TCP{TLS: c.tls}
	switch {
	case c.cfg.DialTransport != nil:
		tr = c.cfg.DialTransport
	case tname == "shm":
		tr = &rdma.Shm{}
	}
	rc, err := ring.Dial(ctx, ring.ClientConfig{Transport: tr, Addr: addr, RequestRing: c.cfg.RingSize, ReplyRing: c.cfg.RingSize, ReplyHint: c.cfg.ReplyHint, SpinTime: c.cfg.SpinTime})
	if err != nil {
		return nil, fmt.Errorf("%w: server %s at %s %s: %w", ErrUnavailable, name, tname, addr, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		rc.Close()
		return nil, ErrClosed
	}
	if old, ok := c.conns[name]; ok {
		rc.Close()
		return old, nil
	}
	c.conns[name] = rc
	return rc, nil
}

// drop forgets a broken connection.
func (c *Client) drop(name string, rc *ring.Client) {
	c.mu.Lock()
	if c.conns[name] == rc {
		delete(c.conns, name)
		s := rc.Stats()
		c.dropped.BytesSent += s.BytesSent
		c.dropped.BytesReceived += s.BytesReceived
	}
	c.mu.Unlock()
	rc.Close()
}

// refresh reloads the map until its version reaches want (the version a
// server answered with), or one reload if want is older than ours.
func (c *Client) refresh(ctx context.Context, want uint64) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if cur := c.m.Load(); cur.Version >= want && want != 0 {
		return nil
	}
	m, err := c.cfg.Map.Load(ctx)
	if err != nil {
		return err
	}
	if m.Version > c.m.Load().Version {
		c.storeMap(m)
	}
	return nil
}

// storeMap routes by m from now on and wakes the retries waiting for a
// newer map. Called with refreshMu held (or before c is shared).
func (c *Client) storeMap(m *regionmap.Map) {
	c.m.Store(m)
	ch := make(chan struct{})
	if old := c.newer.Swap(&ch); old != nil {
		close(*old)
	}
}

// adopt routes by m from now on if it is newer than the current map.
func (c *Client) adopt(m *regionmap.Map) {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	if m.Version > c.m.Load().Version {
		c.storeMap(m)
	}
}

// request is one routed operation.
type request struct {
	typ       uint16
	key       []byte                      // routes the request
	region    *regionmap.Assignment       // or this region (scans)
	payload   func(version uint64) []byte // encodes with the map version used
	replySize int
	// start is when the request began (zero: when do is called).
	start time.Time
}

// do routes req, sends it and follows WRONG_REGION redirects. It returns
// the OK (or NOT_FOUND) reply and the region that answered. until ends
// the request's attempts (zero: only ctx does: a write's retry window);
// tail follows the payload (ring.Request.Tail). Both are parameters, not
// fields of req, because the ring keeps them: req, its payload's closure
// with it, then stays on the caller's stack.
func (c *Client) do(ctx context.Context, req request, until time.Time, tail []byte) (ring.Reply, *regionmap.Assignment, error) {
	// A deadline (until) is a context with a timer only once
	// something but the first attempt's call waits: the ring bounds that
	// call itself (CallUntil), and most requests end with it.
	var cancel context.CancelFunc
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	waitCtx := func() context.Context {
		if !until.IsZero() && cancel == nil {
			ctx, cancel = context.WithDeadline(ctx, until)
		}
		return ctx
	}
	var last error
	const firstBackoff = 200 * time.Microsecond
	backoff := firstBackoff
	start := req.start
	if start.IsZero() {
		start = time.Now()
	}
	var newer chan struct{}
	for attempt := 0; attempt <= c.cfg.Retries; attempt++ {
		if attempt > 0 {
			waitCtx()
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				if last != nil {
					return ring.Reply{}, nil, fmt.Errorf("%w (last attempt: %w)", ctx.Err(), last)
				}
				return ring.Reply{}, nil, ctx.Err()
			case <-newer:
				// A newer map (a failover's): the region may be served
				// now, or soon; back off from the start again.
				backoff = firstBackoff / 2
			case <-t.C:
			}
			t.Stop()
			backoff = min(2*backoff, 100*time.Millisecond)
		}
		newer = *c.newer.Load()
		m := c.m.Load()
		r := m.Lookup(req.key)
		if req.region != nil {
			r = m.Region(req.region.ID)
			if r == nil || r.Start != req.region.Start || r.End != req.region.End {
				return ring.Reply{}, nil, errRegionMoved
			}
		}
		if r == nil {
			return ring.Reply{}, nil, fmt.Errorf("%w: no region for key", ErrWrongRegion)
		}
		rc, err := c.cachedConn(r.Primary)
		if rc == nil && err == nil {
			rc, err = c.conn(waitCtx(), m, r.Primary)
		}
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return ring.Reply{}, nil, err
			}
			last = err
			_ = c.refresh(waitCtx(), 0)
			continue
		}
		rep, err := rc.CallUntil(ctx, until, ring.Request{Type: req.typ, Region: r.ID, Epoch: r.Epoch, Payload: req.payload(m.Version), Tail: tail, ReplySize: req.replySize})
		switch {
		case errors.Is(err, ring.ErrTooLarge):
			return rep, r, fmt.Errorf("%w: %w", ErrTooLarge, err)
		case errors.Is(err, ring.ErrClosed):
			// The connection broke (server restart?): redial.
			c.drop(r.Primary, rc)
			last = fmt.Errorf("%w: %w", ErrUnavailable, err)
			continue
		case err != nil:
			return rep, r, err
		}
		if rep.Status == wire.StatusWrongRegion {
			v, _ := wire.DecodeVersion(rep.Payload)
			last = fmt.Errorf("%w: map version %d, server %s has %d", ErrWrongRegion, m.Version, r.Primary, v)
			if v < m.Version {
				// The server has not installed our map yet (it is busy
				// taking up a new role, as a promoted backup does): it
				// will, so the attempt does not count within RetryWindow.
				last = fmt.Errorf("%w: server %s is at map version %d, the client at %d", ErrUnavailable, r.Primary, v, m.Version)
				if time.Since(start) < c.cfg.RetryWindow {
					attempt--
				}
				continue
			}
			if v == m.Version && req.region == nil && m.Lookup(req.key).ID == r.ID {
				// Same map, same route: retrying cannot help (a batch
				// whose keys span regions, say).
				return rep, r, last
			}
			if err := c.refresh(waitCtx(), v); err != nil {
				return rep, r, err
			}
			continue
		}
		if rep.Status == wire.StatusUnavailable || rep.Status == wire.StatusStorage {
			last = statusErr(rep)
			if r.MoveTo != "" && rep.Status == wire.StatusUnavailable && time.Since(start) < c.cfg.RetryWindow {
				// A move in flight: its promotion is the next map. Not an
				// attempt of the budget.
				attempt--
				_ = c.refresh(waitCtx(), 0)
			}
			continue
		}
		return rep, r, nil
	}
	return ring.Reply{}, nil, last
}

// errRegionMoved: a scan's region changed shape; the scan re-routes.
var errRegionMoved = errors.New("client: region changed")

// Put stores value under key. Its retries (after UNAVAILABLE, a broken
// connection, a redirect) carry the same request identity, so the put is
// applied at most once; it is retried for at most Config.RetryWindow.
func (c *Client) Put(ctx context.Context, key, value []byte) error {
	if len(value) > c.MaxValue(len(key)) {
		return fmt.Errorf("%w: value of %d bytes, this client's limit %d", ErrTooLarge, len(value), c.MaxValue(len(key)))
	}
	return c.write(ctx, wire.TypePut, key, value, func(v uint64, id wire.RequestID) []byte {
		q := wire.PutRequest{MapVersion: v, ID: id, Key: key}
		return q.EncodeHead(nil)
	})
}

// Get returns the value under key, or ErrNotFound.
func (c *Client) Get(ctx context.Context, key []byte) ([]byte, error) {
	rep, _, err := c.do(ctx, request{typ: wire.TypeGet, key: key, payload: func(v uint64) []byte {
		q := wire.KeyRequest{MapVersion: v, Key: key}
		return q.Encode(nil)
	}}, time.Time{}, nil)
	if err != nil {
		return nil, err
	}
	if err := statusErr(rep); err != nil {
		return nil, err
	}
	if rep.Payload == nil {
		return []byte{}, nil
	}
	return rep.Payload, nil
}

// Delete removes key (deleting a missing key is not an error), at most
// once, like Put.
func (c *Client) Delete(ctx context.Context, key []byte) error {
	return c.write(ctx, wire.TypeDelete, key, nil, func(v uint64, id wire.RequestID) []byte {
		q := wire.DeleteRequest{MapVersion: v, ID: id, Key: key}
		return q.Encode(nil)
	})
}

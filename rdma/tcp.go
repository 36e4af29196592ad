package rdma

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TCP is software RDMA over a TCP connection. The passive side's transport
// goroutine reads WRITE frames and applies them into the registered region
// they name (checking address, key and bounds), then acknowledges them
// cumulatively; the application above never sees them. Posted WRITEs are
// batched into few socket writes through reused buffers.
type TCP struct {
	// DeadAfter: a peer silent this long is dead (default 3 s). Idle
	// connections ping at a quarter of it.
	DeadAfter time.Duration
	// HandshakeTimeout bounds connection set-up (default 5 s).
	HandshakeTimeout time.Duration
	// MaxQueued bounds bytes posted but not yet handed to the socket;
	// PostWrite waits beyond it (default 4 MiB).
	MaxQueued int
	// TLS, if set, runs every connection over TLS with mutual
	// authentication (nil: plaintext). Listen requires it to verify the
	// dialer's certificate (ClientAuth tls.RequireAndVerifyClientCert,
	// against ClientCAs), and the handshake completes before the
	// connection request is read: a peer without a valid certificate
	// never reaches the set-up message, so it registers nothing and
	// writes nowhere. Dial presents Certificates and verifies the
	// listener against RootCAs; an empty ServerName is the host of the
	// dialed address. A failed handshake is ErrAuth.
	TLS *tls.Config
	// OnRefused, if set, is called with each dialer a listener refused
	// in the TLS handshake (ErrAuth, naming its address), from that
	// connection's goroutine; it must not block.
	OnRefused func(error)
}

// Name implements Transport.
func (*TCP) Name() string { return "tcp" }

func (t *TCP) deadAfter() time.Duration {
	if t.DeadAfter > 0 {
		return t.DeadAfter
	}
	return 3 * time.Second
}

func (t *TCP) handshakeTimeout() time.Duration {
	if t.HandshakeTimeout > 0 {
		return t.HandshakeTimeout
	}
	return 5 * time.Second
}

func (t *TCP) maxQueued() int {
	if t.MaxQueued > 0 {
		return t.MaxQueued
	}
	return 4 << 20
}

// Listen implements Transport.
func (t *TCP) Listen(addr string) (Listener, error) {
	if t.TLS != nil && t.TLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, fmt.Errorf("rdma: tcp listen: %w: the TLS configuration does not require and verify client certificates", ErrAuth)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rdma: tcp listen: %w", err)
	}
	return newAcceptor(ln, t.handshake), nil
}

// handshake authenticates the peer (with TLS) and reads one connection
// request; a bad one closes the socket.
func (t *TCP) handshake(raw net.Conn) (ConnRequest, error) {
	deadline := time.Now().Add(t.handshakeTimeout())
	_ = raw.SetDeadline(deadline)
	c, err := t.secure(raw, func(c net.Conn) net.Conn { return tls.Server(c, t.TLS) }, deadline)
	if err != nil {
		if t.OnRefused != nil {
			t.OnRefused(err)
		}
		return nil, err
	}
	h, err := tcpRecvHello(c)
	if err == nil && h.kind != helloRequest {
		err = fmt.Errorf("%w: expected a connection request", ErrProtocol)
	}
	if err != nil {
		raw.Close()
		return nil, err
	}
	return &tcpConnReq{t: t, c: c, raw: raw, h: h}, nil
}

// secure runs the TLS handshake on raw through wrap (tls.Server or
// tls.Client), or returns raw without TLS. On error raw is closed.
func (t *TCP) secure(raw net.Conn, wrap func(net.Conn) net.Conn, deadline time.Time) (net.Conn, error) {
	if t.TLS == nil {
		return raw, nil
	}
	c := wrap(raw).(*tls.Conn)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("rdma: tcp %s: %w: %w", raw.RemoteAddr(), ErrAuth, err)
	}
	return c, nil
}

type tcpConnReq struct {
	t    *TCP
	c    net.Conn // over raw: itself, or TLS
	raw  net.Conn
	h    hello
	once sync.Once
}

// PeerCertificate implements Certified.
func (r *tcpConnReq) PeerCertificate() *x509.Certificate {
	tc, ok := r.c.(*tls.Conn)
	if !ok {
		return nil
	}
	if chains := tc.ConnectionState().VerifiedChains; len(chains) > 0 && len(chains[0]) > 0 {
		return chains[0][0]
	}
	return nil
}

func (r *tcpConnReq) Private() []byte         { return r.h.private }
func (r *tcpConnReq) PeerRegions() []RemoteMR { return r.h.mrs }

func (r *tcpConnReq) Accept(cfg ConnConfig) (QP, error) {
	return answerOnce(&r.once, cfg, func() (QP, error) {
		_ = r.c.SetDeadline(time.Now().Add(r.t.handshakeTimeout()))
		msg := hello{kind: helloAccept, mrs: remotes(cfg.Expose), private: cfg.Private}
		if err := tcpSendHello(r.c, msg); err != nil {
			r.raw.Close()
			return nil, err
		}
		_ = r.c.SetDeadline(time.Time{})
		return startTCPQP(r.t, r.c, r.raw, cfg, r.h), nil
	})
}

func (r *tcpConnReq) Reject() error {
	r.once.Do(func() {
		_ = tcpSendHello(r.c, hello{kind: helloReject})
		r.raw.Close()
	})
	return nil
}

// Dial implements Transport.
func (t *TCP) Dial(ctx context.Context, addr string, cfg ConnConfig) (QP, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rdma: tcp dial %s: %w: %w", addr, ErrPeerGone, err)
	}
	deadline := time.Now().Add(t.handshakeTimeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = raw.SetDeadline(deadline)
	c, err := t.secure(raw, func(c net.Conn) net.Conn { return tls.Client(c, t.clientTLS(addr)) }, deadline)
	if err != nil {
		return nil, err
	}
	err = tcpSendHello(c, hello{kind: helloRequest, mrs: remotes(cfg.Expose), private: cfg.Private})
	var h hello
	if err == nil {
		h, err = tcpRecvHello(c)
	}
	if err == nil && h.kind == helloReject {
		err = ErrRejected
	} else if err == nil && h.kind != helloAccept {
		err = fmt.Errorf("%w: expected an accept", ErrProtocol)
	}
	if err != nil {
		go abandon(c, raw)
		return nil, refusal(err)
	}
	_ = c.SetDeadline(time.Time{})
	return startTCPQP(t, c, raw, cfg, h), nil
}

// closeWrite shuts the sending side of c (a FIN after what was written),
// if it can.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// abandon ends a connection whose set-up the dialer gave up on after its
// request went out: the listener may still accept it, and its QP must
// then break as at a close (a CLOSE frame first, ErrPeerGone), not as at
// a death. The sending side is shut after the frame and the input read
// until the listener's end closes (at most tcpCloseLinger), so no reset
// discards the frame.
func abandon(c, raw net.Conn) {
	var b [frameHeader]byte
	(&frame{typ: frameClose}).put(b[:])
	_ = c.SetDeadline(time.Now().Add(tcpCloseLinger))
	if _, err := c.Write(b[:]); err == nil {
		closeWrite(raw)
		_, _ = io.Copy(io.Discard, c)
	}
	raw.Close()
}

// clientTLS is t.TLS with ServerName the host of addr if it had none.
func (t *TCP) clientTLS(addr string) *tls.Config {
	if t.TLS.ServerName != "" {
		return t.TLS
	}
	cfg := t.TLS.Clone()
	cfg.ServerName = addr
	if host, _, err := net.SplitHostPort(addr); err == nil {
		cfg.ServerName = host
	}
	return cfg
}

// refusal marks as ErrAuth a set-up error that is the listener's TLS
// alert: with TLS 1.3 the dialer's handshake completes before the
// listener has checked its certificate, and a refusal arrives as an
// alert in place of the accept.
func refusal(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return fmt.Errorf("%w: %w", ErrAuth, err)
	}
	return err
}

func tcpSendHello(c net.Conn, h hello) error {
	msg := h.encode()
	b := make([]byte, 4+len(msg))
	binary.LittleEndian.PutUint32(b, uint32(len(msg)))
	copy(b[4:], msg)
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("rdma: tcp set-up: %w: %w", ErrPeerGone, err)
	}
	return nil
}

func tcpRecvHello(c net.Conn) (hello, error) {
	var lb [4]byte
	if _, err := io.ReadFull(c, lb[:]); err != nil {
		return hello{}, fmt.Errorf("rdma: tcp set-up: %w: %w", ErrPeerGone, err)
	}
	n := binary.LittleEndian.Uint32(lb[:])
	if n < helloFixed || n > shmMaxMsg {
		return hello{}, fmt.Errorf("%w: set-up message of %d bytes", ErrProtocol, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		return hello{}, fmt.Errorf("rdma: tcp set-up: %w: %w", ErrPeerGone, err)
	}
	return decodeHello(b)
}

// inflight is a posted WRITE not yet acknowledged.
type inflight struct {
	id       uint64
	signaled bool
	failed   bool
}

// tcpQP is one end of a TCP connection.
type tcpQP struct {
	qpBase
	t       *TCP
	c       net.Conn // over raw: itself, or TLS
	raw     net.Conn // closed to end the connection (at once, with TLS too)
	exposed exposedSet
	armed   armedFlag

	omu     sync.Mutex
	ocond   *sync.Cond // signaled when out drains or the QP breaks
	out     []byte     // frames waiting for the writer goroutine
	spare   []byte
	posted  uint64     // WRITEs posted: the next one's index
	pending []inflight // WRITEs [acked, posted), from pending[phead]
	phead   int
	acked   uint64
	done    []inflight // scratch of ack (reader goroutine only)
	kick    chan struct{}
	stop    chan struct{}
	stopped sync.Once
	// closing: Close queued the CLOSE frame (under omu); bye is closed
	// once the writer wrote it; readDone when the reader returned.
	closing  bool
	bye      chan struct{}
	byeOnce  sync.Once
	readDone chan struct{}
}

func startTCPQP(t *TCP, c, raw net.Conn, cfg ConnConfig, h hello) *tcpQP {
	q := &tcpQP{t: t, c: c, raw: raw, exposed: newExposedSet(cfg.Expose), kick: make(chan struct{}, 1), stop: make(chan struct{}), bye: make(chan struct{}), readDone: make(chan struct{})}
	q.self, q.cq, q.peerMRs, q.private = q, cfg.CQ, h.mrs, h.private
	q.ocond = sync.NewCond(&q.omu)
	go transportLabeled(q.writer)
	go transportLabeled(q.reader)
	return q
}

func (q *tcpQP) PostWrite(wr WriteWR) error {
	src, err := wr.source()
	if err != nil {
		return err
	}
	defer wr.Local.unpin()
	q.omu.Lock()
	for q.Err() == nil && len(q.out) > 0 && len(q.out)+frameHeader+len(src) > q.t.maxQueued() {
		q.ocond.Wait()
	}
	if err := q.Err(); err != nil {
		q.omu.Unlock()
		return err
	}
	if q.closing {
		q.omu.Unlock()
		return ErrClosed // nothing may follow the CLOSE frame
	}
	f := frame{typ: frameWrite, n: uint32(len(src)), addr: wr.Remote.Addr, key: wr.Remote.Key, imm: wr.Imm, off: wr.RemoteOff}
	if wr.Solicited {
		f.flags = flagSolicited
	}
	q.appendFrame(&f)
	q.out = append(q.out, src...)
	q.posted++
	q.pending = append(q.pending, inflight{id: wr.ID, signaled: wr.Signaled})
	q.omu.Unlock()
	q.wake()
	return nil
}

// appendFrame adds a header to out. Called with omu held.
func (q *tcpQP) appendFrame(f *frame) {
	n := len(q.out)
	q.out = append(q.out, make([]byte, frameHeader)...)
	f.put(q.out[n:])
}

func (q *tcpQP) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// writer hands queued frames to the socket, pinging when idle.
func (q *tcpQP) writer() {
	ping := time.NewTicker(q.t.deadAfter() / 4)
	defer ping.Stop()
	idle := true
	for {
		select {
		case <-q.stop:
			return
		case <-q.kick:
		case <-ping.C:
			if idle {
				q.omu.Lock()
				q.appendFrame(&frame{typ: framePing})
				q.omu.Unlock()
			}
			idle = true
		}
		q.omu.Lock()
		buf := q.out
		q.out, q.spare = q.spare[:0], nil
		q.ocond.Broadcast()
		q.omu.Unlock()
		if len(buf) == 0 {
			q.omu.Lock()
			q.spare = buf
			q.omu.Unlock()
			continue
		}
		idle = false
		if _, err := q.c.Write(buf); err != nil {
			q.fail(ErrPeerGone)
			return
		}
		q.omu.Lock()
		q.spare = buf[:0]
		if q.closing && len(q.out) == 0 {
			q.byeOnce.Do(func() { close(q.bye) })
		}
		q.omu.Unlock()
	}
}

// reader applies the peer's WRITEs and handles its acknowledgements.
func (q *tcpQP) reader() {
	defer close(q.readDone)
	br := bufio.NewReaderSize(deadlineReader{c: q.c, d: q.t.deadAfter()}, 256<<10)
	var hdr [frameHeader]byte
	var word [8]byte
	var applied, ackedOut uint64
	for {
		// Acknowledge when the input pauses, and every ackEvery WRITEs
		// of a continuous stream.
		if applied > ackedOut && (br.Buffered() == 0 || applied-ackedOut >= ackEvery) {
			q.control(frame{typ: frameAck, off: applied})
			ackedOut = applied
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			// The stream ended (or the dead-peer deadline passed) with
			// no CLOSE frame: the peer died or the network cut it off.
			q.fail(ErrPeerLost)
			return
		}
		f, err := decodeFrame(hdr[:])
		if err != nil {
			q.fail(err)
			return
		}
		switch f.typ {
		case frameWrite:
			if q.Err() != nil {
				// Closed here (lingering for the peer's end): a WRITE
				// lands no more, as after a teardown.
				if _, err := br.Discard(int(f.n)); err != nil {
					q.fail(ErrPeerLost)
					return
				}
				continue
			}
			dst, m, aerr := q.exposed.dst(RemoteMR{Addr: f.addr, Key: f.key}, f.off, int(f.n))
			if aerr != nil {
				_, err = br.Discard(int(f.n))
				q.control(frame{typ: frameNak, code: nakAccess, off: applied})
			} else {
				// Deregister waits for this frame (at most DeadAfter
				// without progress: the read deadline).
				err = readPublish(br, dst, word[:])
				m.unpin()
			}
			if err != nil {
				q.fail(ErrPeerLost) // the stream ended inside a frame
				return
			}
			applied++
			if aerr == nil && f.flags&flagSolicited != 0 && q.armed.fire() {
				q.cq.push(Completion{Op: OpDoorbell, Imm: f.imm, QP: q})
			}
		case frameAck:
			q.ack(f.off)
		case frameNak:
			q.nak(f.off)
		case framePing:
		case frameClose:
			q.fail(ErrPeerGone)
			return
		}
	}
}

// ackEvery bounds the WRITEs applied before an ACK is sent.
const ackEvery = 64

// deadlineReader gives every read of the connection the dead-peer
// deadline: a peer is dead when no byte arrives for that long, however
// large the frame being read.
type deadlineReader struct {
	c net.Conn
	d time.Duration
}

func (r deadlineReader) Read(p []byte) (int, error) {
	_ = r.c.SetReadDeadline(time.Now().Add(r.d))
	return r.c.Read(p)
}

// readPublish reads len(dst) bytes into dst with publish's guarantee:
// the last aligned word is stored last, atomically.
func readPublish(r io.Reader, dst, word []byte) error {
	n := len(dst)
	if n >= 8 && isAligned8(dst[n-8:]) {
		if _, err := io.ReadFull(r, dst[:n-8]); err != nil {
			return err
		}
		if _, err := io.ReadFull(r, word); err != nil {
			return err
		}
		publish(dst[n-8:], word)
		return nil
	}
	if _, err := io.ReadFull(r, dst); err != nil {
		return err
	}
	fence.Add(1)
	return nil
}

// control queues an ACK or NAK.
func (q *tcpQP) control(f frame) {
	q.omu.Lock()
	q.appendFrame(&f)
	q.omu.Unlock()
	q.wake()
}

// ack completes the WRITEs below upto.
func (q *tcpQP) ack(upto uint64) {
	q.omu.Lock()
	done := q.done[:0]
	for q.acked < upto && q.phead < len(q.pending) {
		e := q.pending[q.phead]
		q.phead++
		q.acked++
		if e.signaled && !e.failed {
			done = append(done, e)
		}
	}
	if q.phead == len(q.pending) {
		q.pending, q.phead = q.pending[:0], 0
	} else if q.phead > 1024 && q.phead > len(q.pending)/2 {
		n := copy(q.pending, q.pending[q.phead:])
		q.pending, q.phead = q.pending[:n], 0
	}
	q.done = done
	q.omu.Unlock()
	for _, e := range done {
		q.cq.push(Completion{Op: OpWrite, WRID: e.id, QP: q})
	}
}

// nak fails the WRITE with index idx.
func (q *tcpQP) nak(idx uint64) {
	q.omu.Lock()
	var id uint64
	ok := idx >= q.acked && idx-q.acked < uint64(len(q.pending)-q.phead)
	if ok {
		e := &q.pending[q.phead+int(idx-q.acked)]
		e.failed, id = true, e.id
	}
	q.omu.Unlock()
	if ok {
		q.cq.push(Completion{Op: OpWrite, WRID: id, Err: ErrAccess, QP: q})
	}
}

// fail breaks the QP (pending signaled WRITEs complete with err) and tears
// the connection down.
func (q *tcpQP) fail(err error) {
	q.breakPending(err)
	q.stopped.Do(func() {
		close(q.stop)
		q.raw.Close()
	})
}

// breakPending breaks the QP: pending signaled WRITEs complete with err.
// The connection stays up (Close's linger).
func (q *tcpQP) breakPending(err error) {
	q.omu.Lock()
	first := q.breakWith(err)
	pending := q.pending[q.phead:]
	q.pending, q.phead = nil, 0
	q.ocond.Broadcast()
	q.omu.Unlock()
	if first {
		for _, e := range pending {
			if e.signaled && !e.failed {
				q.cq.push(Completion{Op: OpWrite, WRID: e.id, Err: err, QP: q})
			}
		}
	}
}

func (q *tcpQP) ReqNotify() { q.armed.arm() }

// Close breaks the QP at once (later posts fail, pending signaled WRITEs
// complete with ErrClosed) and ends the connection in the background: a
// CLOSE frame goes after the frames queued before it, then the sending
// side is shut (FIN) and the connection lingers, its input still read,
// until the peer closes its end (it does on reading CLOSE) or
// tcpCloseLinger passes. So the peer reads every frame and the CLOSE
// (ErrPeerGone, not ErrPeerLost), and no reset discards them.
func (q *tcpQP) Close() error {
	q.omu.Lock()
	first := q.Err() == nil && !q.closing
	if first {
		q.closing = true
		q.appendFrame(&frame{typ: frameClose})
	}
	q.omu.Unlock()
	if !first {
		q.fail(ErrClosed)
		return nil
	}
	q.breakPending(ErrClosed)
	q.wake()
	go q.linger()
	return nil
}

// tcpCloseLinger bounds how long a closed connection waits for its CLOSE
// frame to leave and for the peer to close its end.
const tcpCloseLinger = 2 * time.Second

// linger is Close's background part.
func (q *tcpQP) linger() {
	t := time.NewTimer(tcpCloseLinger)
	defer t.Stop()
	select {
	case <-q.bye:
		closeWrite(q.raw)
		select {
		case <-q.readDone:
		case <-q.stop:
		case <-t.C:
		}
	case <-q.stop:
	case <-t.C:
	}
	q.fail(ErrClosed)
}

// sever ends the connection as the process's death would: no CLOSE frame.
func (q *tcpQP) sever() { q.fail(ErrClosed) }

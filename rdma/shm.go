package rdma

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Shm connects processes on one host. Each side sends the memfds of the
// regions it exposes (and of a small QP control page) over a unix
// seqpacket socket; the peer maps them. A WRITE is a copy into the peer's
// mapping ending with a release store: the peer's CPU does nothing. The
// socket then carries only doorbells (solicited WRITEs to an armed peer)
// and, by closing, the news of a dead peer: the kernel closes it when the
// process dies, so peer death is seen at once.
//
// Addresses are unix socket paths (a leading '@' names an abstract one).
type Shm struct {
	// HandshakeTimeout bounds connection set-up (default 5 s).
	HandshakeTimeout time.Duration
	// PeerUIDs are the users whose processes may connect to a listener
	// (nil: this process's uid and root, who can read its memory
	// anyway). The listener reads the dialer's uid from the socket
	// (SO_PEERCRED) before anything else: a peer of another uid is
	// rejected before its set-up message is read, so no memory is mapped
	// either way.
	PeerUIDs []uint32
	// OnRefused, if set, is called with each dialer a listener refused
	// for its uid (ErrAuth, naming its pid and uid), from that
	// connection's goroutine; it must not block.
	OnRefused func(error)
}

// Name implements Transport.
func (*Shm) Name() string { return "shm" }

func (s *Shm) handshakeTimeout() time.Duration {
	if s.HandshakeTimeout > 0 {
		return s.HandshakeTimeout
	}
	return 5 * time.Second
}

const (
	shmDoorbell = 1
	// shmGoodbye is the one-byte packet Close sends before it closes the
	// socket: the peer's QP breaks with ErrPeerGone, not ErrPeerLost.
	shmGoodbye = 2
	shmMaxMsg  = helloFixed + MaxExposed*helloMRSize + MaxPrivate
)

var shmOOB = unix.CmsgSpace(4 * (MaxExposed + 1))

// Listen implements Transport. A stale socket file nobody listens on is
// replaced.
func (s *Shm) Listen(addr string) (Listener, error) {
	ua := &net.UnixAddr{Name: addr, Net: "unixpacket"}
	ln, err := net.ListenUnix("unixpacket", ua)
	if err != nil && errors.Is(err, unix.EADDRINUSE) && addr != "" && addr[0] != '@' {
		if c, derr := net.Dial("unixpacket", addr); derr == nil {
			c.Close()
		} else {
			_ = os.Remove(addr)
			ln, err = net.ListenUnix("unixpacket", ua)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("rdma: shm listen: %w", err)
	}
	return newAcceptor(ln, s.handshake), nil
}

// handshake checks the peer's uid and reads one connection request; a
// bad one closes the socket.
func (s *Shm) handshake(nc net.Conn) (ConnRequest, error) {
	c := nc.(*net.UnixConn)
	_ = c.SetDeadline(time.Now().Add(s.handshakeTimeout()))
	uid, err := s.checkPeer(c)
	if err != nil {
		// The request is read to be dropped (so that the reject reaches
		// the dialer rather than a reset): without room for control
		// messages, the kernel closes the descriptors it carries in place
		// of passing them here.
		var drop [1]byte
		_, _ = c.Read(drop[:])
		_, _ = c.Write(hello{kind: helloReject}.encode())
		c.Close()
		if s.OnRefused != nil && errors.Is(err, ErrAuth) {
			s.OnRefused(err)
		}
		return nil, err
	}
	h, maps, err := shmRecvHello(c)
	if err == nil && h.kind != helloRequest {
		err = fmt.Errorf("%w: expected a connection request", ErrProtocol)
	}
	if err != nil {
		unmapAll(maps)
		c.Close()
		return nil, err
	}
	return &shmConnReq{t: s, c: c, uid: uid, h: h, maps: maps}, nil
}

// checkPeer fails with ErrAuth unless the socket's peer runs as an
// allowed uid, which it returns.
func (s *Shm) checkPeer(c *net.UnixConn) (uint32, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("rdma: shm peer credentials: %w", err)
	}
	var cred *unix.Ucred
	cerr := rc.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if cerr != nil || err != nil {
		return 0, fmt.Errorf("rdma: shm peer credentials: %w", errors.Join(cerr, err))
	}
	if !uidAllowed(cred.Uid, s.PeerUIDs, uint32(os.Getuid())) {
		return 0, fmt.Errorf("rdma: shm peer pid %d: %w: uid %d", cred.Pid, ErrAuth, cred.Uid)
	}
	return cred.Uid, nil
}

// uidAllowed says whether uid may connect: it is in allowed, or, with
// allowed nil, it is self or root.
func uidAllowed(uid uint32, allowed []uint32, self uint32) bool {
	if allowed == nil {
		return uid == self || uid == 0
	}
	return slices.Contains(allowed, uid)
}

type shmConnReq struct {
	t    *Shm
	c    *net.UnixConn
	uid  uint32 // the peer's (checkPeer)
	h    hello
	maps [][]byte // peer's ctl page, then its regions
	once sync.Once
}

func (r *shmConnReq) Private() []byte         { return r.h.private }
func (r *shmConnReq) PeerUID() uint32         { return r.uid }
func (r *shmConnReq) PeerRegions() []RemoteMR { return r.h.mrs }

func (r *shmConnReq) Accept(cfg ConnConfig) (QP, error) {
	return answerOnce(&r.once, cfg, func() (QP, error) {
		_ = r.c.SetDeadline(time.Now().Add(r.t.handshakeTimeout()))
		qp, err := newShmQP(r.c, cfg, r.h, r.maps, helloAccept)
		if err == nil {
			_ = r.c.SetDeadline(time.Time{})
		}
		return qp, err
	})
}

func (r *shmConnReq) Reject() error {
	r.once.Do(func() {
		_, _ = r.c.Write(hello{kind: helloReject}.encode())
		unmapAll(r.maps)
		r.c.Close()
	})
	return nil
}

// Dial implements Transport.
func (s *Shm) Dial(ctx context.Context, addr string, cfg ConnConfig) (QP, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unixpacket", addr)
	if err != nil {
		return nil, fmt.Errorf("rdma: shm dial %s: %w: %w", addr, ErrPeerGone, err)
	}
	c := nc.(*net.UnixConn)
	deadline := time.Now().Add(s.handshakeTimeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	ctl, err := shmSendHello(c, helloRequest, cfg)
	if err != nil {
		c.Close()
		return nil, err
	}
	h, maps, err := shmRecvHello(c)
	if err == nil && h.kind == helloReject {
		err = ErrRejected
	} else if err == nil && h.kind != helloAccept {
		err = fmt.Errorf("%w: expected an accept", ErrProtocol)
	}
	if err != nil {
		unmapAll(maps)
		unmapAll([][]byte{ctl})
		c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return startShmQP(c, cfg, h, maps, ctl)
}

// shmSendHello sends a set-up message with the memfds of a fresh QP
// control page and of cfg's regions, and returns the control page.
func shmSendHello(c *net.UnixConn, kind helloKind, cfg ConnConfig) ([]byte, error) {
	fd, ctl, err := mapShared(ctlSize)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	fds := []int{fd}
	for _, m := range cfg.Expose {
		fds = append(fds, m.fd)
	}
	msg := hello{kind: kind, mrs: remotes(cfg.Expose), private: cfg.Private}.encode()
	if _, _, err := c.WriteMsgUnix(msg, unix.UnixRights(fds...), nil); err != nil {
		unmapAll([][]byte{ctl})
		return nil, fmt.Errorf("rdma: shm set-up: %w: %w", ErrPeerGone, err)
	}
	return ctl, nil
}

// shmRecvHello reads a set-up message and maps the memfds it carries.
func shmRecvHello(c *net.UnixConn) (hello, [][]byte, error) {
	buf, oob := make([]byte, shmMaxMsg+1), make([]byte, shmOOB)
	n, oobn, flags, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		return hello{}, nil, fmt.Errorf("rdma: shm set-up: %w: %w", ErrPeerGone, err)
	}
	var fds []int
	if cms, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
		for _, cm := range cms {
			if f, rerr := unix.ParseUnixRights(&cm); rerr == nil {
				fds = append(fds, f...)
			}
		}
	}
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		return hello{}, nil, fmt.Errorf("%w: set-up message truncated", ErrProtocol)
	}
	h, err := decodeHello(buf[:n])
	if err != nil {
		return hello{}, nil, err
	}
	if h.kind == helloReject {
		return h, nil, nil
	}
	if len(fds) != len(h.mrs)+1 {
		return hello{}, nil, fmt.Errorf("%w: %d descriptors for %d regions", ErrProtocol, len(fds), len(h.mrs))
	}
	var maps [][]byte
	for i, fd := range fds {
		m, err := mapPeer(fd)
		if err == nil && i > 0 && uint64(len(m)-ctlSize) != h.mrs[i-1].Len {
			unmapAll([][]byte{m})
			err = fmt.Errorf("%w: region of %d bytes announced as %d", ErrProtocol, len(m)-ctlSize, h.mrs[i-1].Len)
		}
		if err != nil {
			unmapAll(maps)
			return hello{}, nil, err
		}
		maps = append(maps, m)
	}
	return h, maps, nil
}

func unmapAll(maps [][]byte) {
	for _, m := range maps {
		if m != nil {
			_ = unix.Munmap(m)
		}
	}
}

// shmQP is one end of a shm connection.
type shmQP struct {
	qpBase
	c        *net.UnixConn
	ctl      []byte // own control page: word 0 is the doorbell's armed flag
	peerCtl  []byte
	peerMaps map[uint64][]byte // peer region address -> mapping (ctl page + memory)
	exposed  []*MR

	mu       sync.RWMutex // read: a WRITE copying into peer maps; write: unmapping
	unmapped bool
	wmu      sync.Mutex // doorbell sends
	bell     [5]byte
	teardown sync.Once
	// readerDone is closed when the reader returns, having broken the QP
	// with what the socket's end says (a goodbye or not).
	readerDone chan struct{}
}

func newShmQP(c *net.UnixConn, cfg ConnConfig, h hello, maps [][]byte, kind helloKind) (QP, error) {
	ctl, err := shmSendHello(c, kind, cfg)
	if err != nil {
		unmapAll(maps)
		c.Close()
		return nil, err
	}
	return startShmQP(c, cfg, h, maps, ctl)
}

func startShmQP(c *net.UnixConn, cfg ConnConfig, h hello, maps [][]byte, ctl []byte) (QP, error) {
	q := &shmQP{c: c, ctl: ctl, peerCtl: maps[0], peerMaps: map[uint64][]byte{}, exposed: cfg.Expose, readerDone: make(chan struct{})}
	q.self, q.cq, q.peerMRs, q.private = q, cfg.CQ, h.mrs, h.private
	for i, r := range h.mrs {
		q.peerMaps[r.Addr] = maps[i+1]
	}
	go transportLabeled(q.reader)
	return q, nil
}

func armedWord(ctl []byte) *atomic.Uint32 { return (*atomic.Uint32)(unsafe.Pointer(&ctl[0])) }

// reader turns doorbell packets into completions until the socket closes.
func (q *shmQP) reader() {
	defer close(q.readerDone)
	var pkt [16]byte
	for {
		n, err := q.c.Read(pkt[:])
		if err != nil || n == 0 {
			// The socket ended without a goodbye: the peer died.
			q.breakWith(ErrPeerLost)
			q.unmap()
			return
		}
		if n == 1 && pkt[0] == shmGoodbye {
			q.breakWith(ErrPeerGone)
			q.unmap()
			return
		}
		if n == 5 && pkt[0] == shmDoorbell {
			imm := uint32(pkt[1]) | uint32(pkt[2])<<8 | uint32(pkt[3])<<16 | uint32(pkt[4])<<24
			q.cq.push(Completion{Op: OpDoorbell, Imm: imm, QP: q})
			continue
		}
		q.breakWith(fmt.Errorf("%w: shm packet of %d bytes", ErrProtocol, n))
		q.unmap()
		return
	}
}

// CompletesOnPost: a WRITE is a copy into the peer's mapping, its
// completion queued before PostWrite returns (Immediate).
func (q *shmQP) CompletesOnPost() bool { return true }

func (q *shmQP) PostWrite(wr WriteWR) error {
	src, err := wr.source()
	if err != nil {
		return err
	}
	defer wr.Local.unpin()
	q.mu.RLock()
	if err := q.Err(); err != nil || q.unmapped {
		q.mu.RUnlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	var dst []byte
	m, ok := q.peerMaps[wr.Remote.Addr]
	if ok {
		dst, err = target(m[ctlSize:], ctlKey(m).Load(), wr.Remote, wr.RemoteOff, len(src))
	} else {
		err = ErrAccess
	}
	if err != nil {
		q.mu.RUnlock()
		q.cq.push(Completion{Op: OpWrite, WRID: wr.ID, Err: err, QP: q})
		return nil
	}
	publish(dst, src)
	if ctlKey(m).Load() != wr.Remote.Key {
		// Revoked during the copy: the owner may have read its memory
		// already, so this WRITE must not count as done.
		q.mu.RUnlock()
		q.cq.push(Completion{Op: OpWrite, WRID: wr.ID, Err: ErrAccess, QP: q})
		return nil
	}
	ring := wr.Solicited && armedWord(q.peerCtl).CompareAndSwap(1, 0)
	q.mu.RUnlock()
	if ring {
		q.wmu.Lock()
		q.bell[0] = shmDoorbell
		q.bell[1], q.bell[2], q.bell[3], q.bell[4] = byte(wr.Imm), byte(wr.Imm>>8), byte(wr.Imm>>16), byte(wr.Imm>>24)
		_, err := q.c.Write(q.bell[:])
		q.wmu.Unlock()
		if err != nil {
			return q.writeFailed()
		}
	}
	if wr.Signaled {
		q.cq.push(Completion{Op: OpWrite, WRID: wr.ID, QP: q})
	}
	return nil
}

// writeFailed ends the QP after a doorbell could not be sent: the socket
// is gone, and whether the peer closed it (a goodbye first) or died is
// for the reader to tell, which sees the socket's end at once; the WRITE
// fails with that (ErrPeerGone or ErrPeerLost), or with ErrPeerLost if
// the reader has not told within closeLinger.
func (q *shmQP) writeFailed() error {
	select {
	case <-q.readerDone:
	case <-time.After(closeLinger):
	}
	q.breakWith(ErrPeerLost)
	return q.Err()
}

func (q *shmQP) ReqNotify() {
	q.mu.RLock()
	if !q.unmapped {
		armedWord(q.ctl).Store(1)
	}
	q.mu.RUnlock()
}

func (q *shmQP) Close() error {
	if q.breakWith(ErrClosed) {
		q.wmu.Lock()
		_ = q.c.SetWriteDeadline(time.Now().Add(closeLinger))
		_, _ = q.c.Write([]byte{shmGoodbye})
		q.wmu.Unlock()
	}
	q.unmap()
	return nil
}

// sever ends the connection as the process's death would: no goodbye.
func (q *shmQP) sever() {
	q.breakWith(ErrClosed)
	q.unmap()
}

// unmap drops the peer's mappings (after in-flight WRITEs) and the socket.
func (q *shmQP) unmap() {
	q.teardown.Do(func() {
		q.c.Close()
		q.mu.Lock()
		q.unmapped = true
		for _, m := range q.peerMaps {
			_ = unix.Munmap(m)
		}
		_ = unix.Munmap(q.peerCtl)
		_ = unix.Munmap(q.ctl)
		q.mu.Unlock()
	})
}

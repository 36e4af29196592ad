package ring

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tebis-go/tebis/rdma"
)

// DefaultArriveWait is the default ServerConfig.ArriveWait and
// ClientConfig.ArriveWait.
//
// A WRITE orders only its last word: its other bytes may land in any
// order, for as long as the writer's copy takes. Go's memmove, which the
// shm transport copies with, stores a copy's first 32 bytes last (amd64,
// more than 256 bytes): a header's magic and checksum are visible, and the
// checksum fails, for the whole copy of the message, and under heavy load
// a copy of a few MiB into fresh pages takes hundreds of milliseconds. A
// header that does not verify yet is therefore no more final than a
// missing tail, and gets the same bound.
const DefaultArriveWait = 5 * time.Second

// sconn is the server's end of one connection. Its request ring is polled
// by one spinner only; replies are written by workers.
type sconn struct {
	s       *Server
	sp      *spinner
	qp      rdma.QP
	reqMR   *rdma.MR // the request ring (exposed to the client)
	repMR   *rdma.MR // mirror of the client's reply ring, written from
	reqSize int
	repSize int
	remote  rdma.RemoteMR

	rp       int       // rendezvous point: next header's offset
	waitFrom time.Time // when the message at rp was first seen incomplete; its spinner does not park meanwhile
	tasks    sync.WaitGroup
	inflight atomic.Int32 // requests taken off the ring, not yet answered
	closed   atomic.Bool
	// laterOK: a reply may be sent from any goroutine at any time
	// (ServerRequest.CanReplyLater): posting it never waits for the client.
	laterOK bool
}

// poll takes the next request off the ring if it has arrived whole.
func (c *sconn) poll() (task, bool, error) {
	buf := c.reqMR.Bytes()
	pos := c.rp
	w := rdma.LoadWord(buf, pos+56)
	if w == 0 {
		return task{}, false, nil
	}
	if w != magic {
		// Possibly a header still arriving (tcp fills memory as bytes
		// come); malformed if it stays so.
		if c.waited(c.s.cfg.ArriveWait) {
			return task{}, false, fmt.Errorf("%w: bad magic %#x at ring offset %d", ErrMalformed, w, pos)
		}
		return task{}, false, nil
	}
	h, err := decodeHeader(buf[pos:pos+HeaderSize], c.reqSize-pos)
	if err != nil {
		// After a checksum mismatch the header's other bytes may still be
		// arriving (on shm, for as long as the whole message's copy:
		// DefaultArriveWait); anything else is final.
		if !errors.Is(err, errChecksum) || c.waited(c.s.cfg.ArriveWait) {
			return task{}, false, fmt.Errorf("at ring offset %d: %w", pos, err)
		}
		return task{}, false, nil
	}
	if h.Type == TypeNoop {
		if pos+HeaderSize+int(h.Len) != c.reqSize {
			return task{}, false, fmt.Errorf("%w: noop at %d does not reach the ring's end", ErrMalformed, pos)
		}
		clear(buf[pos : pos+HeaderSize])
		c.rp, c.waitFrom = 0, time.Time{}
		return task{}, true, nil
	}
	n := MsgSize(int(h.Len))
	if h.Len > 0 && rdma.LoadWord(buf, pos+n-8) != tailMagic^h.ReqID {
		if c.waited(c.s.cfg.ArriveWait) {
			return task{}, false, fmt.Errorf("%w: request %d at %d has no tail", ErrMalformed, h.ReqID, pos)
		}
		return task{}, false, nil
	}
	if h.Flags&FlagReply != 0 || h.ReplySize < HeaderSize || h.ReplySize%HeaderSize != 0 || h.ReplyOff%HeaderSize != 0 ||
		uint64(h.ReplyOff)+uint64(h.ReplySize) > uint64(c.repSize) {
		return task{}, false, fmt.Errorf("%w: request %d: flags %#x, reply slot %d+%d in a ring of %d", ErrMalformed, h.ReqID, h.Flags, h.ReplyOff, h.ReplySize, c.repSize)
	}
	t := task{c: c, buf: getBuf(int(h.Len))}
	copy(*t.buf, buf[pos+HeaderSize:pos+HeaderSize+int(h.Len)])
	t.req = ServerRequest{Header: h, Payload: (*t.buf)[:h.Len:h.Len], MaxReply: MaxPayload(c.repSize)}
	clear(buf[pos : pos+n])
	c.rp, c.waitFrom = (pos+n)%c.reqSize, time.Time{}
	return t, true, nil
}

// waited reports whether the message at rp has been incomplete for d.
func (c *sconn) waited(d time.Duration) bool {
	if c.waitFrom.IsZero() {
		c.waitFrom = time.Now()
		return false
	}
	return time.Since(c.waitFrom) > d
}

// reply writes the reply for h into the client's slot: a header-only
// StatusTooSmall reply with the size needed if it does not fit.
func (c *sconn) reply(h Header, r Reply) {
	out := Header{Type: h.Type, Flags: FlagReply, ReqID: h.ReqID, Region: h.Region, Epoch: h.Epoch, Status: r.Status, Aux: r.Aux}
	payload := r.Payload
	if need := MsgSize(len(payload)); need > int(h.ReplySize) {
		out.Status, out.Aux, payload = StatusTooSmall, uint32(need), nil
	}
	off := int(h.ReplyOff)
	n := encode(c.repMR.Bytes()[off:], out, payload, nil)
	// An error here breaks the QP; the spinner sees it on the CQ.
	_ = c.qp.PostWrite(rdma.WriteWR{Local: c.repMR, LocalOff: off, Len: n, Remote: c.remote, RemoteOff: uint64(off), Solicited: true})
}

// close tears the connection down; its regions are freed once its
// in-flight requests are answered.
func (c *sconn) close(err error) {
	if c.closed.Swap(true) {
		return
	}
	c.s.conns.Add(-1)
	c.qp.Close()
	go func() {
		c.tasks.Wait()
		c.reqMR.Deregister()
		c.repMR.Deregister()
	}()
}

// bufPool holds request payload buffers of poolBuf bytes, as the
// pointers Put takes: a buffer goes back in the pointer it came out in,
// so taking and returning one allocates nothing.
var bufPool = sync.Pool{New: func() any { b := make([]byte, poolBuf); return &b }}

const poolBuf = 4096

// getBuf returns a buffer of n bytes for a request's payload; putBuf
// returns it.
func getBuf(n int) *[]byte {
	if n > poolBuf {
		b := make([]byte, n)
		return &b
	}
	p := bufPool.Get().(*[]byte)
	*p = (*p)[:n]
	return p
}

// poisonFreed (tests) overwrites a buffer as it is freed, so a use after
// putBuf shows.
var poisonFreed bool

func putBuf(p *[]byte) {
	if poisonFreed {
		for i := range *p {
			(*p)[i] = 0xEE
		}
	}
	if cap(*p) == poolBuf {
		bufPool.Put(p)
	}
}

package region_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tebis-go/tebis/rdma"
)

// cuttable is one server's view of a shared in-process fabric: Cut
// breaks every connection it made or accepted and closes its listeners,
// as a crash of its process would, and refuses whatever it tries after.
// Stall holds every connection request its listeners receive (the
// dialer waits, as for a server that does not answer) until Unstall;
// connections made already go on.
type cuttable struct {
	inner rdma.Transport

	mu  sync.Mutex
	cut bool
	qps []rdma.QP
	lns []rdma.Listener
	// dialed are the connections this view dialed (also in qps); noDial:
	// SeverDialed refuses dials from then on.
	dialed []rdma.QP
	noDial bool
	// unstalled is closed while requests are accepted; replaced by an
	// open channel at Stall.
	unstalled chan struct{}
	// held counts the requests being held now.
	held atomic.Int32
}

func newCuttable(inner rdma.Transport) *cuttable {
	c := &cuttable{inner: inner, unstalled: make(chan struct{})}
	close(c.unstalled)
	return c
}

// Stall holds the connection requests received from now on.
func (c *cuttable) Stall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if isClosed(c.unstalled) {
		c.unstalled = make(chan struct{})
	}
}

// Unstall lets the held connection requests, and later ones, through.
func (c *cuttable) Unstall() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !isClosed(c.unstalled) {
		close(c.unstalled)
	}
}

func (c *cuttable) Name() string { return c.inner.Name() }

// track keeps qp to break at Cut; after Cut it is broken at once.
func (c *cuttable) track(qp rdma.QP) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		qp.Close()
		return fmt.Errorf("cuttable: cut: %w", rdma.ErrClosed)
	}
	c.qps = append(c.qps, qp)
	return nil
}

func (c *cuttable) Dial(ctx context.Context, addr string, cfg rdma.ConnConfig) (rdma.QP, error) {
	c.mu.Lock()
	noDial := c.noDial
	c.mu.Unlock()
	if noDial {
		return nil, fmt.Errorf("cuttable: dials cut: %w", rdma.ErrPeerGone)
	}
	qp, err := c.inner.Dial(ctx, addr, cfg)
	if err != nil {
		return nil, err
	}
	if err := c.track(qp); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.dialed = append(c.dialed, qp)
	c.mu.Unlock()
	return qp, nil
}

// SeverDialed severs every connection this view dialed (a server's
// replication streams and command rings to its backups: the backups see
// rdma.ErrPeerLost) and refuses its dials from then on; what it accepted
// (clients, its primaries' streams) goes on: a network cut between a
// primary and its backups only.
func (c *cuttable) SeverDialed() {
	c.mu.Lock()
	c.noDial = true
	dialed := c.dialed
	c.dialed = nil
	c.mu.Unlock()
	for _, qp := range dialed {
		rdma.Sever(qp)
	}
}

func (c *cuttable) Listen(addr string) (rdma.Listener, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, fmt.Errorf("cuttable: cut: %w", rdma.ErrClosed)
	}
	ln, err := c.inner.Listen(addr)
	if err != nil {
		return nil, err
	}
	c.lns = append(c.lns, ln)
	return cutListener{Listener: ln, c: c}, nil
}

// Cut breaks every connection (severed: the peers see rdma.ErrPeerLost,
// as at a death) and closes every listener of this view.
func (c *cuttable) Cut() {
	c.mu.Lock()
	c.cut = true
	qps, lns := c.qps, c.lns
	c.qps, c.lns = nil, nil
	c.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	for _, qp := range qps {
		rdma.Sever(qp)
	}
}

type cutListener struct {
	rdma.Listener
	c *cuttable
}

func (l cutListener) Accept(ctx context.Context) (rdma.ConnRequest, error) {
	req, err := l.Listener.Accept(ctx)
	if err != nil {
		return nil, err
	}
	l.c.mu.Lock()
	unstalled := l.c.unstalled
	l.c.mu.Unlock()
	l.c.held.Add(1)
	defer l.c.held.Add(-1)
	select {
	case <-unstalled:
	case <-ctx.Done():
		req.Reject()
		return nil, ctx.Err()
	}
	return cutRequest{ConnRequest: req, c: l.c}, nil
}

type cutRequest struct {
	rdma.ConnRequest
	c *cuttable
}

func (r cutRequest) Accept(cfg rdma.ConnConfig) (rdma.QP, error) {
	qp, err := r.ConnRequest.Accept(cfg)
	if err != nil {
		return nil, err
	}
	if err := r.c.track(qp); err != nil {
		return nil, err
	}
	return qp, nil
}

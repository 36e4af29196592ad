package rdma

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// acceptor is the Listener of the socket transports: it accepts
// connections and runs each one's set-up (handshake) in its own goroutine,
// so a slow or bad peer delays nobody; requests that set up wait for
// Accept.
type acceptor struct {
	ln        net.Listener
	handshake func(net.Conn) (ConnRequest, error) // closes the conn on error
	reqs      chan ConnRequest
	done      chan struct{}
	close     sync.Once
}

func newAcceptor(ln net.Listener, handshake func(net.Conn) (ConnRequest, error)) *acceptor {
	a := &acceptor{ln: ln, handshake: handshake, reqs: make(chan ConnRequest), done: make(chan struct{})}
	go a.loop()
	return a
}

func (a *acceptor) Addr() string { return a.ln.Addr().String() }

func (a *acceptor) Close() error {
	var err error
	a.close.Do(func() {
		close(a.done)
		err = a.ln.Close()
	})
	return err
}

func (a *acceptor) loop() {
	for {
		c, err := a.ln.Accept()
		if err != nil {
			select {
			case <-a.done:
				return
			default:
			}
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors
			continue
		}
		go func() {
			req, err := a.handshake(c)
			if err != nil {
				return
			}
			select {
			case a.reqs <- req:
			case <-a.done:
				req.Reject()
			}
		}()
	}
}

func (a *acceptor) Accept(ctx context.Context) (ConnRequest, error) {
	select {
	case r := <-a.reqs:
		return r, nil
	case <-a.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answerOnce runs accept as a connection request's one answer: a request
// answered already (accepted or rejected, both guarded by once) fails.
func answerOnce(once *sync.Once, cfg ConnConfig, accept func() (QP, error)) (QP, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, err
	}
	var (
		qp  QP
		err = fmt.Errorf("rdma: connection request answered twice")
	)
	once.Do(func() { qp, err = accept() })
	return qp, err
}

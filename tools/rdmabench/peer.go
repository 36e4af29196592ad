package rdmabench

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

// Peer modes.
const (
	ModeEcho = "echo" // a ring server answering TypeEcho with the payload
	ModeSink = "sink" // accepts WRITEs into one SinkSize region, does nothing
)

// TypeEcho is the request type the echo peer answers.
const TypeEcho = ring.TypeFirstApp

// SinkSize is the region the sink exposes.
const SinkSize = 64 << 20

// Transport returns a transport by name.
func Transport(name string) (rdma.Transport, error) {
	switch name {
	case "shm":
		return &rdma.Shm{}, nil
	case "tcp":
		return &rdma.TCP{}, nil
	}
	return nil, fmt.Errorf("rdmabench: unknown transport %q (want shm or tcp)", name)
}

// ServePeer runs a peer: it listens on addr, writes "ready ADDR\n" to
// ready, and serves until stop is closed (the parent closed our stdin) or
// ctx ends.
func ServePeer(ctx context.Context, mode, transport, addr string, ready io.Writer, stop <-chan struct{}) error {
	tr, err := Transport(transport)
	if err != nil {
		return err
	}
	switch mode {
	case ModeEcho:
		s, err := ring.Listen(ring.ServerConfig{Transport: tr, Addr: addr, Handlers: map[uint16]ring.HandlerFunc{
			TypeEcho: func(r *ring.ServerRequest) ring.Reply { return ring.Reply{Payload: r.Payload} },
		}})
		if err != nil {
			return err
		}
		defer s.Close()
		fmt.Fprintf(ready, "ready %s\n", s.Addr())
	case ModeSink:
		ln, err := tr.Listen(addr)
		if err != nil {
			return err
		}
		defer ln.Close()
		mr, err := rdma.Register(SinkSize)
		if err != nil {
			return err
		}
		defer mr.Deregister()
		fmt.Fprintf(ready, "ready %s\n", ln.Addr())
		go func() {
			for {
				req, err := ln.Accept(ctx)
				if err != nil {
					return
				}
				if _, err := req.Accept(rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{mr}}); err != nil {
					return
				}
			}
		}()
	default:
		return fmt.Errorf("rdmabench: unknown peer mode %q", mode)
	}
	select {
	case <-stop:
	case <-ctx.Done():
	}
	return nil
}

// StdinClosed returns a channel closed when stdin reaches EOF: a peer
// stops when its parent goes away.
func StdinClosed() <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(ch)
	}()
	return ch
}

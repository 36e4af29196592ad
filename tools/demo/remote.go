package demo

import (
	"context"
	"errors"

	"github.com/tebis-go/tebis/client"
)

// clientStore is the demo's store through the client: a running server
// (or cluster) instead of an in-process volume.
type clientStore struct {
	ctx context.Context
	cl  *client.Client
}

func openClientStore(ctx context.Context, cfg Config) (store, error) {
	cl, err := client.Open(ctx, client.Config{Map: cfg.Map, Transport: cfg.Transport})
	if err != nil {
		return nil, err
	}
	return &clientStore{ctx: ctx, cl: cl}, nil
}

func (s *clientStore) Put(key, value []byte) error { return s.cl.Put(s.ctx, key, value) }

func (s *clientStore) Get(key []byte) ([]byte, bool, error) {
	v, err := s.cl.Get(s.ctx, key)
	if errors.Is(err, client.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// WaitIdle: a server acknowledges writes durably (sync mode) and compacts
// on its own; nothing to wait for.
func (s *clientStore) WaitIdle() error { return nil }

func (s *clientStore) Close() error { return s.cl.Close() }

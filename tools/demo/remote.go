package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tebis-go/tebis/client"
)

// retryWindow bounds how long one operation retries a region that is
// briefly unavailable (a primary starting, waiting for its backups, or
// failing over) before the demo gives up.
const retryWindow = 30 * time.Second

// clientStore is the demo's store through the client: a running server
// (or cluster) instead of an in-process volume.
type clientStore struct {
	ctx context.Context
	cl  *client.Client
}

func openClientStore(ctx context.Context, cfg Config) (*clientStore, error) {
	cl, err := client.Open(ctx, client.Config{Map: cfg.Map, Transport: cfg.Transport})
	if err != nil {
		return nil, err
	}
	return &clientStore{ctx: ctx, cl: cl}, nil
}

// transient reports errors a region returns while it cannot serve yet or
// is moving: retried for up to retryWindow.
func transient(err error) bool {
	return errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrWrongRegion)
}

// retry runs f until it succeeds, fails for good, the context ends, or
// retryWindow passes.
func (s *clientStore) retry(f func() error) error {
	var start time.Time
	for {
		err := f()
		if err == nil || !transient(err) {
			return err
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > retryWindow {
			return fmt.Errorf("still unavailable after %v: %w", retryWindow, err)
		}
		select {
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *clientStore) Put(key, value []byte) error {
	return s.retry(func() error { return s.cl.Put(s.ctx, key, value) })
}

func (s *clientStore) Get(key []byte) (v []byte, found bool, _ error) {
	err := s.retry(func() error {
		var err error
		v, err = s.cl.Get(s.ctx, key)
		return err
	})
	if errors.Is(err, client.ErrNotFound) {
		return nil, false, nil
	}
	return v, err == nil, err
}

// Scan reads up to n pairs from start and returns their key+value bytes.
func (s *clientStore) Scan(start []byte, n int) (int, error) {
	var bytes int
	err := s.retry(func() error {
		bytes = 0
		it := s.cl.Scan(s.ctx, start, nil, client.ScanOptions{BatchPairs: n})
		defer it.Close()
		for pairs := 0; pairs < n && it.Next(); pairs++ {
			bytes += len(it.Key()) + len(it.Value())
		}
		return it.Err()
	})
	return bytes, err
}

// WaitIdle: a server acknowledges writes durably (sync mode) and compacts
// on its own; nothing to wait for.
func (s *clientStore) WaitIdle() error { return nil }

func (s *clientStore) Close() error { return s.cl.Close() }

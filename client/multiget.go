package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tebis-go/tebis/internal/wire"
)

// MultiGet returns the values of keys, in order; a missing key's value is
// nil. Keys are grouped by region, one request per region (in parallel).
func (c *Client) MultiGet(ctx context.Context, keys [][]byte) ([][]byte, error) {
	out := make([][]byte, len(keys))
	m := c.m.Load()
	groups := map[uint64][]int{}
	for i, k := range keys {
		r := m.Lookup(k)
		if r == nil {
			return nil, fmt.Errorf("%w: no region for key", ErrWrongRegion)
		}
		groups[r.ID] = append(groups[r.ID], i)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, idx := range groups {
		for len(idx) > 0 {
			n := min(len(idx), wire.MaxMultiGet)
			batch := idx[:n]
			idx = idx[n:]
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.multiGet(ctx, keys, batch, out); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	return out, nil
}

// multiGet fetches keys[idx...] (one region) into out. A batch whose reply
// would not fit the ring is split in halves; after a map change that
// splits the batch across regions, its keys are fetched one by one.
func (c *Client) multiGet(ctx context.Context, keys [][]byte, idx []int, out [][]byte) error {
	err := c.multiGetOnce(ctx, keys, idx, out)
	switch {
	case errors.Is(err, ErrTooLarge) && len(idx) > 1:
		h := len(idx) / 2
		if err := c.multiGet(ctx, keys, idx[:h], out); err != nil {
			return err
		}
		return c.multiGet(ctx, keys, idx[h:], out)
	case errors.Is(err, ErrWrongRegion) && len(idx) > 1:
		for _, j := range idx {
			v, err := c.Get(ctx, keys[j])
			switch {
			case errors.Is(err, ErrNotFound):
				out[j] = nil
			case err != nil:
				return err
			default:
				out[j] = v
			}
		}
		return nil
	}
	return err
}

func (c *Client) multiGetOnce(ctx context.Context, keys [][]byte, idx []int, out [][]byte) error {
	batch := make([][]byte, len(idx))
	size := 0
	for i, j := range idx {
		batch[i] = keys[j]
		size += len(keys[j])
	}
	m := c.m.Load()
	for _, k := range batch[1:] {
		if r, r0 := m.Lookup(k), m.Lookup(batch[0]); r == nil || r0 == nil || r.ID != r0.ID {
			return fmt.Errorf("%w: batch spans regions", ErrWrongRegion)
		}
	}
	rep, _, err := c.do(ctx, request{typ: wire.TypeMultiGet, key: batch[0], replySize: len(batch) * 64, payload: func(v uint64) []byte {
		q := wire.MultiGetRequest{MapVersion: v, Keys: batch}
		return q.Encode(make([]byte, 0, 12+size+4*len(batch)))
	}}, time.Time{}, nil)
	if err != nil {
		return err
	}
	if err := statusErr(rep); err != nil {
		return err
	}
	vals, err := wire.DecodeMultiGetReply(rep.Payload, len(batch))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrServer, err)
	}
	for i, j := range idx {
		out[j] = vals[i]
	}
	return nil
}

package client

import (
	"context"
	"fmt"
	"sync"

	"github.com/tebis-go/tebis/region/wire"
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

// multiGet fetches keys[idx...] (one region) into out. After a map change
// that splits the batch across regions it falls back to single gets.
func (c *Client) multiGet(ctx context.Context, keys [][]byte, idx []int, out [][]byte) error {
	batch := make([][]byte, len(idx))
	size := 0
	for i, j := range idx {
		batch[i] = keys[j]
		size += len(keys[j])
	}
	rep, _, err := c.do(ctx, request{typ: wire.TypeMultiGet, key: batch[0], replySize: len(batch) * 64, payload: func(v uint64) []byte {
		q := wire.MultiGetRequest{MapVersion: v, Keys: batch}
		return q.Encode(make([]byte, 0, 12+size+4*len(batch)))
	}})
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

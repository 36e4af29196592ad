package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/wire"
)

// ScanOptions tunes a scan's batches.
type ScanOptions struct {
	BatchPairs int // pairs per request (default 256)
	BatchBytes int // about this many reply bytes per request (default 64 KiB)
}

// Iterator walks keys in [start, end) in order across regions. It is not
// safe for concurrent use. Key and Value are valid until Next.
type Iterator struct {
	c      *Client
	ctx    context.Context
	opts   ScanOptions
	cursor []byte // next key to ask for
	end    []byte // exclusive; nil: no bound
	batch  []wire.Pair
	i      int
	done   bool
	err    error
}

// Scan returns an iterator over [start, end); a nil end scans to the end of
// the key space.
func (c *Client) Scan(ctx context.Context, start, end []byte, opts ScanOptions) *Iterator {
	if opts.BatchPairs <= 0 {
		opts.BatchPairs = 256
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 64 << 10
	}
	opts.BatchBytes = min(opts.BatchBytes, c.cfg.RingSize/4)
	return &Iterator{c: c, ctx: ctx, opts: opts, cursor: bytes.Clone(start), end: bytes.Clone(end), i: -1}
}

// Next advances; false at the end or on an error (see Err).
func (it *Iterator) Next() bool {
	for {
		if it.err != nil {
			return false
		}
		if it.i+1 < len(it.batch) {
			it.i++
			return true
		}
		if it.done {
			return false
		}
		it.fetch()
	}
}

// fetch asks the region holding the cursor for the next batch.
func (it *Iterator) fetch() {
	it.batch, it.i = nil, -1
	if it.end != nil && bytes.Compare(it.cursor, it.end) >= 0 {
		it.done = true
		return
	}
	for range it.c.cfg.Retries + 1 {
		m := it.c.m.Load()
		r := m.Lookup(it.cursor)
		if r == nil {
			it.err = fmt.Errorf("%w: no region for key %q", ErrWrongRegion, it.cursor)
			return
		}
		region := *r
		cursor := it.cursor
		rep, _, err := it.c.do(it.ctx, request{typ: wire.TypeScan, region: &region, replySize: it.opts.BatchBytes + 1024,
			payload: func(v uint64) []byte {
				q := wire.ScanRequest{MapVersion: v, Start: cursor, End: it.end, Limit: uint32(it.opts.BatchPairs), MaxBytes: uint32(it.opts.BatchBytes)}
				return q.Encode(nil)
			}}, time.Time{}, nil)
		if errors.Is(err, errRegionMoved) {
			continue // the map changed under the scan: route again
		}
		if err == nil {
			err = statusErr(rep)
		}
		if err != nil {
			it.err = err
			return
		}
		sr, err := wire.DecodeScanReply(rep.Payload)
		if err != nil {
			it.err = fmt.Errorf("%w: %w", ErrServer, err)
			return
		}
		it.advance(sr, &region)
		return
	}
	it.err = fmt.Errorf("%w: the region map kept changing during a scan", ErrWrongRegion)
}

// advance takes a batch and moves the cursor past it.
func (it *Iterator) advance(sr wire.ScanReply, r *regionmap.Assignment) {
	it.batch = sr.Pairs
	switch {
	case sr.Flags&wire.ScanMore != 0 && len(sr.Pairs) > 0:
		last := sr.Pairs[len(sr.Pairs)-1].Key
		it.cursor = append(bytes.Clone(last), 0)
	case sr.Flags&wire.ScanRegionEnd != 0 && r.End != "":
		it.cursor = []byte(r.End)
	default:
		it.done = true
	}
}

// Key is the current key.
func (it *Iterator) Key() []byte { return it.batch[it.i].Key }

// Value is the current value.
func (it *Iterator) Value() []byte { return it.batch[it.i].Value }

// Err is the error that stopped the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Close ends the iteration.
func (it *Iterator) Close() error {
	it.done, it.batch = true, nil
	return it.err
}

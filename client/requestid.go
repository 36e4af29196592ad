package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tebis-go/tebis/internal/wire"
)

// Exactly-once writes (docs/protocol.md): every put and delete carries a
// request identity, the client's id and a sequence number of its own, and
// every retry of a write carries the same identity. A region that applied
// the write already answers the retry with the original's outcome instead
// of applying it again (RIFL, Lee et al., SOSP'15). The region remembers an
// outcome until the client acknowledges it (the Ack of its later writes)
// or, for a client it no longer hears from, for its retention time
// (engine.DefaultRequestRetention, 5 minutes): a client retries a write
// for at most RetryWindow after its first attempt, well inside that.

const (
	// DefaultRetryWindow is how long a write is retried by default.
	DefaultRetryWindow = 10 * time.Second
	// MaxRetryWindow is the longest RetryWindow accepted: the regions'
	// request retention must exceed it (engine.DefaultRequestRetention is
	// 5 minutes).
	MaxRetryWindow = time.Minute
)

// newClientID returns a random non-zero 64-bit client id: two clients
// share one with probability about n²/2⁶⁵ for n clients.
func newClientID() (uint64, error) {
	var b [8]byte
	for range 8 {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("client: random client id: %w", err)
		}
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id, nil
		}
	}
	return 0, fmt.Errorf("client: random client id: the source returned zeros")
}

// seqTracker hands out a client's write sequence numbers and knows the
// lowest one still in progress. Safe for concurrent use.
type seqTracker struct {
	mu   sync.Mutex
	next uint64 // the next seq to hand out (from 1)
	// inflight holds the seqs begun and not ended, in increasing order
	// (begin hands them out in order); its length is the writes in
	// progress, so end's search and shift cost what concurrency costs,
	// and no entry outlives its write.
	inflight []uint64
}

func newSeqTracker() *seqTracker { return &seqTracker{next: 1} }

// begin returns a fresh sequence number, in progress until end, and what
// ack returns once it is in progress.
func (s *seqTracker) begin() (seq, ack uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq = s.next
	s.next++
	s.inflight = append(s.inflight, seq)
	return seq, s.inflight[0]
}

// end marks seq complete: the client never sends it again. Ending a seq
// not in progress does nothing.
func (s *seqTracker) end(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := slices.BinarySearch(s.inflight, seq)
	if !ok {
		return
	}
	s.inflight = slices.Delete(s.inflight, i, i+1)
}

// ack is the lowest sequence number in progress (or the next one): at most
// the seq of any write in progress.
func (s *seqTracker) ack() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inflight) > 0 {
		return s.inflight[0]
	}
	return s.next
}

// write runs one identified write: a fresh seq, the same identity on every
// attempt, attempts only within the retry window. tail follows what
// encode returns on the wire (a put's value, sent without a copy of its
// own).
func (c *Client) write(ctx context.Context, typ uint16, key, tail []byte, encode func(v uint64, id wire.RequestID) []byte) error {
	seq, ack := c.seqs.begin()
	defer c.seqs.end(seq)
	start := time.Now()
	until := start.Add(c.cfg.RetryWindow)
	first := true
	rep, _, err := c.do(ctx, request{typ: typ, key: key, start: start, payload: func(v uint64) []byte {
		if !first { // a retry acknowledges what ended since
			ack = c.seqs.ack()
		}
		first = false
		return encode(v, wire.RequestID{Client: c.id, Seq: seq, Ack: ack})
	}}, until, tail)
	if err != nil && ctx.Err() == nil && !time.Now().Before(until) {
		return fmt.Errorf("%w: not acknowledged within the retry window (%v): %w", ErrUnavailable, c.cfg.RetryWindow, err)
	}
	if err != nil {
		return err
	}
	return statusErr(rep)
}

package engine

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

// RequestID names one client write for exactly-once application (RIFL,
// Lee et al., SOSP'15). Client is the client's unique id (0: the write has
// no identity and is not deduplicated); Seq is the client's sequence
// number for the write (≥ 1, unique per client); Ack is the client's
// lowest sequence number not yet completed: the client promises never to
// send a write below Ack again, so Ack ≤ Seq and the region may forget
// the outcomes below it.
type RequestID struct {
	Client, Seq, Ack uint64
}

// ridLen is a RequestID's encoded size: client, seq, ack as u64.
const ridLen = 24

func (id RequestID) encode(b []byte) {
	binary.LittleEndian.PutUint64(b[0:], id.Client)
	binary.LittleEndian.PutUint64(b[8:], id.Seq)
	binary.LittleEndian.PutUint64(b[16:], id.Ack)
}

func decodeRequestID(b []byte) RequestID {
	return RequestID{
		Client: binary.LittleEndian.Uint64(b[0:]),
		Seq:    binary.LittleEndian.Uint64(b[8:]),
		Ack:    binary.LittleEndian.Uint64(b[16:]),
	}
}

// validate checks a client-supplied identity.
func (id RequestID) validate() error {
	if id.Client != 0 && (id.Seq == 0 || id.Ack > id.Seq) {
		return fmt.Errorf("%w: client %d seq %d ack %d", ErrBadRequestID, id.Client, id.Seq, id.Ack)
	}
	return nil
}

// DefaultRequestRetention is how long a region remembers a client's
// completed writes after it last saw that client (Options.RequestRetention).
// It must exceed the longest time a client retries one write
// (client.MaxRetryWindow): a retry after the region forgot the original
// would apply it again.
const DefaultRequestRetention = 5 * time.Minute

// reqVerdict is what the completion table says about a request.
type reqVerdict int

const (
	reqNew       reqVerdict = iota // never applied: apply it
	reqDuplicate                   // applied already: return its outcome
	reqStale                       // below the client's ack: the client cannot be waiting for it
)

// reqClient is one client's row of the completion table.
type reqClient struct {
	ack  uint64    // every seq below it is complete at the client
	done []reqDone // applied seqs ≥ ack, ascending
	seen time.Time // last apply (or rebuild) that touched the row
}

// reqDone is an applied write: its seq and the log position after its
// record. A row keeps them sorted by seq: a client's seqs arrive nearly in
// order, so an insert lands at or near the end, and a rising ack drops a
// prefix, where a map had to be scanned whole on every ack. (A seq that
// arrives k places out of order costs a shift of k entries.)
type reqDone struct{ seq, end uint64 }

// find returns where seq is, or would be inserted, in c.done.
func (c *reqClient) find(seq uint64) (int, bool) {
	return slices.BinarySearchFunc(c.done, seq, func(d reqDone, seq uint64) int {
		switch {
		case d.seq < seq:
			return -1
		case d.seq > seq:
			return 1
		}
		return 0
	})
}

// lookup returns the log position after seq's record, if seq is applied.
func (c *reqClient) lookup(seq uint64) (uint64, bool) {
	if i, ok := c.find(seq); ok {
		return c.done[i].end, true
	}
	return 0, false
}

// set records seq as applied, its record ending at end; keep leaves an
// entry already there as it is.
func (c *reqClient) set(seq, end uint64, keep bool) {
	i, ok := c.find(seq)
	switch {
	case ok && keep:
	case ok:
		c.done[i].end = end
	default:
		c.done = slices.Insert(c.done, i, reqDone{seq, end})
	}
}

// reqTable is a region's completion table: for each client, the writes
// applied and not yet acknowledged by the client, with where their records
// end in the log (a duplicate waits for that position to commit before it
// reports success). It is pure bookkeeping; the region guards it with its
// mutex and persists it as checkpoint records in its log (docs/format.md).
type reqTable struct {
	clients map[uint64]*reqClient
}

func newReqTable() *reqTable { return &reqTable{clients: map[uint64]*reqClient{}} }

// check classifies id (id.Client ≠ 0). For a duplicate, end is the log
// position after the original's record.
func (t *reqTable) check(id RequestID) (v reqVerdict, end uint64) {
	c := t.clients[id.Client]
	if c == nil {
		return reqNew, 0
	}
	if end, ok := c.lookup(id.Seq); ok {
		return reqDuplicate, end
	}
	if id.Seq < c.ack {
		return reqStale, 0
	}
	return reqNew, 0
}

// add records id as applied with its record ending at log position end,
// and forgets the client's outcomes below its (new) ack.
func (t *reqTable) add(id RequestID, end uint64, now time.Time) {
	c := t.row(id.Client, now)
	c.raiseAck(id.Ack)
	if id.Seq >= c.ack {
		c.set(id.Seq, end, false)
	}
}

func (t *reqTable) row(client uint64, now time.Time) *reqClient {
	c := t.clients[client]
	if c == nil {
		c = &reqClient{}
		t.clients[client] = c
	}
	if now.After(c.seen) {
		c.seen = now
	}
	return c
}

func (c *reqClient) raiseAck(ack uint64) {
	if ack <= c.ack {
		return
	}
	c.ack = ack
	if i, _ := c.find(ack); i > 0 {
		c.done = c.done[:copy(c.done, c.done[i:])] // the array is reused
	}
}

// expire forgets the clients not seen since before now-retention.
func (t *reqTable) expire(now time.Time, retention time.Duration) {
	for id, c := range t.clients {
		if now.Sub(c.seen) > retention {
			delete(t.clients, id)
		}
	}
}

// len is the number of outcomes the table holds.
func (t *reqTable) len() int {
	n := 0
	for _, c := range t.clients {
		n += len(c.done)
	}
	return n
}

// Checkpoint chunk (the payload of a kind-5 record):
//
//	version u8 (1) | clients u32 | per client: id u64 | ack u64 | n u32 | n × seq u64
const (
	reqChunkVersion = 1
	reqChunkHeader  = 5
	reqRowHeader    = 20
)

// encodeChunks encodes the table as checkpoint chunks of at most max bytes
// each (max ≥ reqChunkHeader+reqRowHeader+8; a client with more outcomes
// than fit in one chunk is split across several, which merge back). Clients
// and seqs are in ascending order, so equal tables encode identically. An
// empty table encodes as one empty chunk.
func (t *reqTable) encodeChunks(max int) [][]byte {
	ids := make([]uint64, 0, len(t.clients))
	for id := range t.clients {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out [][]byte
	cur := newChunk()
	count := uint32(0)
	flush := func() {
		binary.LittleEndian.PutUint32(cur[1:], count)
		out = append(out, cur)
		cur, count = newChunk(), 0
	}
	for _, id := range ids {
		c := t.clients[id]
		seqs := make([]uint64, 0, len(c.done))
		for _, d := range c.done {
			seqs = append(seqs, d.seq)
		}
		for first := true; first || len(seqs) > 0; first = false {
			if len(cur)+reqRowHeader+8 > max && count > 0 {
				flush()
			}
			n := min(len(seqs), (max-len(cur)-reqRowHeader)/8)
			cur = binary.LittleEndian.AppendUint64(cur, id)
			cur = binary.LittleEndian.AppendUint64(cur, c.ack)
			cur = binary.LittleEndian.AppendUint32(cur, uint32(n))
			for _, s := range seqs[:n] {
				cur = binary.LittleEndian.AppendUint64(cur, s)
			}
			seqs = seqs[n:]
			count++
		}
	}
	flush()
	return out
}

func newChunk() []byte { return append(make([]byte, 0, 64), reqChunkVersion, 0, 0, 0, 0) }

// merge adds a checkpoint chunk's rows: acks rise to the chunk's, its seqs
// count as applied with their records ending at end (the checkpoint's
// position: they all precede it), and every row it names counts as seen
// now. A malformed chunk is ErrCorrupt and changes nothing.
func (t *reqTable) merge(chunk []byte, end uint64, now time.Time) error {
	bad := func(why string) error { return fmt.Errorf("%w: request-table checkpoint: %s", ErrCorrupt, why) }
	if len(chunk) < reqChunkHeader || chunk[0] != reqChunkVersion {
		return bad("bad header")
	}
	n := binary.LittleEndian.Uint32(chunk[1:])
	b := chunk[reqChunkHeader:]
	type row struct {
		id, ack uint64
		seqs    []byte
	}
	rows := make([]row, 0, min(int(n), len(b)/reqRowHeader))
	for i := uint32(0); i < n; i++ {
		if len(b) < reqRowHeader {
			return bad("truncated row")
		}
		r := row{id: binary.LittleEndian.Uint64(b), ack: binary.LittleEndian.Uint64(b[8:])}
		k := binary.LittleEndian.Uint32(b[16:])
		b = b[reqRowHeader:]
		if r.id == 0 || uint64(k) > uint64(len(b))/8 {
			return bad("bad row")
		}
		r.seqs, b = b[:8*k], b[8*k:]
		rows = append(rows, r)
	}
	if len(b) != 0 {
		return bad("trailing bytes")
	}
	for _, r := range rows {
		c := t.row(r.id, now)
		c.raiseAck(r.ack)
		for i := 0; i < len(r.seqs); i += 8 {
			if s := binary.LittleEndian.Uint64(r.seqs[i:]); s >= c.ack {
				c.set(s, end, true)
			}
		}
	}
	return nil
}

package engine

import "fmt"

// Shipping the completion table with a copy of the region's pairs (a
// Build-Index seed). The chunks are the checkpoint records' payload
// (docs/format.md, record kind 5); only the engine reads them.

// minRequestChunk is the smallest chunk limit that holds one outcome.
const minRequestChunk = reqChunkHeader + reqRowHeader + 8

// RequestTableChunks returns the region's completion table, idle clients
// expired first (Options.RequestRetention), as checkpoint chunks of at
// most max(limit, 33) bytes each; an empty table is no chunk. The caller
// copies them to a region that takes the same pairs (MergeRequestTable);
// the two agree only if no write runs in between (the region is held).
func (r *Region) RequestTableChunks(limit int) ([][]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	r.reqs.expire(r.now(), r.v.opts.RequestRetention)
	if len(r.reqs.clients) == 0 {
		return nil, nil
	}
	return r.reqs.encodeChunks(max(limit, minRequestChunk)), nil
}

// ResetRequestTable forgets every outcome the region's completion table
// holds: a region being overwritten with another region's pairs takes
// that region's table (MergeRequestTable) instead of its own. It changes
// the table in memory only: until the region's next L0 compaction moves
// the recovery point past a checkpoint of the new table, a restart
// rebuilds the forgotten outcomes from the log.
func (r *Region) ResetRequestTable() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.reqs = newReqTable()
	return nil
}

// MergeRequestTable adds a chunk of RequestTableChunks to the region's
// completion table: its outcomes count as applied, a duplicate of one
// waiting for the log position after the chunk's checkpoint records
// (everything written before them, e.g. the pairs the chunk came with,
// is in the log by then). The chunk is appended to the region's log as
// checkpoint records first, so a restart's replay rebuilds it as it
// rebuilds the pairs; the next L0 freeze checkpoints it with the rest of
// the table. A malformed chunk is ErrCorrupt and changes nothing.
func (r *Region) MergeRequestTable(chunk []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	now := r.now()
	// Decoded on its own first: checked before anything is written, and
	// split again to this region's record size.
	rows := newReqTable()
	if err := rows.merge(chunk, 0, now); err != nil {
		return err
	}
	if len(rows.clients) == 0 {
		return nil
	}
	limit := min(r.v.g.maxRecord()-recHeaderLen, maxCheckpointChunk)
	var end uint64
	for _, c := range rows.encodeChunks(limit) {
		_, e, err := r.log.append(recTable, nil, c, RequestID{}, false)
		if err != nil {
			return fmt.Errorf("engine: region %d: appending a request-table checkpoint: %w", r.desc.ID, err)
		}
		end = e
	}
	return r.reqs.merge(chunk, end, now)
}

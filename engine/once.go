package engine

import (
	"errors"
	"fmt"
	"time"
)

// Exactly-once writes (RIFL, Lee et al., SOSP'15). A client names each
// write with a RequestID. The region keeps a completion table: per client,
// the sequence numbers applied and not yet acknowledged by the client, and
// where each one's record ends in the log. The record carries the identity
// (kinds 3 and 4, docs/format.md), so the table is rebuilt wherever the log
// is replayed: at a restart and at a promotion (from the recovery point),
// and on a Build-Index backup, which applies the records with their
// identities (ApplyLogRecord). Outcomes of writes that a compaction moves
// behind the recovery point survive as checkpoint records (kind 5) that
// each L0 freeze appends right at the next recovery point. A row is
// forgotten when the client acknowledges its seqs (RequestID.Ack) or when
// the client was not seen for Options.RequestRetention; clients bound how
// long they retry a write below that.

// PutOnce stores value under key once per request identity: a write whose
// id the completion table holds already is not applied again; it returns
// applied false once the original is acknowledged-grade (durable in sync
// mode, replicated with a replicator), or the error the original's wait
// would get now. id.Client 0 is a plain Put (applied true). A malformed id
// is ErrBadRequestID; a seq below the client's ack is ErrStaleRequest.
func (r *Region) PutOnce(key, value []byte, id RequestID) (applied bool, err error) {
	return r.putOnce(key, value, id, nil)
}

// TryPutOnce is PutOnce for a caller that must not wait (a ring server's
// polling goroutine). It applies the put only if nothing before its
// append would wait, and otherwise reports ok false having changed
// nothing: while another goroutine holds the region's lock, during a
// Quiesce, when L0 is full or the record would switch log segments (a
// seal, which a listener's SealGate may hold), for a region that mirrors
// its records to backups while the mirror's lock is held (a listener that
// WantsRecords and is no AppendHolder, or whose TryHoldAppend fails; a
// WriteGate that is a TryWriteGate and cannot tell), for a duplicate (it
// waits as its original does), and on a closed or failed region (PutOnce
// reports why). Errors that need no wait (a malformed id, a stale seq, an
// oversized pair) come with ok true.
//
// What PutOnce waits for after the append (the group commit in sync mode,
// the replicator's acknowledgement) is waited for by the region's
// acknowledger, one goroutine for all such writes of the region: then
// TryPutOnce returns later true, and done is called once, on that
// goroutine with no lock held, with the error PutOnce would have
// returned. With nothing to wait for (nothing to wait for at all, or a
// replicator that is a TryAcknowledger telling the write acknowledged
// at once), later is false and done is not called. done must not block
// for long: the region's other writes are acknowledged after it.
func (r *Region) TryPutOnce(key, value []byte, id RequestID, done func(error)) (ok, later bool, err error) {
	if done == nil {
		return false, false, errors.New("engine: TryPutOnce without done")
	}
	_, err = r.putOnce(key, value, id, done)
	switch {
	case errors.Is(err, errDeclined):
		return false, false, nil
	case errors.Is(err, errLater):
		return true, true, nil
	}
	return true, false, err
}

// putOnce is PutOnce, or with then TryPutOnce (errDeclined, errLater).
func (r *Region) putOnce(key, value []byte, id RequestID, then func(error)) (bool, error) {
	if err := id.validate(); err != nil {
		return false, err
	}
	if len(value) > r.v.MaxValueSize() {
		return false, fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), r.v.MaxValueSize())
	}
	return r.write(recPut, key, value, id, nil, r.v.opts.SyncMode == SyncModeSync, false, then)
}

// DeleteOnce removes key once per request identity, like PutOnce.
func (r *Region) DeleteOnce(key []byte, id RequestID) (applied bool, err error) {
	if err := id.validate(); err != nil {
		return false, err
	}
	return r.write(recDelete, key, nil, id, nil, r.v.opts.SyncMode == SyncModeSync, false, nil)
}

// ApplyLogRecord applies the log record at the start of b, sealed in a
// segment of sequence segSeq, as the primary applied it, and returns its
// size: a put or delete is written with its request identity (filling the
// completion table; a record whose identity the table holds already is a
// re-delivery and is skipped), a request-table checkpoint is merged into
// the table. A Build-Index backup applies the primary's mirrored records
// with it. It does not wait for the record to be durable, whatever the
// sync mode, nor does a re-delivery wait for its original: the caller
// makes the records it applied durable together with CommitApplied
// before it reports them applied. A b that does not start with a record
// that verifies is ErrCorrupt.
func (r *Region) ApplyLogRecord(b []byte, segSeq uint64) (int, error) {
	rec, ok := decodeRecord(b, segSeq)
	if !ok {
		return 0, fmt.Errorf("%w: region %d: no valid log record to apply", ErrCorrupt, r.desc.ID)
	}
	if rec.Kind == recTable {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.closed {
			return 0, ErrClosed
		}
		return rec.Size, r.reqs.merge(rec.Value, r.log.pos(), r.now())
	}
	_, err := r.write(rec.Kind, rec.Key, rec.Value, rec.ID, nil, false, true, nil)
	return rec.Size, err
}

// RequestTableLen is the number of write outcomes the region's completion
// table holds (for stats and tests).
func (r *Region) RequestTableLen() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.reqs.len()
}

// waitDuplicate makes a duplicate of the write whose record ends at end
// wait as the original does before it is acknowledged: durable (sync),
// replicated (a replicator). The original may still be waiting; the
// duplicate is never acknowledged before it could be.
func (r *regionCore) waitDuplicate(end uint64, sync bool) error {
	if sync {
		if err := r.log.syncTo(end); err != nil {
			return err
		}
	}
	if rep := r.repl.Load(); rep != nil {
		if rep.gate != nil { // as its original: the replicator's copies rule
			return rep.gate.WaitAcknowledged(end)
		}
		return rep.WaitReplicated(end)
	}
	return nil
}

// maxCheckpointChunk bounds one checkpoint record's payload.
const maxCheckpointChunk = 256 << 10

// checkpointLocked expires idle clients and appends the completion table
// as checkpoint records; it returns the log position after them (0: the
// table is empty and nothing was appended). Called with mu held.
func (r *regionCore) checkpointLocked() (uint64, error) {
	r.reqs.expire(r.now(), r.v.opts.RequestRetention)
	if len(r.reqs.clients) == 0 {
		return 0, nil
	}
	limit := min(r.v.g.maxRecord()-recHeaderLen, maxCheckpointChunk)
	var end uint64
	for _, c := range r.reqs.encodeChunks(limit) {
		_, e, err := r.log.append(recTable, nil, c, RequestID{}, false)
		if err != nil {
			return 0, err
		}
		end = e
	}
	return end, nil
}

// replayRecord rebuilds the completion table from a replayed record that
// ends at log position end.
func (r *regionCore) replayRecord(rec record, end uint64, now time.Time) error {
	switch {
	case rec.Kind == recTable:
		return r.reqs.merge(rec.Value, end, now)
	case rec.ID.Client != 0:
		r.reqs.add(rec.ID, end, now)
	}
	return nil
}

package replication

import (
	"fmt"
	"sort"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// The Build-Index backup: every stream starts with CmdCheck, which the
// backup answers with the point of the primary's log it holds (Applied);
// the primary then names the point the stream continues from
// (CmdApplyFrom: the backup's own, after a seed with CmdReset, CmdPairs
// and CmdRequests the tail's end, after a catch-up from an old primary's
// records the promoted region's own point) and catches it up. Flushes apply
// the records after the point, in log order; a flush that does not
// continue from it (another stream's, another segment while the current
// one is not sealed, bytes starting past the point) is refused with
// ErrOutOfSync: records are never skipped.
//
// Durability: a command's records (a flush's, a seed's pairs, the deletes
// of a reset) are applied without a wait each and made durable together
// before the command returns (commitBuild: in sync mode one fdatasync per
// command, not one per record, which made a healthy backup's 2 MiB flush
// of small records outlast the hang watchdog). So when the backup
// answers a command, and whenever r.mu is free, everything r.applied
// names is as durable as the region's sync mode promises a write.

// handleBuild applies one command to a Build-Index backup. Called with
// r.mu held.
func (r *Replica) handleBuild(c *Command) error {
	switch c.Kind {
	case CmdCheck:
		// A new stream: nothing applies until the primary names the
		// point it continues from.
		r.stream, r.agreed = c.Epoch, false
		return nil
	case CmdReset:
		if r.stream != c.Epoch {
			return fmt.Errorf("%w: reset outside its stream", ErrOutOfOrder)
		}
		r.known, r.sealed, r.agreed = false, false, false
		r.incomplete = true // a seed: complete again at the stream's IN_SYNC
		replwire.ClearMarker(r.buf[:r.segSize])
		replwire.ClearMarker(r.buf[r.segSize : 2*r.segSize])
		// The region takes the primary's pairs and completion table
		// (CmdRequests): outcomes of its own are not the primary's.
		if err := r.region.ResetRequestTable(); err != nil {
			return err
		}
		return r.emptyRegion()
	case CmdPairs:
		if r.stream != c.Epoch || r.known {
			return fmt.Errorf("%w: pairs outside a seed", ErrOutOfOrder)
		}
		return replwire.DecodePairs(c.Data, r.region.ApplyPut)
	case CmdRequests:
		if r.stream != c.Epoch || r.known {
			return fmt.Errorf("%w: completion table outside a seed", ErrOutOfOrder)
		}
		return r.region.MergeRequestTable(c.Data)
	case CmdApplyFrom:
		a, ok, err := replwire.DecodeApplied(c.Data)
		if err == nil && !ok {
			err = fmt.Errorf("%w: apply-from without a point", ErrMalformed)
		}
		if err != nil {
			return err
		}
		if r.stream != c.Epoch {
			return fmt.Errorf("%w: apply-from outside its stream", ErrOutOfOrder)
		}
		r.applied, r.sealed, r.known, r.agreed = a.Position, a.Sealed, true, true
		return nil
	case CmdFlush:
		return r.applyFlush(c)
	}
	return nil // compactions, log frees: the backup does its own
}

// commitBuild makes the records the replica applied durable as the
// region's sync mode promises (engine.Region.CommitApplied), before a
// command's reply or the end of a fold. If that fails the region's log
// failed and the records after its last sync may not be on the disk: the
// replica forgets its point (a check answers none, the primary seeds it)
// rather than claim them. Called with r.mu held.
func (r *Replica) commitBuild() error {
	if err := r.region.CommitApplied(); err != nil {
		r.known, r.agreed = false, false
		return err
	}
	return nil
}

// appliedReply is the answer to CmdCheck.
func (r *Replica) appliedReply() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.known {
		return nil
	}
	return replwire.Applied{Position: r.applied, Sealed: r.sealed}.Encode()
}

// applyFlush applies the records of a flushed segment part: from the
// buffer half, or from Data (a catch-up).
func (r *Replica) applyFlush(c *Command) error {
	if !r.agreed || c.Epoch != r.stream {
		return fmt.Errorf("%w: flush of segment %d (seq %d) at epoch %d with no agreed starting point (stream of epoch %d)", ErrOutOfSync, c.Segment, c.Seq, c.Epoch, r.stream)
	}
	if c.End >= r.segSize || c.End < engine.SegmentHeaderSize {
		return fmt.Errorf("%w: flush up to %d of a %d-byte segment", ErrMalformed, c.End, r.segSize)
	}
	var img []byte
	start := int64(engine.SegmentHeaderSize)
	if len(c.Data) > 0 {
		start = c.End - int64(len(c.Data))
		if start < engine.SegmentHeaderSize {
			return fmt.Errorf("%w: %d catch-up bytes ending at %d", ErrMalformed, len(c.Data), c.End)
		}
		img = make([]byte, r.segSize)
		copy(img[start:], c.Data)
	} else {
		h := int64(c.Half) * r.segSize
		img = r.buf[h : h+r.segSize]
	}
	return r.applyImage(c.Segment, c.Seq, img, start, c.End, c.Sealed)
}

// applyImage applies the records of img in [from, end), the primary's
// segment seg (records sealed with seq), continuing r.applied; sealed:
// end is the segment's end. Called with r.mu held.
func (r *Replica) applyImage(seg, seq uint64, img []byte, from, end int64, sealed bool) error {
	if seg != r.applied.Segment || seq != r.applied.Seq {
		if !r.sealed {
			return fmt.Errorf("%w: segment %d (seq %d) follows segment %d (seq %d) applied up to %d, not sealed there", ErrOutOfSync,
				seg, seq, r.applied.Segment, r.applied.Seq, r.applied.Off)
		}
		r.applied = Position{Log: r.applied.Log, Index: r.applied.Index + 1, Segment: seg, Seq: seq, Off: engine.SegmentHeaderSize}
		r.sealed = false
	}
	if from > r.applied.Off {
		return fmt.Errorf("%w: segment %d bytes from %d, applied up to %d", ErrOutOfSync, seg, from, r.applied.Off)
	}
	if end > r.applied.Off {
		a := NewApplier(r.region, seq, r.applied.Off)
		_, err := a.Apply(img, end)
		r.applied.Off = a.off
		if err != nil {
			return err
		}
	}
	if sealed {
		if end != r.applied.Off {
			return fmt.Errorf("%w: segment %d sealed at %d, applied up to %d", ErrOutOfSync, seg, end, r.applied.Off)
		}
		r.sealed = true
	}
	return nil
}

// emptyRegion deletes every key of the backup's region (a seed follows).
func (r *Replica) emptyRegion() error {
	it := r.region.Scan(nil, nil)
	var keys [][]byte
	for it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	if err := it.Close(); err != nil {
		return err
	}
	for _, k := range keys {
		if err := r.region.ApplyDelete(k); err != nil {
			return err
		}
	}
	return nil
}

// promoteBuild applies a Build-Index backup's buffered records that were
// never flushed to it (the halves, oldest first) and keeps them, with the
// region's log point after them, as the handover for the other backups.
// A half that does not continue what was applied is an error: the region
// would lack records its old primary may have acknowledged. Called with
// r.mu held.
func (r *Replica) promoteBuild(halves []promoteHalf) error {
	ho := &Handover{Log: r.applied.Log}
	for _, h := range halves {
		if !r.known {
			// No agreed point (a backup never checked by a stream): all
			// it has is its buffer, applied whole.
			if err := applyWhole(r.region, h.m.Seq, h.img, h.end); err != nil {
				return err
			}
			continue
		}
		if h.m.Index < r.applied.Index || (h.m.Index == r.applied.Index && r.sealed) {
			// applied already; other backups may still need it
		} else if err := r.applyImage(h.m.Segment, h.m.Seq, h.img, engine.SegmentHeaderSize, h.end, h.older); err != nil {
			return fmt.Errorf("replication: promoting region %d: buffered segment %d (index %d): %w", r.region.Desc().ID, h.m.Segment, h.m.Index, err)
		}
		if h.end >= engine.SegmentHeaderSize {
			ho.Halves = append(ho.Halves, HalfImage{Index: h.m.Index, Segment: h.m.Segment, Seq: h.m.Seq, End: h.end, Image: append([]byte(nil), h.img...)})
		}
	}
	if !r.known {
		return nil
	}
	tail, err := r.region.LogTail()
	if err != nil {
		return err
	}
	ho.At = Position{Index: tail.Index, Segment: tail.Segment, Seq: tail.Seq, Off: tail.Offset}
	r.handover = ho
	return nil
}

// applyWhole applies every record of img from the segment header up to
// end.
func applyWhole(region *engine.Region, seq uint64, img []byte, end int64) error {
	if end <= engine.SegmentHeaderSize {
		return nil
	}
	_, err := NewApplier(region, seq, engine.SegmentHeaderSize).Apply(img, end)
	return err
}

// foldBuffer applies the records of the buffer's halves that continue
// the backup's point, oldest first, and stops at the first that does not
// (it holds nothing after the point, or not from this point's log); what
// it applied is committed (commitBuild). Called with r.mu held, the
// buffer revoked.
func (r *Replica) foldBuffer() {
	if !r.agreed {
		return
	}
	defer func() { _ = r.commitBuild() }() // a failure forgets the point: the next stream seeds
	halves := r.halves()
	for _, h := range halves {
		if h.m.Index < r.applied.Index || (h.m.Index == r.applied.Index && r.sealed) {
			continue
		}
		if r.applyImage(h.m.Segment, h.m.Seq, h.img, engine.SegmentHeaderSize, h.end, h.older) != nil {
			return
		}
	}
}

// halves reads the buffer halves that name this region (bufferHalves:
// one per log segment), in log order;
// every one but the newest is marked older (it ends where its segment was
// sealed: the mirror's switch waited for its WRITEs). Called with r.mu
// held.
func (r *Replica) halves() []promoteHalf {
	out := bufferHalves(r.buf, r.segSize, r.id)
	sort.Slice(out, func(i, j int) bool { return out[i].m.Index < out[j].m.Index })
	for i := range out {
		out[i].older = i < len(out)-1
	}
	return out
}

// Handover is what Promote kept of a Build-Index backup's old primary's
// log (nil for Send-Index, or a backup that held no agreed point).
func (r *Replica) Handover() *Handover {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handover
}

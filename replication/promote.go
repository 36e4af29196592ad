package replication

import (
	"fmt"
	"sort"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// Promote turns the backup's region into the primary at epoch (the old
// primary failed, paper §3.5): the buffer's halves are persisted as the
// log segments their tail markers name (the older one first: a sealed
// segment whose flush never came), then the engine seals the log, appends
// a fresh tail and rebuilds L0 by replaying the log from the recovery
// point. The caller must have revoked the buffer first (rdma.MR.Revoke):
// no WRITE of the old primary may land while it is read. The replica is
// closed afterwards (its engine.Backup handle is closed: commands fail
// with engine.ErrClosed); the returned region is held (engine.Options.
// HoldBackground) until the caller resumes it. A replica whose copy is
// not complete (Complete), or whose buffer does not continue the log its
// flushes reached (a segment neither flushed nor in a half), is not
// promoted: ErrIncompleteCopy. A
// Build-Index backup's region is already a primary's: only its buffered
// records are applied, and its log is synced before Promote returns.
// Either way every record the returned region holds is on its disk (it
// may be the only copy once its first stream has reset the other
// backups).
func (r *Replica) Promote(epoch uint64) (*engine.Region, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if epoch < r.epoch {
		return nil, fmt.Errorf("%w: promotion at epoch %d, region %d is at %d", ErrStaleEpoch, epoch, r.id, r.epoch)
	}
	if r.incomplete {
		return nil, fmt.Errorf("%w: region %d at epoch %d", ErrIncompleteCopy, r.id, epoch)
	}
	id := r.id
	halves := bufferHalves(r.buf, r.segSize, id)
	if err := r.gapLocked(halves); err != nil {
		return nil, err
	}
	r.abortLocked()
	sort.Slice(halves, func(i, j int) bool { return halves[i].m.Seq < halves[j].m.Seq })
	if r.mode == BuildIndex {
		// In log order; every half but the newest ends where its segment
		// was sealed (the switch to the next one waited for its WRITEs).
		sort.Slice(halves, func(i, j int) bool { return halves[i].m.Index < halves[j].m.Index })
		for i := range halves {
			halves[i].older = i < len(halves)-1
		}
		if err := r.promoteBuild(halves); err != nil {
			return nil, err
		}
		// Durable before the caller attaches anyone: the new stream
		// discards the other backups' copies (fresh buffers, a seed), and
		// an async region holds its applied records in memory until its
		// log is flushed.
		if err := r.region.Sync(); err != nil {
			return nil, fmt.Errorf("replication: promoting region %d: syncing its log: %w", id, err)
		}
		// Its own from here: a restart serves it as the primary's copy.
		if err := r.vol.SetFollower(id, false); err != nil {
			return nil, fmt.Errorf("replication: promoting region %d: %w", id, err)
		}
		r.epoch = epoch
		return r.region, nil
	}
	var tail *engine.PromoteTail
	for i, h := range halves {
		if h.end <= engine.SegmentHeaderSize {
			continue
		}
		if i < len(halves)-1 {
			// The older half: adopted only as the segment right before the
			// tail in the primary's log whose flush never came — not one
			// the primary freed since (its records are dead or relocated,
			// and replayed after the tail they would win), nor a leftover
			// of an earlier stream.
			last := halves[len(halves)-1].m
			if h.m.Index+1 != last.Index || r.freed[logID{h.m.Segment, h.m.Seq}] {
				continue
			}
			if _, err := r.backup.AdoptLog(h.m.Segment, h.m.Seq, h.img, h.end); err != nil {
				return nil, err
			}
			continue
		}
		tail = &engine.PromoteTail{Segment: h.m.Segment, Seq: h.m.Seq, Image: h.img, End: h.end}
	}
	region, err := r.vol.PromoteBackup(id, epoch, tail)
	if err != nil {
		return nil, err
	}
	r.epoch = epoch
	r.region = region
	return region, nil
}

// bufferHalves reads the halves of buf that name region id, in buffer
// order. Two halves naming the same log segment (a re-attach of the same
// primary mirrors its tail into half 0 whichever half the old stream's
// tail was in) are both prefixes of that segment: only the one with the
// longer verified image is returned, the other stopped where its stream
// did and lacks what the newer stream acknowledged.
func bufferHalves(buf []byte, segSize int64, id uint64) []promoteHalf {
	var out []promoteHalf
	for h := range 2 {
		img := buf[int64(h)*segSize : int64(h+1)*segSize]
		m, ok := replwire.DecodeMarker(img)
		if !ok || m.Region != id {
			continue
		}
		out = append(out, promoteHalf{m: m, img: img, end: engine.TailEnd(img, m.Seq)})
	}
	if len(out) == 2 && sameLogSegment(out[0].m, out[1].m) {
		if out[0].end < out[1].end {
			out = out[1:]
		} else {
			out = out[:1]
		}
	}
	return out
}

// sameLogSegment reports whether two tail markers name the same segment of
// the same primary log (position, number and sequence).
func sameLogSegment(a, b replwire.Marker) bool {
	return a.Index == b.Index && a.Segment == b.Segment && a.Seq == b.Seq
}

// promoteHalf is a buffer half a promotion reads: its marker, image and
// the end of its verified records; older: not the newest half.
type promoteHalf struct {
	m     replwire.Marker
	img   []byte
	end   int64
	older bool
}

// SetBuffer replaces the buffer the primary's mirror writes into (a new
// primary gets a fresh registered buffer; the old one was revoked). A
// Build-Index backup first applies what the old buffer holds after its
// point (records its primary may have acknowledged, never flushed to it):
// discarded, they would be on no backup until the new primary's stream
// caught it up.
func (r *Replica) SetBuffer(buf []byte) error {
	if int64(len(buf)) < 2*r.segSize {
		return fmt.Errorf("replication: replica buffer of %d bytes, want %d", len(buf), 2*r.segSize)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mode == BuildIndex {
		r.foldBuffer()
	}
	r.buf = buf
	r.flushedKnown = false
	r.incomplete = true // the records of the old buffer are not in this one
	return nil
}

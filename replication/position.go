package replication

import (
	"github.com/tebis-go/tebis/engine"

	"github.com/tebis-go/tebis/internal/replwire"
)

// LogPosition orders backups of one primary by how much of its log their
// buffers hold: the newest buffer half's position in the primary's log
// (its tail marker's index) in the high 32 bits, the end of its verified
// records in the low ones; 0 when no half names this region. Backups
// that mirror the same primary at the same epoch compare directly; the
// master promotes the highest (docs/failover.md).
//
// It reads the buffer: no WRITE may copy into it meanwhile from this
// process (hold the buffer with rdma.MR.View, or revoke it); a WRITE from
// another process only makes the position a lower bound.
func (r *Replica) LogPosition() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.logPositionLocked()
}

// logPositionLocked is LogPosition with r.mu held.
func (r *Replica) logPositionLocked() uint64 {
	id := r.id
	var pos uint64
	for h := range 2 {
		img := r.buf[int64(h)*r.segSize : int64(h+1)*r.segSize]
		m, ok := replwire.DecodeMarker(img)
		if !ok || m.Region != id {
			continue
		}
		end := max(engine.TailEnd(img, m.Seq), 0)
		pos = max(pos, m.Index<<32|uint64(end)&(1<<32-1))
	}
	return pos
}

// Report is a backup's log position report for a failover at epoch (its
// primary is gone): LogPosition and Complete, read together; a copy
// whose buffer does not continue the log its flushes reached (Promote
// would refuse it) is reported incomplete. A complete
// report is a promise the master may act on (it promotes only a backup
// that reported a complete copy): from here the replica refuses every
// command of epoch and older ones (ErrReported: a paused primary resuming
// its attach must not reset or rebase the copy), and the server refuses
// their hellos (Reported); a primary of a newer epoch may reset it. The
// same buffer rules as LogPosition apply.
func (r *Replica) Report(epoch uint64) (pos uint64, complete bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pos = r.logPositionLocked()
	if !r.incomplete && r.gapLocked(bufferHalves(r.buf, r.segSize, r.id)) == nil {
		r.reported = max(r.reported, epoch)
		return pos, true
	}
	return pos, false
}

// Reported is the highest epoch at which the replica reported its copy
// complete (Report): a replication hello of that epoch or an older one
// must be refused (its new buffer would make the copy incomplete).
func (r *Replica) Reported() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reported
}

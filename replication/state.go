package replication

import (
	"fmt"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// recoveryPointer is a region that tells its recovery point in the
// primary's terms: an engine.Region (its own numbers) or an engine.Backup
// (its log map's primary numbers).
type recoveryPointer interface {
	LogRecoveryPoint() (engine.LogSegment, int64, bool)
}

// regionRP reads a region's recovery point in the primary's terms.
func regionRP(r recoveryPointer) replwire.RecoveryPoint {
	ls, off, ok := r.LogRecoveryPoint()
	if !ok {
		return replwire.RecoveryPoint{}
	}
	return replwire.RecoveryPoint{Segment: ls.Segment, Seq: ls.Seq, Offset: off}
}

// primaryState reads a primary region's state.
func primaryState(r *engine.Region) replwire.State {
	return replwire.State{Logs: r.LogSegments(), Levels: replwire.Shapes(r.Levels()), RP: regionRP(r)}
}

// checkState compares a backup region with its primary's state. It
// accepts what the primary can repair by catching the backup up (sealed
// segments adopted only in part, or missing after the last one the backup
// holds: its buffer was lost while the primary went on) and refuses what
// it cannot: levels of another shape, another recovery point, segments
// the primary no longer has, a segment missing before one the backup
// holds.
//
// Identity, not only shape: a backup missed a contiguous run of the
// primary's commands (a stream broke). If the run holds an L0 compaction
// that moved the recovery point, the recovery points differ, even when
// every level kept its shape (updates only, a delete balanced by an
// insert). If it holds none, the shallowest level its compactions read
// from is empty on the primary and not on the backup (nothing refills it
// but a compaction from the level above it, which the run does not
// hold): the shapes differ. The recovery points are compared when either
// side has a level (a seed carries the recovery point only with a level).
func checkState(r *engine.Backup, segSize int64, st replwire.State) error {
	_, err := catchUp(st.Logs, backupLogs(r))
	if err != nil {
		return err
	}
	levels := r.Levels()
	for len(levels) > 0 && levels[len(levels)-1].Root == 0 {
		levels = levels[:len(levels)-1]
	}
	want := st.Levels
	for len(want) > 0 && want[len(want)-1].Root == 0 {
		want = want[:len(want)-1]
	}
	if len(levels) != len(want) {
		return fmt.Errorf("%w: %d levels, the primary has %d", ErrOutOfSync, len(levels), len(want))
	}
	if rp := regionRP(r); len(want) > 0 && rp != st.RP {
		return fmt.Errorf("%w: recovery point %d (seq %d) offset %d, the primary's %d (seq %d) offset %d",
			ErrOutOfSync, rp.Segment, rp.Seq, rp.Offset, st.RP.Segment, st.RP.Seq, st.RP.Offset)
	}
	mask := uint64(segSize - 1)
	for i, w := range want {
		g := levels[i]
		if g.Height != w.Height || g.Pairs != w.Pairs || g.KVBytes != w.KVBytes || g.Nodes != w.Nodes ||
			len(g.Segments) != w.Segments || (g.Root == 0) != (w.Root == 0) || g.Root&mask != w.Root&mask {
			return fmt.Errorf("%w: level %d differs from the primary's", ErrOutOfSync, i+1)
		}
	}
	return nil
}

// gap is a part of a sealed primary log segment a backup lacks.
type gap struct {
	Segment, Seq uint64
	From, End    int64
}

// catchUp lists what a backup (its log in primary terms, oldest first)
// lacks of the primary's sealed log segments, or ErrOutOfSync when the
// backup cannot be repaired that way.
func catchUp(primary, backup []engine.LogSegment) ([]gap, error) {
	type id struct{ seg, seq uint64 }
	have := map[id]int64{}
	for _, b := range backup {
		have[id{b.Segment, b.Seq}] = b.End
	}
	var gaps []gap
	missing := false // a sealed segment the backup lacks came before
	for _, p := range primary {
		end, ok := have[id{p.Segment, p.Seq}]
		delete(have, id{p.Segment, p.Seq})
		switch {
		case ok && missing:
			return nil, fmt.Errorf("%w: the primary's log segment %d is missing before segment %d", ErrOutOfSync, gaps[0].Segment, p.Segment)
		case p.End == 0: // the tail (or the segment prepared after it): the mirror re-sends it
			continue
		case ok && end > p.End:
			return nil, fmt.Errorf("%w: log segment %d adopted up to %d, sealed at %d", ErrOutOfSync, p.Segment, end, p.End)
		case ok && end < p.End:
			gaps = append(gaps, gap{Segment: p.Segment, Seq: p.Seq, From: end, End: p.End})
		case !ok:
			missing = true
			gaps = append(gaps, gap{Segment: p.Segment, Seq: p.Seq, From: engine.SegmentHeaderSize, End: p.End})
		}
	}
	for l := range have {
		return nil, fmt.Errorf("%w: log segment %d (seq %d) is no longer the primary's", ErrOutOfSync, l.seg, l.seq)
	}
	return gaps, nil
}

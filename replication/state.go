package replication

import (
	"encoding/binary"
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

// State is what a primary and an in-sync Send-Index backup agree on: the
// primary's live log segments (number, records' seed, sealed end; 0 for
// the tail and the segment prepared to follow it) and the shape of every
// level. A check command carries it when
// a stream starts.
type State struct {
	Logs   []engine.LogSegment // Segment is the primary's number
	Levels []engine.LevelInfo  // Segments and Root compared by shape only
}

// PrimaryState reads a primary region's state.
func PrimaryState(r *engine.Region) State {
	return State{Logs: r.LogSegments(), Levels: r.Levels()}
}

// EncodeState: u32 log count, per log u64 segment u64 seq i64 end; u32
// level count, per level u32 height u32 segment count u64 root offset
// (root modulo the segment size is not known here: the root itself) i64
// pairs i64 kv bytes i64 nodes.
func EncodeState(st State) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, uint32(len(st.Logs)))
	for _, l := range st.Logs {
		b = le.AppendUint64(b, l.Segment)
		b = le.AppendUint64(b, l.Seq)
		b = le.AppendUint64(b, uint64(l.End))
	}
	b = le.AppendUint32(b, uint32(len(st.Levels)))
	for _, l := range st.Levels {
		b = le.AppendUint32(b, uint32(l.Height))
		b = le.AppendUint32(b, uint32(len(l.Segments)))
		b = le.AppendUint64(b, l.Root)
		b = le.AppendUint64(b, uint64(l.Pairs))
		b = le.AppendUint64(b, uint64(l.KVBytes))
		b = le.AppendUint64(b, uint64(l.Nodes))
	}
	return b
}

// DecodeState parses EncodeState's bytes. Level segment lists come back
// with the right length and zero numbers.
func DecodeState(b []byte) (State, error) {
	le := binary.LittleEndian
	var st State
	bad := fmt.Errorf("%w: state of %d bytes", ErrMalformed, len(b))
	if len(b) < 4 {
		return st, bad
	}
	n := int(le.Uint32(b))
	b = b[4:]
	if n > len(b)/24 {
		return st, bad
	}
	for range n {
		st.Logs = append(st.Logs, engine.LogSegment{Segment: le.Uint64(b), Seq: le.Uint64(b[8:]), End: int64(le.Uint64(b[16:]))})
		b = b[24:]
	}
	if len(b) < 4 {
		return st, bad
	}
	n = int(le.Uint32(b))
	b = b[4:]
	if n > len(b)/40 || len(b) != 40*n {
		return st, bad
	}
	for range n {
		segs := int(le.Uint32(b[4:]))
		if segs > maxCmdSeg {
			return st, bad
		}
		st.Levels = append(st.Levels, engine.LevelInfo{Height: int(le.Uint32(b)), Segments: make([]uint64, segs), Root: le.Uint64(b[8:]),
			Pairs: int64(le.Uint64(b[16:])), KVBytes: int64(le.Uint64(b[24:])), Nodes: int64(le.Uint64(b[32:]))})
		b = b[40:]
	}
	return st, nil
}

// checkState compares a backup region with its primary's state: the same
// log segments (sealed ones adopted to their end; the tail adopted at most
// up to where the primary is, or not yet) and levels of the same shape.
func checkState(r *engine.Region, segSize int64, st State) error {
	mine := map[[2]uint64]engine.LogSegment{}
	for _, l := range r.LogSegments() {
		mine[[2]uint64{l.Primary, l.Seq}] = l
	}
	for _, p := range st.Logs {
		l, ok := mine[[2]uint64{p.Segment, p.Seq}]
		tail := p.End == 0 // the tail, or the next segment prepared for it
		switch {
		case !ok && !tail:
			return fmt.Errorf("%w: the primary's log segment %d (seq %d) was never adopted", ErrOutOfSync, p.Segment, p.Seq)
		case ok && !tail && l.End != p.End:
			return fmt.Errorf("%w: log segment %d adopted up to %d, sealed at %d", ErrOutOfSync, p.Segment, l.End, p.End)
		}
		delete(mine, [2]uint64{p.Segment, p.Seq})
	}
	for _, l := range mine {
		return fmt.Errorf("%w: log segment %d (seq %d) is no longer the primary's", ErrOutOfSync, l.Primary, l.Seq)
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
	mask := uint64(segSize - 1)
	for i, w := range want {
		g := levels[i]
		if g.Height != w.Height || g.Pairs != w.Pairs || g.KVBytes != w.KVBytes || g.Nodes != w.Nodes ||
			len(g.Segments) != len(w.Segments) || (g.Root == 0) != (w.Root == 0) || g.Root&mask != w.Root&mask {
			return fmt.Errorf("%w: level %d differs from the primary's", ErrOutOfSync, i+1)
		}
	}
	return nil
}

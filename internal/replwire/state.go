package replwire

import (
	"encoding/binary"
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

// State is what a primary and an in-sync Send-Index backup agree on: the
// primary's live log segments (number, records' seed, sealed end; 0 for
// the tail and the segment prepared to follow it), the shape of every
// level and the recovery point (which log the levels index). CmdCheck
// carries it when a stream starts, and a backup answers with its own.
type State struct {
	Logs   []engine.LogSegment // Segment is the primary's number
	Levels []Level
	RP     RecoveryPoint
}

// Level is a level's shape as a State carries it: how many index
// segments it has (not their numbers) and its root (compared modulo the
// segment size).
type Level struct {
	Height   int
	Segments int // index segments, at most maxCmdSeg
	Root     uint64
	Pairs    int64
	KVBytes  int64
	Nodes    int64
}

// Shapes returns the shapes of levels, in order.
func Shapes(levels []engine.LevelInfo) []Level {
	out := make([]Level, len(levels))
	for i, l := range levels {
		out[i] = Level{Height: l.Height, Segments: len(l.Segments), Root: l.Root, Pairs: l.Pairs, KVBytes: l.KVBytes, Nodes: l.Nodes}
	}
	return out
}

// RecoveryPoint is a region's L0 recovery point in the primary's terms:
// the log segment (number and records' seed) and the offset. The zero
// value: unknown (no log segment holds it).
type RecoveryPoint struct {
	Segment, Seq uint64
	Offset       int64
}

// Encode returns the state's bytes: u32 log count, per log u64 segment
// u64 seq i64 end; u32 level count, per level u32 height u32 segment
// count u64 root offset (root modulo the segment size is not known here:
// the root itself) i64 pairs i64 kv bytes i64 nodes; then the recovery
// point: u64 segment u64 seq i64 offset (all zero: unknown).
func (st State) Encode() []byte {
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
		b = le.AppendUint32(b, uint32(l.Segments))
		b = le.AppendUint64(b, l.Root)
		b = le.AppendUint64(b, uint64(l.Pairs))
		b = le.AppendUint64(b, uint64(l.KVBytes))
		b = le.AppendUint64(b, uint64(l.Nodes))
	}
	b = le.AppendUint64(b, st.RP.Segment)
	b = le.AppendUint64(b, st.RP.Seq)
	return le.AppendUint64(b, uint64(st.RP.Offset))
}

// DecodeState parses State.Encode's bytes. What it allocates is bounded
// by len(b): every count is checked against the bytes that follow it
// before anything is allocated (a level's segment count is a number,
// bounded by maxCmdSeg, not a list).
func DecodeState(b []byte) (State, error) {
	le := binary.LittleEndian
	var st State
	size := len(b)
	bad := func() error { return fmt.Errorf("%w: state of %d bytes", ErrMalformed, size) }
	if len(b) < 4 {
		return st, bad()
	}
	n := int(le.Uint32(b))
	b = b[4:]
	if n > len(b)/24 {
		return st, bad()
	}
	if n > 0 {
		st.Logs = make([]engine.LogSegment, 0, n)
	}
	for range n {
		st.Logs = append(st.Logs, engine.LogSegment{Segment: le.Uint64(b), Seq: le.Uint64(b[8:]), End: int64(le.Uint64(b[16:]))})
		b = b[24:]
	}
	if len(b) < 4 {
		return st, bad()
	}
	n = int(le.Uint32(b))
	b = b[4:]
	if n > len(b)/40 || len(b) != 40*n+24 {
		return st, bad()
	}
	if n > 0 {
		st.Levels = make([]Level, 0, n)
	}
	for range n {
		segs := int(le.Uint32(b[4:]))
		if segs > maxCmdSeg {
			return st, bad()
		}
		st.Levels = append(st.Levels, Level{Height: int(le.Uint32(b)), Segments: segs, Root: le.Uint64(b[8:]),
			Pairs: int64(le.Uint64(b[16:])), KVBytes: int64(le.Uint64(b[24:])), Nodes: int64(le.Uint64(b[32:]))})
		b = b[40:]
	}
	st.RP = RecoveryPoint{Segment: le.Uint64(b), Seq: le.Uint64(b[8:]), Offset: int64(le.Uint64(b[16:]))}
	if (st.RP.Segment == 0) != (st.RP.Seq == 0) || st.RP.Offset < 0 || (st.RP.Segment == 0 && st.RP.Offset != 0) {
		return st, bad()
	}
	return st, nil
}

// RebasePair maps a log segment of an old primary (its number and record
// seed) to the segment of the new primary holding the same bytes.
type RebasePair struct {
	Old, Seq, New uint64
}

// EncodeRebase encodes pairs as CmdRebase data: n x (old, seq, new) u64.
func EncodeRebase(pairs []RebasePair) []byte {
	b := make([]byte, 0, 24*len(pairs))
	for _, p := range pairs {
		b = binary.LittleEndian.AppendUint64(b, p.Old)
		b = binary.LittleEndian.AppendUint64(b, p.Seq)
		b = binary.LittleEndian.AppendUint64(b, p.New)
	}
	return b
}

// DecodeRebase decodes CmdRebase data.
func DecodeRebase(b []byte) ([]RebasePair, error) {
	if len(b)%24 != 0 {
		return nil, fmt.Errorf("%w: rebase data of %d bytes", ErrMalformed, len(b))
	}
	out := make([]RebasePair, len(b)/24)
	for i := range out {
		le := binary.LittleEndian
		out[i] = RebasePair{Old: le.Uint64(b[24*i:]), Seq: le.Uint64(b[24*i+8:]), New: le.Uint64(b[24*i+16:])}
	}
	return out, nil
}

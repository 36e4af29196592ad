package replication

import (
	"encoding/binary"
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

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

// PromotedPairs lists, for a region promoted from a backup, its log
// segments adopted from the old primary: what its backups must rebase.
func PromotedPairs(r *engine.Region) []RebasePair {
	var out []RebasePair
	for _, l := range r.LogSegments() {
		if l.Primary != 0 {
			out = append(out, RebasePair{Old: l.Primary, Seq: l.Seq, New: l.Segment})
		}
	}
	return out
}

// rebase renumbers a backup region's log map to a new primary's segments:
// adopted segments the new primary does not list are dropped first (it
// freed them, or never had them), then the rest are renumbered in one
// commit. A segment listed with another record seed is ErrOutOfSync.
func rebase(r *engine.Region, pairs []RebasePair) error {
	byOld := map[uint64]RebasePair{}
	for _, p := range pairs {
		byOld[p.Old] = p
	}
	m := map[uint64]uint64{}
	for _, l := range r.LogSegments() {
		p, ok := byOld[l.Primary]
		switch {
		case !ok:
			if err := r.DropLog(l.Primary); err != nil {
				return err
			}
		case p.Seq != l.Seq:
			return fmt.Errorf("%w: log segment %d has seed %d, the new primary's copy %d", ErrOutOfSync, l.Primary, l.Seq, p.Seq)
		default:
			m[p.Old] = p.New
		}
	}
	return r.RebaseLog(m)
}

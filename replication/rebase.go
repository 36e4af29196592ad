package replication

import (
	"fmt"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// RebasePair maps a log segment of an old primary (its number and record
// seed) to the segment of the new primary holding the same bytes.
type RebasePair = replwire.RebasePair

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
func rebase(r *engine.Backup, pairs []RebasePair) error {
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

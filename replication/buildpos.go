package replication

import "github.com/tebis-go/tebis/internal/replwire"

// Position is a point of a primary's log (replwire.Position): a
// Build-Index backup holds everything before it.
type Position = replwire.Position

// Handover is what a promoted Build-Index backup keeps of its old
// primary's log so that the other backups, which may have applied less of
// it, can be caught up: the buffer halves it replayed (in the old
// primary's terms) and the point of its own log where the replay ended.
// The new primary's first streams use it (ShipperConfig.Handover).
type Handover struct {
	Log    uint64      // the old primary's log identity
	Halves []HalfImage // oldest first
	// At is the promoted region's own log tail after the replay (Log is
	// the new primary's, set by its shipper): the old primary's records
	// above, and the promoted region's own records before At, make up
	// the region's state at At.
	At Position
}

// HalfImage is one replayed buffer half: the old primary's segment Segment
// (records sealed with Seq, at Index in its log), valid records up to End.
type HalfImage struct {
	Index, Segment, Seq uint64
	End                 int64
	Image               []byte
}

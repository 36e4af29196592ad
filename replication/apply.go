package replication

import (
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

// Applier is the backup side of the Build-Index baseline (the paper's
// comparison point): it reads the records the primary mirrored into a
// buffer image and applies them, in log order, to the backup's own region,
// which then logs, indexes and compacts them itself. Not safe for
// concurrent use.
type Applier struct {
	region *engine.Region
	seq    uint64 // the primary segment's sequence (records' checksum seed)
	off    int64  // next record's offset in the image
}

// NewApplier applies records of the primary segment with sequence seq,
// starting at offset off of its image.
func NewApplier(region *engine.Region, seq uint64, off int64) *Applier {
	return &Applier{region: region, seq: seq, off: off}
}

// Apply applies the records of image[a.off:upto). A record that does not
// verify before upto is an error (the image is corrupt, or upto is wrong):
// nothing after it is applied. The records are not made durable one by
// one (engine.Region.ApplyLogRecord): the caller commits them together
// (engine.Region.CommitApplied) before it reports them applied.
func (a *Applier) Apply(image []byte, upto int64) (int, error) {
	n := 0
	for a.off < upto {
		if _, _, _, _, ok := engine.DecodeLogRecord(image[a.off:upto], a.seq); !ok {
			return n, fmt.Errorf("replication: no valid record at offset %d of the mirrored segment (seq %d) before %d", a.off, a.seq, upto)
		}
		// ApplyLogRecord keeps the record's request identity: the
		// backup's completion table is filled as the primary's was.
		size, err := a.region.ApplyLogRecord(image[a.off:upto], a.seq)
		if err != nil {
			return n, err
		}
		a.off += int64(size)
		n++
	}
	return n, nil
}

// Next continues with the primary's next segment (sequence seq), whose
// records start at off.
func (a *Applier) Next(seq uint64, off int64) { a.seq, a.off = seq, off }

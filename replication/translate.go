package replication

import (
	"fmt"
	"math/bits"

	"github.com/tebis-go/tebis/engine"
)

// Translator rewrites the device pointers of a shipped index segment:
// leaf value pointers through the log map, child pointers through the
// index map. A pointer is segment<<shift | offset; the offset is kept. A
// Translator reads its maps and changes none of them; it is not safe for
// use concurrent with changes to them.
type Translator struct {
	shift uint
	// Log: primary log segment -> backup log segment, a copy of the
	// backup's log map (engine.Backup.LogMap, its owner) taken for the
	// command being applied.
	Log   *SegMap
	Index *SegMap // primary index segment -> backup segment (this compaction)
	// Retired (optional) maps log segments the primary freed while this
	// compaction ran: its merge may still copy (shadowed) pointers into
	// them. They translate into the backup's freed copy, as stale as the
	// primary's own pointer.
	Retired *SegMap
}

// NewTranslator returns a translator for volumes of segSize-byte segments
// (a power of two; primary and backup must agree).
func NewTranslator(segSize int64, log, index *SegMap) (*Translator, error) {
	if segSize <= 0 || segSize&(segSize-1) != 0 {
		return nil, fmt.Errorf("replication: segment size %d is not a power of two", segSize)
	}
	return &Translator{shift: uint(bits.TrailingZeros64(uint64(segSize))), Log: log, Index: index}, nil
}

// Translate maps one pointer; a pointer into an unmapped segment is
// ErrUnmapped, never a guess. A dead value pointer (segment 0: the
// primary's compaction found its segment freed) stays as it is.
func (t *Translator) Translate(p uint64, value bool) (uint64, error) {
	seg, off := p>>t.shift, p&(1<<t.shift-1)
	if value && seg == 0 {
		return p, nil
	}
	m, kind := t.Index, "index"
	if value {
		m, kind = t.Log, "log"
	}
	local, ok := m.Lookup(seg)
	if !ok && value && t.Retired != nil {
		local, ok = t.Retired.Lookup(seg)
	}
	if !ok {
		return 0, fmt.Errorf("%w: %s pointer %d:%d (primary segment %d has no mapping)", ErrUnmapped, kind, seg, off, seg)
	}
	return local<<t.shift | off, nil
}

// PointerMap is the engine callback form of Translate.
func (t *Translator) PointerMap() engine.PointerMap { return t.Translate }

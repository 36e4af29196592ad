package engine

import (
	"fmt"
)

// Installing a level built elsewhere (Send-Index): the caller allocates a
// segment per shipped segment, rewrites each with RewriteIndexSegment,
// writes it with WriteSegment, and finally installs the level, which
// replaces the region's level atomically and frees the replaced segments
// once no reader uses them.

// AllocSegment reserves a segment for WriteSegment. It stays allocated until
// a level that lists it is installed and later replaced, or FreeSegment.
func (v *Volume) AllocSegment() (seg, seq uint64, err error) {
	s, err := v.allocSegment()
	return s.seg, s.seq, err
}

// FreeSegment releases a segment from AllocSegment that was never
// installed.
func (v *Volume) FreeSegment(seg uint64) { v.alloc.release(seg) }

// WriteSegment writes an index segment image (header included, as produced
// by RewriteIndexSegment) into seg. It does not sync: installing the level
// (InstallLevel, ApplyCompaction) syncs the device before its commit, as a
// compaction syncs once for all its segments.
func (v *Volume) WriteSegment(seg uint64, data []byte) error {
	if int64(len(data)) > v.g.segSize || len(data) < segHeaderSize {
		return fmt.Errorf("%w: segment image of %d bytes", ErrBadOptions, len(data))
	}
	h, err := decodeSegHeader(data, seg)
	if err != nil {
		return err
	}
	if h.SegNo != seg || h.Seq != v.alloc.seqOf(seg) {
		return fmt.Errorf("%w: image is for segment %d seq %d, not segment %d seq %d", ErrBadOptions, h.SegNo, h.Seq, seg, v.alloc.seqOf(seg))
	}
	return v.writeSpan(data, v.g.fileOff(seg), 0, int64(len(data)), IOCompaction, true, true)
}

// InstalledLevel describes a level whose segments were written with
// WriteSegment.
type InstalledLevel struct {
	Root     uint64 // translated root pointer (0: the level becomes empty)
	Height   int
	Pairs    int64
	KVBytes  int64
	Nodes    int64
	Segments []uint64 // every segment of the level
	LogRefs  []uint64 // log segments its leaves point into
}

// InstallLevel replaces level n (>= 1) with l in one metadata commit. The
// replaced level's segments are freed once no reader uses them.
func (r *Region) InstallLevel(n int, l InstalledLevel) error {
	if n < 1 {
		return fmt.Errorf("%w: level %d", ErrBadOptions, n)
	}
	desc, err := r.levelDescOf(&l)
	if err != nil {
		return err
	}
	if err := r.v.syncData(); err != nil { // the segments WriteSegment wrote
		return err
	}
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	if r.isClosed() {
		return ErrClosed
	}
	b := r.v.meta.NewBatch()
	if desc.root == 0 {
		b.Delete(levelKey(r.desc.ID, n), nil)
	} else {
		b.Set(levelKey(r.desc.ID, n), desc.encode(), nil)
	}
	if err := r.v.commit(b); err != nil {
		return err
	}
	r.mu.Lock()
	var old []uint64
	if prev := r.cur.level(n); prev != nil {
		for _, s := range prev.segs {
			old = append(old, s.seg)
		}
	}
	r.installLocked(r.cur.with(n, desc), func() { r.v.alloc.release(old...) })
	r.mu.Unlock()
	return nil
}

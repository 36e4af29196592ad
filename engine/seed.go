package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Seeding a backup region from its primary (docs/failover.md): the backup
// is emptied (ResetBackup), adopts the primary's sealed log segments, and
// installs each of the primary's levels, read from the primary's device
// (ReadIndexSegment) and shipped as a compaction would ship them, with the
// primary's recovery point (RecoveryPoint).

// ResetBackup empties a backup region in one metadata commit: its levels
// and log segments leave the region (freed once no reader uses them) and
// its recovery point returns to the start of its (now empty) log.
func (r *Backup) ResetBackup() error {
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	if r.isClosed() {
		return ErrClosed
	}
	l := r.log
	l.logMetaMu.Lock()
	defer l.logMetaMu.Unlock()
	l.mu.Lock()
	dead := append([]*logSeg(nil), l.segs...)
	l.mu.Unlock()
	r.mu.RLock()
	ver := r.cur
	r.mu.RUnlock()
	id := r.desc.ID
	b := r.v.meta.NewBatch()
	var free []uint64
	for _, ls := range dead {
		b.Delete(logKey(id, ls.idx), nil)
		free = append(free, ls.seg)
	}
	for n := 1; n < len(ver.levels); n++ {
		if ld := ver.levels[n]; ld != nil {
			b.Delete(levelKey(id, n), nil)
			for _, s := range ld.segs {
				free = append(free, s.seg)
			}
		}
	}
	b.Set(regionKey(id, "rp"), binary.LittleEndian.AppendUint64(nil, segHeaderSize), nil)
	if err := r.v.commit(b); err != nil {
		return err
	}
	l.dropSegs(dead)
	r.mu.Lock()
	r.rp = segHeaderSize
	empty := &version{levels: []*levelDesc{nil}}
	r.installLocked(empty, func() {
		l.mu.Lock()
		for _, ls := range dead {
			delete(l.bySeg, ls.seg)
		}
		l.mu.Unlock()
		r.v.alloc.release(free...)
	})
	r.mu.Unlock()
	return nil
}

// recoverySegment returns the log segment holding the region's recovery
// point (nil: the log no longer has its index), the offset in it and the
// index.
func (r *regionCore) recoverySegment() (*logSeg, int64, uint64) {
	r.mu.RLock()
	rp := r.rp
	r.mu.RUnlock()
	idx, off := rp>>r.v.g.shift, int64(rp&(uint64(r.v.g.segSize)-1))
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ls := range l.segs {
		if ls.idx == idx {
			return ls, off, idx
		}
	}
	return nil, off, idx
}

// RecoveryPoint is a primary region's persisted L0 recovery point as a
// log segment and offset: the log before it is indexed by the levels.
func (r *Region) RecoveryPoint() (LogPoint, error) {
	ls, off, idx := r.recoverySegment()
	if ls != nil {
		return LogPoint{Segment: ls.seg, Offset: off}, nil
	}
	return LogPoint{}, fmt.Errorf("%w: region %d: recovery point in log index %d, which the log no longer has", ErrCorrupt, r.desc.ID, idx)
}

// ReadIndexSegment returns the image of seg, a segment of one of the
// region's levels, up to its last node (as the compaction that built it
// shipped it). The caller keeps the level from being replaced meanwhile
// (the region's compactions held, as when replication attaches).
func (r *Region) ReadIndexSegment(seg uint64) ([]byte, error) {
	r.mu.RLock()
	ver := r.cur
	r.mu.RUnlock()
	return r.readIndexSegment(ver, seg)
}

// readIndexSegment is ReadIndexSegment in version ver's levels.
func (r *regionCore) readIndexSegment(ver *version, seg uint64) ([]byte, error) {
	var ref segRef
	for _, ld := range ver.levels {
		if ld == nil {
			continue
		}
		for _, s := range ld.segs {
			if s.seg == seg {
				ref = s
			}
		}
	}
	if ref.seg == 0 {
		return nil, fmt.Errorf("%w: segment %d is not in a level of region %d", ErrBadOptions, seg, r.desc.ID)
	}
	g := r.v.g
	b := make([]byte, g.segSize)
	n, err := r.v.file.ReadAt(b, g.fileOff(seg))
	r.v.ctr.read[IOIndex].Add(uint64(n))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("engine: segment %d: read: %w", seg, ioErr(err))
	}
	end := segHeaderSize
	for ; end+g.nodeSize <= n; end += g.nodeSize {
		if _, err := decodeNode(b[end:end+g.nodeSize], g.ptr(seg, int64(end)), g, ref.seq); err != nil {
			break
		}
	}
	if end == segHeaderSize {
		return nil, fmt.Errorf("%w: segment %d of region %d holds no valid node", ErrCorrupt, seg, r.desc.ID)
	}
	return b[:end], nil
}

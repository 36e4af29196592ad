package engine

import (
	"errors"
	"fmt"
	"io"
)

// recoverRegion builds a live primary Region from its persisted state
// (see rebuildRegion) and starts its background work unless
// Options.HoldBackground.
func recoverRegion(v *Volume, st *regionState) (*Region, error) {
	r, err := rebuildRegion(v, st)
	if err == nil && !v.opts.HoldBackground {
		r.Resume()
	}
	return r, err
}

// recoverHandle builds a live region in its persisted role: a backup
// (rebuildBackup) or a primary (recoverRegion).
func recoverHandle(v *Volume, st *regionState) (handle, error) {
	if st.backup {
		return rebuildBackup(v, st), nil
	}
	return recoverRegion(v, st)
}

// newCore returns a core for st with empty in-memory state and a log of
// st's segments (not yet indexed by segment number).
func newCore(v *Volume, st *regionState) *regionCore {
	r := &regionCore{v: v, desc: st.desc}
	r.follower.Store(st.follower)
	r.newEmptyState()
	l := &vlog{r: r, v: v, g: v.g, segs: st.logs, bySeg: map[uint64]*logSeg{},
		syncKick: make(chan struct{}, 1), prepKick: make(chan struct{}, 1)}
	l.batch = make(chan struct{})
	r.log = l
	return r
}

// levelsVersion returns the version of st's levels, referenced once (the
// region's own reference).
func levelsVersion(st *regionState) *version {
	ver := &version{levels: []*levelDesc{nil}}
	for n, ld := range st.levels {
		ver = ver.with(n, ld)
	}
	ver.refs.Store(1)
	return ver
}

// rebuildRegion builds a primary Region from its persisted state: levels
// from metadata, L0 by replaying the log from the recovery point, and the
// log tail's in-memory image. A torn record at the end of the tail segment
// ends the replay; a bad record inside a sealed segment is corruption. The
// region's background work is not started.
func rebuildRegion(v *Volume, st *regionState) (*Region, error) {
	r := newCore(v, st)
	l := r.log
	for _, ls := range st.logs {
		l.bySeg[ls.seg] = ls
		ls.endSaved = ls.end != 0
		ls.savedGarbage = ls.garbage
	}
	l.tail = st.logs[len(st.logs)-1]
	if l.tail.end != 0 {
		return nil, fmt.Errorf("%w: segment %d: last log segment is sealed", ErrCorrupt, l.tail.seg)
	}
	r.cur = levelsVersion(st)
	r.rp = st.rp
	rpIdx, rpOff := st.rp>>v.g.shift, int64(st.rp&(uint64(v.g.segSize)-1))
	for _, ls := range st.logs {
		start, index := int64(segHeaderSize), true
		switch {
		case ls.idx < rpIdx && ls.end != 0:
			continue
		case ls.idx < rpIdx:
			index = false // wholly compacted, but its end was not saved: find it
		case ls.idx == rpIdx:
			start = rpOff
		}
		if err := r.replaySegment(ls, start, index); err != nil {
			return nil, err
		}
	}
	l.durable.Store(l.posLocked())
	if l.off >= v.g.segSize/2 {
		l.kickPrepare()
	}
	if r.memFull() {
		// No room for the checkpoint leaves L0 unfrozen: the first write
		// tries again.
		_ = r.freezeLocked()
	}
	return &Region{r}, nil
}

// replaySegment reads one log segment and, if index, puts its records from
// start into L0. An unsealed segment's end is where its records stop.
func (r *regionCore) replaySegment(ls *logSeg, start int64, index bool) error {
	v, l := r.v, r.log
	tail := ls == l.tail
	unsealed := ls.end == 0 // the tail, or switched from before its end was saved
	size := ls.end
	if unsealed {
		size = v.g.segSize
	}
	data := alignedBytes(int(v.g.segSize)) // the tail's image: a follower writes it direct
	n, err := v.file.ReadAt(data[:size], v.g.fileOff(ls.seg))
	v.ctr.read[IOLog].Add(uint64(n))
	if err != nil && !(errors.Is(err, io.EOF) && (unsealed || n == int(size))) {
		return fmt.Errorf("engine: segment %d: read log: %w", ls.seg, ioErr(err))
	}
	h, err := decodeSegHeader(data, ls.seg)
	if err != nil {
		return err
	}
	if h.Kind != segKindLog || h.Seq != ls.seq || h.Region != r.desc.ID {
		return fmt.Errorf("%w: segment %d: header (kind %d, seq %d, region %d) does not match the region's log (seq %d, region %d)",
			ErrCorrupt, ls.seg, h.Kind, h.Seq, h.Region, ls.seq, r.desc.ID)
	}
	off := start
	for off < size {
		rec, ok := decodeRecord(data[off:size], ls.recordSeq())
		if !ok {
			if unsealed {
				break
			}
			return errBadRecord(ls.seg, off, "fails its checksum during replay")
		}
		e := entry{ptr: v.g.ptr(ls.seg, off), vlen: rec.Payload, tomb: rec.Kind == recDelete}
		if !index {
			off += int64(rec.Size)
			continue
		}
		if err := r.replayRecord(rec, ls.idx<<v.g.shift|uint64(off+int64(rec.Size)), r.now()); err != nil {
			return fmt.Errorf("segment %d offset %d: %w", ls.seg, off, err)
		}
		if rec.Kind == recTable {
			off += int64(rec.Size)
			continue
		}
		if old, had := r.mem.put(append([]byte(nil), rec.Key...), e); had {
			l.addGarbage(old.ptr, old.recSize(len(rec.Key)))
		}
		off += int64(rec.Size)
	}
	if tail {
		// Erase what follows the last valid record (a torn write): a record
		// surviving beyond the gap must not verify again once new records
		// refill the gap.
		if junk := lastNonZero(data[off:size]); junk > 0 {
			clear(data[off : off+int64(junk)])
			if err := v.writeAt(data[off:off+int64(junk)], v.g.fileOff(ls.seg)+off, IOLog); err != nil {
				return err
			}
			if err := v.syncData(); err != nil {
				return err
			}
		}
		l.buf, l.off, l.flushed = data, off, off
	} else if unsealed {
		ls.end = off
	}
	return nil
}

// addGarbage charges a dead record to its log segment.
func (l *vlog) addGarbage(p ptr, size int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls := l.bySeg[l.g.seg(p)]; ls != nil {
		ls.garbage = min(ls.garbage+int64(size), l.g.segSize)
	}
}

// lastNonZero returns the length of b up to and including its last
// non-zero byte.
func lastNonZero(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] != 0 {
			return i + 1
		}
	}
	return 0
}

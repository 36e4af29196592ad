package engine

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// GCStats reports one GC pass.
type GCStats struct {
	Segments  int   // log segments scanned
	Relocated int64 // bytes of live records re-appended
	Freed     int   // log segments freed
}

// errGCBusy means a record's liveness kept changing under GC; the segment
// is left for a later pass.
var errGCBusy = errors.New("engine: gc: index changing too fast")

func (r *Region) gcLoop() {
	defer r.wg.Done()
	if r.v.opts.GCInterval < 0 {
		return
	}
	t := time.NewTicker(r.v.opts.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-r.closing:
			return
		case <-t.C:
			if _, err := r.GC(); err != nil && !errors.Is(err, ErrClosed) {
				r.v.log.Warn("value-log gc failed", zap.Uint64("region", r.desc.ID), zap.Error(err))
			}
		}
	}
}

// GC runs one value-log GC pass now: every sealed log segment wholly before
// the L0 recovery point whose garbage reaches the configured ratio has its
// live records re-appended (so they replicate like puts), and segments no
// longer needed are freed after the index stops pointing into them.
func (r *Region) GC() (GCStats, error) {
	r.gcMu.Lock()
	defer r.gcMu.Unlock()
	var st GCStats
	if r.isClosed() {
		return st, ErrClosed
	}
	for _, ls := range r.gcCandidates() {
		select {
		case <-r.closing:
			return st, ErrClosed
		default:
		}
		moved, err := r.gcSegment(ls)
		st.Segments++
		st.Relocated += moved
		if errors.Is(err, errGCBusy) {
			continue
		}
		if err != nil {
			return st, err
		}
	}
	if r.isClosed() {
		return st, ErrClosed
	}
	before := r.v.ctr.gcFreed.Load()
	r.metaMu.Lock()
	err := r.freeDeadLogLocked()
	r.metaMu.Unlock()
	st.Freed = int(r.v.ctr.gcFreed.Load() - before)
	r.v.ctr.gcRuns.Add(1)
	return st, err
}

func (r *regionCore) gcCandidates() []logSeg {
	r.mu.RLock()
	rpIdx := r.rp >> r.v.g.shift
	r.mu.RUnlock()
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []logSeg
	for _, ls := range l.segs {
		data := float64(ls.end - segHeaderSize)
		if ls.end != 0 && ls.idx < rpIdx && !r.gcDone[ls.seq] && float64(ls.garbage) >= r.v.opts.GCGarbageRatio*data {
			out = append(out, *ls)
		}
	}
	return out
}

// gcSegment relocates the live records of one sealed log segment.
func (r *regionCore) gcSegment(ls logSeg) (int64, error) {
	// Hold a version so the segment cannot be freed and reused while GC
	// reads it, and skip it if it was freed since the candidates were taken.
	ver := r.acquire()
	defer r.release(ver)
	r.log.mu.Lock()
	cur := r.log.bySeg[ls.seg]
	gone := cur == nil || cur.seq != ls.seq || cur.dropped
	r.log.mu.Unlock()
	if gone {
		return 0, nil
	}
	data := make([]byte, ls.end)
	if err := r.v.readAt(data, r.v.g.fileOff(ls.seg), IOGC); err != nil {
		return 0, err
	}
	if h, err := decodeSegHeader(data, ls.seg); err != nil {
		return 0, err
	} else if h.Seq != ls.seq {
		return 0, fmt.Errorf("%w: segment %d: sequence %d, log expects %d", ErrCorrupt, ls.seg, h.Seq, ls.seq)
	}
	var moved int64
	for off := int64(segHeaderSize); off < ls.end; {
		rec, ok := decodeRecord(data[off:], ls.recordSeq())
		if !ok {
			return moved, errBadRecord(ls.seg, off, "fails its checksum during gc")
		}
		if rec.Kind == recTable { // a checkpoint: dead once behind the recovery point
			off += int64(rec.Size)
			continue
		}
		did, err := r.relocate(rec, r.v.g.ptr(ls.seg, off))
		if err != nil {
			return moved, err
		}
		if did {
			moved += int64(rec.Size)
		}
		off += int64(rec.Size)
	}
	if err := r.log.syncTo(r.log.pos()); err != nil {
		return moved, err
	}
	r.v.ctr.gcRelocated.Add(uint64(moved))
	r.metaMu.Lock()
	r.gcDone[ls.seq] = true
	r.metaMu.Unlock()
	return moved, nil
}

// relocate re-appends rec if the index still points at p.
func (r *regionCore) relocate(rec record, p ptr) (bool, error) {
	inL0 := func() bool {
		if _, ok := r.mem.get(rec.Key); ok {
			return true
		}
		if r.imm != nil {
			_, ok := r.imm.get(rec.Key)
			return ok
		}
		return false
	}
	for try := 0; try < 100; try++ {
		ver := r.acquire()
		r.mu.RLock()
		newer := inL0()
		r.mu.RUnlock()
		live := false
		for i := 1; !newer && i < len(ver.levels); i++ {
			e, ok, err := r.v.levelGet(ver.levels[i], rec.Key, IOGC)
			if err != nil {
				r.release(ver)
				return false, err
			}
			if ok {
				live = e.ptr == p
				break
			}
		}
		if !live {
			r.release(ver)
			return false, nil
		}
		// No sync per record: gcSegment syncs once before anything is freed.
		applied, err := r.write(rec.Kind, rec.Key, rec.Value, RequestID{}, func() bool { return r.cur == ver && !inL0() }, false, false, nil)
		r.release(ver)
		if err != nil || applied {
			return applied, err
		}
	}
	return false, errGCBusy
}

// freeDeadLogLocked frees sealed log segments before the recovery point
// that no level points into, or whose live records GC relocated. Called
// with metaMu held.
func (r *regionCore) freeDeadLogLocked() error {
	r.mu.RLock()
	ver, rpIdx := r.cur, r.rp>>r.v.g.shift
	r.mu.RUnlock()
	l := r.log
	var dead []*logSeg
	l.mu.Lock()
	for _, ls := range l.segs {
		if ls.end != 0 && ls.idx < rpIdx && (r.gcDone[ls.seq] || !ver.refersToLog(ls.seg)) {
			dead = append(dead, ls)
		}
	}
	l.mu.Unlock()
	return r.freeLogSegsLocked(dead)
}

// freeLogSegsLocked deletes log segments from the region's log and frees
// them once no reader uses them. Called with metaMu held.
func (r *regionCore) freeLogSegsLocked(dead []*logSeg) error {
	l := r.log
	if len(dead) == 0 {
		return nil
	}
	b := r.v.meta.NewBatch()
	for _, ls := range dead {
		b.Delete(logKey(r.desc.ID, ls.idx), nil)
	}
	l.logMetaMu.Lock()
	err := r.v.commit(b)
	if err == nil {
		l.dropSegs(dead)
	}
	l.logMetaMu.Unlock()
	if err != nil {
		return err
	}
	segs := make([]uint64, len(dead))
	for i, ls := range dead {
		segs[i] = ls.seg
		delete(r.gcDone, ls.seq)
	}
	// Reported before the segments can be reused (installLocked may free
	// them at once): a replica must learn of the free before any later use
	// of the same segment number (a new log segment's flush), or it would
	// apply the free to the new segment.
	for _, ls := range dead {
		r.listener.LogFreed(LogFree{Region: r.desc.ID, Segment: ls.seg, Seq: ls.recordSeq()})
	}
	r.mu.Lock()
	r.installLocked(r.cur.with(0, nil), func() {
		l.mu.Lock()
		for _, s := range segs {
			delete(l.bySeg, s)
		}
		l.mu.Unlock()
		r.v.alloc.release(segs...)
	})
	r.mu.Unlock()
	r.v.ctr.gcFreed.Add(uint64(len(dead)))
	return nil
}

// dropSegs removes freed segments from the log's list (readers of older
// versions still find them through bySeg until they are released).
func (l *vlog) dropSegs(dead []*logSeg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	gone := map[*logSeg]bool{}
	for _, d := range dead {
		gone[d] = true
		d.dropped = true
	}
	kept := l.segs[:0]
	for _, s := range l.segs {
		if !gone[s] {
			kept = append(kept, s)
		}
	}
	l.segs = kept
}

// applyGarbage adds compaction-found garbage to sealed segments and returns
// copies of the descriptors to persist: those whose garbage changed (here
// or, by writes replacing keys in L0, since it was last persisted) and
// those sealed since the last batch (their end offsets). Unsealed
// segments' garbage stays in memory. Called with metaMu held.
func (l *vlog) applyGarbage(g map[uint64]int64) []*logSeg {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*logSeg
	for _, ls := range l.segs {
		n, charged := g[ls.seg]
		ls.garbage = min(ls.garbage+n, l.g.segSize)
		if ls.end != 0 && (charged || !ls.endSaved || ls.garbage != ls.savedGarbage) {
			c := *ls
			out = append(out, &c)
		}
	}
	return out
}

// markEndsSaved records that the listed descriptors (copies) are
// persisted: their ends and their garbage.
func (l *vlog) markEndsSaved(saved []*logSeg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range saved {
		if s := l.bySeg[c.seg]; s != nil && s.seq == c.seq {
			s.endSaved = true
			s.savedGarbage = c.garbage
		}
	}
}

// flushInfo describes the log flushed up to pos.
func (l *vlog) flushInfo(pos uint64) LogFlush {
	l.mu.Lock()
	defer l.mu.Unlock()
	idx := pos >> l.g.shift
	f := LogFlush{Region: l.r.desc.ID, End: int64(pos & (uint64(l.g.segSize) - 1))}
	for _, s := range l.segs {
		if s.idx == idx {
			f.Segment, f.Seq = s.seg, s.recordSeq()
		}
	}
	return f
}

// liveSegs returns the segments currently in the log up to log position
// upTo (a compaction's view of which value pointers may still be read).
// Not the segments past it (the tail past the recovery point, the prepared
// next one): no level entry points there but a stale one into a freed
// segment whose number they reuse, which no replica can translate (it has
// not adopted them yet).
func (l *vlog) liveSegs(upTo uint64) map[uint64]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[uint64]bool, len(l.segs))
	for _, s := range l.segs {
		if s.idx <= upTo>>l.g.shift {
			m[s.seg] = true
		}
	}
	return m
}

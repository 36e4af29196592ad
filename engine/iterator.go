package engine

import (
	"fmt"
)

// Iterator walks a region's keys in order over L0 and every level. It sees
// a consistent snapshot of the index taken when Scan was called; values are
// read lazily. It is not safe for concurrent use; Close releases the
// snapshot.
type Iterator struct {
	r       *regionCore
	ver     *version
	m       *mergeIter
	started bool
	key     []byte
	val     []byte
	err     error
	closed  bool
}

// Scan returns an iterator over keys in [start, end) (nil bounds are open,
// and are clipped to the region's range). On a Backup it sees what the
// installed levels index, as Get.
func (r *regionCore) Scan(start, end []byte) *Iterator { return r.scan(start, end, true) }

// ScanUnreplicated is Scan without the wait for L0 records to be
// replicated: it also yields writes not (or not yet) acknowledged. It is
// for copying the region to a new backup (a seed) while its writes are
// held and no stream is attached; never for answering clients.
func (r *Region) ScanUnreplicated(start, end []byte) *Iterator { return r.scan(start, end, false) }

func (r *regionCore) scan(start, end []byte, wait bool) *Iterator {
	if start == nil || (r.desc.Start != nil && string(start) < string(r.desc.Start)) {
		start = r.desc.Start
	}
	if r.desc.End != nil && (end == nil || string(end) > string(r.desc.End)) {
		end = r.desc.End
	}
	it := &Iterator{r: r}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		it.err, it.closed = ErrClosed, true
		return it
	}
	mem := r.mem.t.Clone() // Clone marks the tree copy-on-write: needs the write lock
	imm := r.imm
	l0 := r.mem.len() > 0 || imm != nil
	it.ver = r.cur
	it.ver.refs.Add(1)
	r.mu.Unlock()
	if l0 && wait {
		// Every L0 record precedes the log's current end (appends hold r.mu).
		if err := r.waitCommitted(r.log.pos()); err != nil {
			r.release(it.ver)
			it.ver, it.err, it.closed = nil, err, true
			return it
		}
	}
	srcs := []source{newMemIter(mem, start, end)}
	if imm != nil {
		srcs = append(srcs, newMemIter(imm.t, start, end))
	}
	for i := 1; i < len(it.ver.levels); i++ {
		srcs = append(srcs, newLevelIter(r.v, it.ver.levels[i], start, end, IOIndex))
	}
	it.m = newMergeIter(srcs, nil)
	return it
}

// Next advances to the next live key; false at the end or on error.
func (it *Iterator) Next() bool {
	if it.closed || it.err != nil {
		return false
	}
	for {
		if it.started {
			it.m.next()
		}
		it.started = true
		if !it.m.valid() {
			if err := it.m.error(); err != nil {
				it.err = fmt.Errorf("engine: region %d scan: %w", it.r.desc.ID, err)
			}
			return false
		}
		e := it.m.entry()
		if e.tomb {
			continue
		}
		it.key = it.m.key()
		rec, err := it.r.log.read(e.ptr, it.key, e.vlen, IOIndex)
		if err != nil {
			it.err = err
			return false
		}
		it.val = rec.Value
		return true
	}
}

// Key returns the current key; valid until Next.
func (it *Iterator) Key() []byte { return it.key }

// Value returns the current value; valid until Next.
func (it *Iterator) Value() []byte { return it.val }

// Err returns the error that stopped the iteration, if any.
func (it *Iterator) Err() error { return it.err }

// Close releases the snapshot.
func (it *Iterator) Close() error {
	if it.closed {
		return it.errOrNil()
	}
	it.closed = true
	if it.ver != nil {
		it.r.release(it.ver)
	}
	return it.errOrNil()
}

func (it *Iterator) errOrNil() error {
	if it.err == ErrClosed {
		return nil
	}
	return it.err
}

// Compact freezes L0 (if it holds anything) and waits until the region has
// no compaction left to do.
func (r *Region) Compact() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	for r.mem.len() > 0 {
		for r.imm != nil && r.bgErr == nil && r.spaceErr == nil && !r.closed && !r.l0HeldLocked() {
			r.signal()
			r.memCond.Wait()
		}
		if r.imm != nil || r.bgErr != nil || r.closed || r.mem.len() == 0 {
			break
		}
		// The freeze's checkpoint may seal the tail (SealGate).
		if g := r.listener.sealGate(); g != nil && !g.SealReady() {
			r.waitSeal(g)
			continue
		}
		if err := r.freezeLocked(); err != nil {
			r.mu.Unlock()
			return err
		}
		break
	}
	r.mu.Unlock()
	return r.WaitIdle()
}

// WaitIdle waits until no compaction is running or needed. An L0 held
// back for replication (l0HeldLocked) counts as no compaction needed. A
// needed compaction that found no space returns its error (ErrNoSpace).
func (r *Region) WaitIdle() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		switch {
		case r.bgErr != nil:
			return r.bgErr
		case r.closed:
			return ErrClosed
		case r.idleLocked():
			return nil
		case r.spaceErr != nil:
			return r.spaceErr // a needed compaction waits for space
		}
		r.signal()
		r.memCond.Wait() // broadcast at the end of every compaction attempt
	}
}

func (r *regionCore) idleLocked() bool {
	if (r.imm != nil && !r.l0HeldLocked()) || r.compacting {
		return false
	}
	for i := 1; i < len(r.cur.levels); i++ {
		if l := r.cur.levels[i]; l != nil && l.pairs > r.capacity(i) {
			return false
		}
	}
	return true
}

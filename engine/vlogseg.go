package engine

import (
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// Segment switches. Next log segments are prepared ahead of need (once the
// tail is half full, or at a switch): allocated, their headers written and
// synced, and recorded in the metadata as the log's next indexes. Up to
// Options.LogPrepareAhead are kept prepared; once at most one is left, the
// preparer prepares the rest in one batch (one fdatasync of the headers,
// one metadata commit). A switch then costs one fdatasync of the old
// tail's rest; the preparer's next batch records the old segment's end
// offset. Until that commit lands, recovery reads an unsealed non-last
// segment like a tail (up to its first record that does not verify): a
// prepared segment that no record reached is then an empty one, freed like
// any segment behind the recovery point.

// kickPrepare wakes the preparer. Called with mu held.
func (l *vlog) kickPrepare() {
	select {
	case l.prepKick <- struct{}{}:
	default:
	}
}

// preparer prepares next segments in the background until stop closes.
func (l *vlog) preparer(stop <-chan struct{}, done func()) {
	defer done()
	for {
		select {
		case <-stop:
			return
		case <-l.prepKick:
		}
		if err := l.prepare(l.v.opts.LogPrepareAhead); err != nil {
			l.v.log.Warn("preparing next log segment failed", zap.Uint64("region", l.r.desc.ID), zap.Error(err))
		}
	}
}

// prepareLow reports whether the preparer should prepare more: at most
// one prepared segment left (none, with LogPrepareAhead 1). Called with mu
// held.
func (l *vlog) prepareLow() bool {
	return len(l.next) < min(2, l.v.opts.LogPrepareAhead)
}

// prepare prepares next segments, up to upTo (at most LogPrepareAhead), if
// prepareLow: the preparer refills to LogPrepareAhead, a writer that found
// none prepared prepares only the one it needs (and kicks the preparer). The
// tail cannot switch past the prepared segments while it runs (a switch
// needs one), and only prepare adds to them (prepMu), so the next index is
// stable. A segment the log needs (none is prepared) is allocated like any;
// the others only while the volume has room to spare (allocSpare), so that
// segments prepared ahead never make a volume run out of space.
func (l *vlog) prepare(upTo int) error {
	l.prepMu.Lock()
	defer l.prepMu.Unlock()
	l.mu.Lock()
	if !l.prepareLow() || l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return err
	}
	idx := l.tail.idx + 1
	if n := len(l.next); n > 0 {
		idx = l.next[n-1].idx + 1
	}
	want, needed := min(upTo, l.v.opts.LogPrepareAhead)-len(l.next), len(l.next) == 0
	l.mu.Unlock()
	l.logMetaMu.Lock()
	defer l.logMetaMu.Unlock()
	var batch []*logSeg
	release := func() {
		for _, ls := range batch {
			l.v.alloc.release(ls.seg)
		}
	}
	for i := range want {
		var s segRef
		if i == 0 && needed {
			var err error
			if s, err = l.v.allocSegment(); err != nil {
				return err
			}
		} else {
			var ok bool
			if s, ok = l.v.allocSpare(); !ok {
				break
			}
		}
		ls := &logSeg{idx: idx + uint64(i), seg: s.seg, seq: s.seq}
		batch = append(batch, ls)
		if err := l.v.putLogHeader(l.r.desc.ID, ls, l.r.follower.Load()); err != nil {
			release()
			return err
		}
	}
	if len(batch) == 0 {
		return nil // one is prepared, and the volume has no room to spare
	}
	if err := l.v.syncData(); err != nil {
		release()
		return err
	}
	b := l.v.meta.NewBatch()
	for _, ls := range batch {
		b.Set(logKey(l.r.desc.ID, ls.idx), ls.encode(), nil)
	}
	saved := l.unsavedEnds(b)
	if err := l.v.commit(b); err != nil {
		// The batch may have landed: its segments are not reused in this
		// process.
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.fail(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range saved {
		s.endSaved = true
	}
	for _, ls := range batch {
		l.segs = append(l.segs, ls)
		l.bySeg[ls.seg] = ls
		l.next = append(l.next, ls)
	}
	return nil
}

// unsavedEnds adds the sealed segments whose end is not yet persisted to b
// and returns them. Called with logMetaMu held (so none is being freed).
func (l *vlog) unsavedEnds(b *pebble.Batch) []*logSeg {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*logSeg
	for _, s := range l.segs {
		if s.end != 0 && !s.endSaved && !s.dropped {
			b.Set(logKey(l.r.desc.ID, s.idx), s.encode(), nil)
			out = append(out, s)
		}
	}
	return out
}

// dropPrepared deletes the prepared segments from the log (their entries,
// in one metadata commit) and frees them. Called at close, with the
// background work stopped and the log synced: a reopened log then
// continues in its tail, and no prepared segment is left over as an empty
// one (a crash leaves them: recovery reads them as empty segments, freed
// once the recovery point passes them). None was ever the tail, so no
// replica knows of them.
func (l *vlog) dropPrepared() error {
	l.prepMu.Lock()
	defer l.prepMu.Unlock()
	l.logMetaMu.Lock()
	defer l.logMetaMu.Unlock()
	l.mu.Lock()
	drop := l.next
	l.next = nil
	if len(drop) > 0 {
		l.segs = slices.DeleteFunc(l.segs, func(s *logSeg) bool { return slices.Contains(drop, s) })
		for _, ls := range drop {
			delete(l.bySeg, ls.seg)
		}
	}
	l.mu.Unlock()
	if len(drop) == 0 {
		return nil
	}
	b := l.v.meta.NewBatch()
	segs := make([]uint64, len(drop))
	for i, ls := range drop {
		b.Delete(logKey(l.r.desc.ID, ls.idx), nil)
		segs[i] = ls.seg
	}
	if err := l.v.commit(b); err != nil {
		return err // still named in the metadata: not reused
	}
	l.v.alloc.release(segs...)
	return nil
}

// saveEnds persists the end offsets of sealed segments (at close).
func (l *vlog) saveEnds() error {
	l.logMetaMu.Lock()
	defer l.logMetaMu.Unlock()
	b := l.v.meta.NewBatch()
	saved := l.unsavedEnds(b)
	if len(saved) == 0 {
		b.Close()
		return nil
	}
	if err := l.v.commit(b); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range saved {
		s.endSaved = true
	}
	return nil
}

// switchLocked seals the tail and continues in the first prepared segment.
// Called with syncMu and mu held and a segment prepared.
//
// With a listener, it writes and fdatasyncs the old tail's rest before it
// returns (LogSealed fires after that, under the locks). Without one, the
// write and the fdatasync run on a sealer goroutine while appends continue
// in the new tail: switchLocked then returns handed = true and the caller
// must not unlock syncMu, which the sealer unlocks once the old tail is
// durable. Every other write of the log to the device (a flush, the next
// switch) takes syncMu first, so no later record reaches the device before
// the old tail is durable: the recovered log stays a prefix of the written
// log, and a segment the log has left is still fully synced before anything
// after it is written. The old segment's end is set in memory (and so may be
// persisted) only once it is durable.
func (l *vlog) switchLocked() (handed bool, err error) {
	listened := l.r.listener.get() != nil
	if listened {
		if err := l.flushLocked(); err != nil {
			return false, err
		}
	}
	old := l.tail
	ls := l.next[0]
	l.next = slices.Delete(l.next, 0, 1)
	if listened {
		old.end = l.off
		l.tail, l.off, l.flushed = ls, segHeaderSize, segHeaderSize
		l.buf = l.tailBuf()
		l.durable.Store(l.posLocked())
		l.wakeLocked()
		l.kickPrepare()
		l.v.ctr.logSeals.Add(1)
		l.r.listener.LogSealed(LogSeal{Region: l.r.desc.ID, Segment: old.seg, Seq: old.seq, Index: old.idx, End: old.end, Next: ls.seg, NextSeq: ls.seq})
		return false, nil
	}
	job := &pendingSeal{ls: old, buf: l.buf, from: l.flushed, to: l.off, done: make(chan struct{})}
	l.sealing = job
	l.tail, l.off, l.flushed = ls, segHeaderSize, segHeaderSize
	l.buf = l.tailBuf()
	start := l.posLocked()
	l.kickPrepare()
	l.v.ctr.logSeals.Add(1)
	l.sealers.Add(1)
	go labeled("log-write", func() { l.seal(job, start) })
	return true, nil
}

// pendingSeal is a left tail being written and synced by a sealer: buf is
// its image (not written to after the switch), [from, to) the part not yet
// on the device.
type pendingSeal struct {
	ls       *logSeg
	buf      []byte
	from, to int64
	done     chan struct{} // closed once the seal is over (sealed or failed)
}

// seal writes and fdatasyncs a left tail, then marks it sealed, moves
// durable to start (the new tail's first position) and unlocks syncMu,
// which the switch handed to it. A failure poisons the log.
func (l *vlog) seal(j *pendingSeal, start uint64) {
	defer close(j.done)
	defer l.sealers.Done()
	defer l.syncMu.Unlock()
	var err error
	if j.from < j.to {
		err = l.write(j.buf, j.ls.seg, j.from, j.to)
	}
	if err == nil {
		err = l.v.syncData()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		_ = l.fail(err) // sealing stays: reads of its records keep the image
		return
	}
	l.sealing = nil
	j.ls.end = j.to
	if l.durable.Load() < start {
		l.durable.Store(start)
	}
	l.spare = j.buf
	l.wakeLocked()
}

// tailBuf returns a segment-sized image for a new tail: the spare left by
// the last seal (its header area cleared, so the image reads as a fresh
// one's; bytes past the offset are never written or read) or a new one.
// Called with mu held.
func (l *vlog) tailBuf() []byte {
	if b := l.spare; b != nil {
		l.spare = nil
		clear(b[:segHeaderSize])
		return b
	}
	return alignedBytes(int(l.g.segSize)) // aligned: a follower writes it direct
}

// lockSettled locks syncMu and mu: no seal is in progress while both are
// held (a sealer holds syncMu until its segment is sealed), so every
// segment but the tail has its end set. Not to be called with mu held.
func (l *vlog) lockSettled() {
	l.syncMu.Lock()
	l.mu.Lock()
}

func (l *vlog) unlockSettled() {
	l.mu.Unlock()
	l.syncMu.Unlock()
}

// waitSealed returns once the background seal in progress at the call,
// if any, is over (sealed or failed). It does not wait for syncMu's other
// holders (a group commit, a switch calling its listener).
func (l *vlog) waitSealed() {
	l.mu.Lock()
	j := l.sealing
	l.mu.Unlock()
	if j != nil {
		<-j.done
	}
}

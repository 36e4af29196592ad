package engine

import (
	"github.com/cockroachdb/pebble/v2"
	"go.uber.org/zap"
)

// Segment switches. The next log segment is prepared ahead of need (once
// the tail is half full): allocated, its header written and synced, and
// recorded in the metadata as the log's next index. A switch then costs one
// fdatasync of the old tail's rest; the switch wakes the preparer, whose
// batch records the following segment and the old segment's end offset.
// Until that commit lands, recovery reads an unsealed non-last segment like
// a tail (up to its first record that does not verify).

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
		if err := l.prepare(); err != nil {
			l.v.log.Warn("preparing next log segment failed", zap.Uint64("region", l.r.desc.ID), zap.Error(err))
		}
	}
}

// prepare makes l.next ready unless it already is. The tail cannot switch
// while it runs (a switch needs l.next), so the next index is stable.
func (l *vlog) prepare() error {
	l.prepMu.Lock()
	defer l.prepMu.Unlock()
	l.mu.Lock()
	if l.next != nil || l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return err
	}
	idx := l.tail.idx + 1
	l.mu.Unlock()
	l.logMetaMu.Lock()
	defer l.logMetaMu.Unlock()
	s, err := l.v.allocSegment()
	if err != nil {
		return err
	}
	ls := &logSeg{idx: idx, seg: s.seg, seq: s.seq}
	if err := l.v.writeLogHeader(l.r.desc.ID, ls); err != nil {
		l.v.alloc.release(s.seg)
		return err
	}
	b := l.v.meta.NewBatch()
	b.Set(logKey(l.r.desc.ID, ls.idx), ls.encode(), nil)
	saved := l.unsavedEnds(b)
	if err := l.v.commit(b); err != nil {
		// The batch may have landed: s.seg is not reused in this process.
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.fail(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range saved {
		s.endSaved = true
	}
	l.segs = append(l.segs, ls)
	l.bySeg[ls.seg] = ls
	l.next = ls
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

// switchLocked seals the tail and continues in the prepared segment. Called
// with syncMu and mu held and l.next ready.
func (l *vlog) switchLocked() error {
	if err := l.flushLocked(); err != nil {
		return err
	}
	old := l.tail
	old.end = l.off
	ls := l.next
	l.next = nil
	l.tail, l.off, l.flushed = ls, segHeaderSize, segHeaderSize
	l.buf = make([]byte, l.g.segSize)
	l.durable.Store(l.posLocked())
	l.wakeLocked()
	l.kickPrepare()
	l.v.ctr.logSeals.Add(1)
	l.r.listener.LogSealed(LogSeal{Region: l.r.desc.ID, Segment: old.seg, Seq: old.seq, Index: old.idx, End: old.end, Next: ls.seg, NextSeq: ls.seq})
	return nil
}

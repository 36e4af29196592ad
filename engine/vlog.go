package engine

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// vlog is one region's value log, which is also its write-ahead log. Records
// are appended to an in-memory image of the tail segment and written to the
// device by sync (group commit) or when the segment fills. A log position
// (pos) is idx<<shift | offset: it grows monotonically.
//
// Lock order: prepMu, logMetaMu, syncMu, mu.
type vlog struct {
	r *regionCore
	v *Volume
	g geometry

	prepMu    sync.Mutex // held while preparing the next segment
	logMetaMu sync.Mutex // orders log-entry saves against log-entry deletes
	syncMu    sync.Mutex // held by the one goroutine writing+syncing the tail
	mu        sync.Mutex // tail state and segment list
	segs      []*logSeg  // by idx, ascending; the tail, then the prepared segments (next)
	bySeg     map[uint64]*logSeg
	tail      *logSeg
	buf       []byte // image of the tail segment
	off       int64  // next append offset in the tail
	flushed   int64  // tail bytes already written to the device
	durable   atomic.Uint64
	failed    error // sticky: a failed write or sync poisons the log

	batch     chan struct{} // closed when the next flush (or a failure) completes
	waiters   int           // writers registered on batch (an estimate)
	lastBatch int           // waiters the previous flush covered
	syncKick  chan struct{} // wakes the flusher
	flusherUp bool          // a flusher goroutine serves syncTo

	next     []*logSeg     // prepared next segments by idx: headers synced, in metadata
	prepKick chan struct{} // wakes the preparer

	sealing *pendingSeal   // the left tail a sealer is writing, if any (it holds syncMu)
	spare   []byte         // a sealed tail's image, for the next tail to reuse
	sealers sync.WaitGroup // running sealer goroutines
}

func (l *vlog) pos() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.posLocked()
}

// LogTail describes a region's log tail: the segment appends go to, and a
// copy of its bytes so far (header area included).
type LogTail struct {
	Segment, Seq, Index uint64
	Offset              int64
	Image               []byte
}

// LogTail returns the region's log tail. A replication stream attached
// before writes start seeds its backups' buffers with it.
func (r *Region) LogTail() (LogTail, error) {
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	return LogTail{Segment: l.tail.seg, Seq: l.tail.seq, Index: l.tail.idx, Offset: l.off, Image: append([]byte(nil), l.buf[:l.off]...)}, nil
}

func (l *vlog) posLocked() uint64 { return l.tail.idx<<l.g.shift | uint64(l.off) }

// append adds one record (with request identity id, zero for none) and
// returns its device pointer and the log position after it. try: the
// writer must not wait (the caller ruled out a segment switch): a record
// listener's LogAppended runs held (AppendHolder), or append fails with
// errDeclined having appended nothing.
func (l *vlog) append(kind uint8, key, value []byte, id RequestID, try bool) (ptr, uint64, error) {
	n := int64(recordSize(len(key), payloadLen(id, value)))
	l.mu.Lock()
	// A record never ends exactly at the segment's end: the offset after it
	// must stay below the segment size for log positions to be unambiguous.
	for l.failed == nil && l.off+n >= l.g.segSize {
		// Switching segments needs a prepared next segment and syncs:
		// take prepMu and syncMu first (lock order).
		need := len(l.next) == 0
		l.mu.Unlock()
		var err error
		if need {
			err = l.prepare(1)
		}
		l.syncMu.Lock()
		l.mu.Lock()
		handed := false
		if err == nil && l.failed == nil && l.off+n >= l.g.segSize && len(l.next) > 0 {
			handed, err = l.switchLocked()
		}
		if !handed {
			l.syncMu.Unlock()
		}
		if err != nil {
			l.mu.Unlock()
			return 0, 0, err
		}
	}
	if l.failed != nil {
		err := l.failed
		l.mu.Unlock()
		return 0, 0, err
	}
	box := l.r.listener.p.Load() // one listener for the hold and the event
	var hold AppendHolder
	if try && box != nil && box.records {
		if hold, _ = box.l.(AppendHolder); hold == nil || !hold.TryHoldAppend() {
			l.mu.Unlock()
			return 0, 0, errDeclined
		}
	}
	off := l.off
	encodeRecord(l.buf[off:off+n], l.tail.seq, kind, id, key, value)
	l.off += n
	if l.prepareLow() && off < l.g.segSize/2 && l.off >= l.g.segSize/2 {
		l.kickPrepare()
	}
	p, end := l.g.ptr(l.tail.seg, off), l.posLocked()
	if box != nil {
		// Under mu, so listeners see records in log order.
		ev := LogAppend{Region: l.r.desc.ID, Ptr: p, Segment: l.tail.seg, Seq: l.tail.seq, Offset: off, End: end, Held: hold != nil}
		if box.records {
			ev.Record = l.buf[off : off+n]
		}
		box.l.LogAppended(ev)
	}
	if hold != nil {
		hold.ReleaseAppend()
	}
	l.mu.Unlock()
	return p, end, nil
}

// write writes img[from:to] of log segment seg, whose image img is (the
// bytes before from are on the device already): past the page cache if
// the region is a follower (Options.BufferedReplicaWrites).
func (l *vlog) write(img []byte, seg uint64, from, to int64) error {
	return l.v.writeSpan(img, l.g.fileOff(seg), from, to, IOLog, l.r.follower.Load(), true)
}

// flushLocked writes the unwritten part of the tail and syncs the device.
func (l *vlog) flushLocked() error {
	if l.flushed < l.off {
		if err := l.write(l.buf, l.tail.seg, l.flushed, l.off); err != nil {
			return l.fail(err)
		}
	}
	if err := l.v.syncData(); err != nil {
		return l.fail(err)
	}
	l.flushed = l.off
	l.durable.Store(l.posLocked())
	l.wakeLocked()
	return nil
}

// fail poisons the log. Called with mu held.
func (l *vlog) fail(err error) error {
	if l.failed == nil {
		if errors.Is(err, ErrVolumeFailed) || errors.Is(err, ErrMetadataFailed) {
			l.failed = fmt.Errorf("engine: region %d log: %w", l.r.desc.ID, err)
		} else {
			l.failed = fmt.Errorf("%w: region %d log: %w", ErrVolumeFailed, l.r.desc.ID, err)
		}
	}
	l.wakeLocked()
	return l.failed
}

// syncTo makes the log durable at least up to pos. It hands the work to
// the log's flusher goroutine and waits: while the flusher writes and
// fdatasyncs one batch, later appends gather into the next (group commit).
// Each waiter sleeps on its batch's channel, so a flush wakes exactly the
// writers it covered.
func (l *vlog) syncTo(pos uint64) error {
	for {
		if l.durable.Load() >= pos {
			return nil
		}
		l.mu.Lock()
		switch {
		case l.failed != nil:
			err := l.failed
			l.mu.Unlock()
			return err
		case l.durable.Load() >= pos:
			l.mu.Unlock()
			return nil
		case !l.flusherUp:
			// No flusher (closing or recovering): flush inline.
			l.mu.Unlock()
			if err := l.flushTo(pos, false); err != nil {
				return err
			}
			continue
		}
		ch := l.batch
		l.waiters++
		select {
		case l.syncKick <- struct{}{}:
		default:
		}
		l.mu.Unlock()
		<-ch
	}
}

// syncHere is syncTo for a caller that waits for many writes at once
// (the region's acknowledger): it flushes on its own goroutine instead
// of handing the flush to the flusher and sleeping until it ends, which
// saves two wake-ups per group commit. Writers waiting on the flusher
// share its flushes as they share the flusher's.
func (l *vlog) syncHere(pos uint64) error {
	for l.durable.Load() < pos {
		l.mu.Lock()
		err := l.failed
		l.mu.Unlock()
		if err != nil {
			return err
		}
		if err := l.flushTo(pos, true); err != nil {
			return err
		}
	}
	return nil
}

// wakeLocked wakes every waiter (durable moved, the log failed, or the
// flusher stopped); they recheck. Called with mu held.
func (l *vlog) wakeLocked() {
	close(l.batch)
	l.batch = make(chan struct{})
}

// gatherWindow bounds how long the flusher waits for a batch to fill.
const gatherWindow = 100 * time.Microsecond

// flusher runs flushTo whenever a writer waits, until stop closes.
//
// Before each flush it gathers: the writers the previous flush woke are
// likely to come back with their next record within microseconds, so it
// waits (at most gatherWindow) until as many writers wait as the previous
// batch had. A lone writer never waits; many writers share larger batches,
// so fewer fdatasyncs carry the same load.
func (l *vlog) flusher(stop <-chan struct{}, done func()) {
	defer done()
	for {
		select {
		case <-stop:
			l.stopFlusher()
			return
		case <-l.syncKick:
		}
		if !l.gather(stop) {
			l.stopFlusher()
			return
		}
		// An error sets failed and wakes the waiters; keep serving kicks
		// so later ones get the error promptly.
		_ = l.flushTo(0, false)
	}
}

// gather waits for the batch to reach the previous batch's size, for at
// most gatherWindow, yielding the processor to the writers meanwhile (Go
// timers are too coarse, about 1 ms on some machines, for a 100 us wait).
// It returns false if stop closed.
func (l *vlog) gather(stop <-chan struct{}) bool {
	deadline := time.Now().Add(gatherWindow)
	for {
		l.mu.Lock()
		// Enough, or nothing left to flush (another flush took it).
		enough := l.waiters >= l.lastBatch || l.failed != nil || l.durable.Load() >= l.posLocked()
		l.mu.Unlock()
		if enough || time.Now().After(deadline) {
			return true
		}
		select {
		case <-stop:
			return false
		case <-l.syncKick:
		default:
			runtime.Gosched()
		}
	}
}

func (l *vlog) stopFlusher() {
	l.mu.Lock()
	l.flusherUp = false
	l.wakeLocked()
	l.mu.Unlock()
}

// flushTo writes the unwritten tail bytes and fdatasyncs, then wakes the
// waiters it covered: those that registered on the batch channel it took.
// With pos > 0 it does nothing once the log is durable up to pos (a flush
// that held syncMu meanwhile covered it). here marks the acknowledger's
// flush (syncHere): the flusher's batch size (lastBatch, what it gathers
// for) counts only the writers waiting on it.
func (l *vlog) flushTo(pos uint64, here bool) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if l.failed != nil {
		l.wakeLocked()
		defer l.mu.Unlock()
		return l.failed
	}
	if pos > 0 && l.durable.Load() >= pos {
		l.mu.Unlock()
		return nil
	}
	end := l.posLocked()
	if l.durable.Load() >= end {
		// Waiters that registered after the previous flush took its batch
		// are covered already: let them recheck.
		l.wakeLocked()
		l.mu.Unlock()
		return nil
	}
	ch := l.batch
	l.batch = make(chan struct{})
	if !here {
		l.lastBatch = l.waiters
	}
	l.waiters = 0
	seg, from, to, buf := l.tail.seg, l.flushed, l.off, l.buf
	l.mu.Unlock()
	// The tail cannot be sealed while syncMu is held, so buf[from:to] is
	// stable and the write runs without blocking appenders.
	var err error
	if from < to {
		err = l.write(buf, seg, from, to)
	}
	if err == nil {
		err = l.v.syncData()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer close(ch)
	if err != nil {
		return l.fail(err)
	}
	l.flushed = max(l.flushed, to)
	l.durable.Store(end)
	return nil
}

// read returns the record at p, verifying its checksum and key.
func (l *vlog) read(p ptr, key []byte, vlen uint32, cat IOCategory) (record, error) {
	return l.readTry(p, key, vlen, cat, false, nil)
}

// errLogBusy: a read made with try found the log's lock held.
var errLogBusy = errors.New("engine: the log's lock is held")

// readTry is read; try: errLogBusy, and nothing read, if the log's lock
// is held by another goroutine. The record is read (or copied from the
// tail) into dst's storage if the record fits in its capacity, else into
// a buffer of its own; either is the caller's: its key and value alias
// nothing of the log's.
func (l *vlog) readTry(p ptr, key []byte, vlen uint32, cat IOCategory, try bool, dst []byte) (record, error) {
	n := recordSize(len(key), int(vlen))
	seg, off := l.g.seg(p), l.g.off(p)
	if !lockOrTry(&l.mu, try) {
		return record{}, errLogBusy
	}
	var buf []byte
	if n <= cap(dst) {
		buf = dst[:n]
	} else {
		buf = make([]byte, n)
	}
	var seq uint64
	if l.tail != nil && seg == l.tail.seg && off+int64(n) <= l.off {
		copy(buf, l.buf[off:])
		seq = l.tail.seq
		l.mu.Unlock()
	} else if s := l.sealing; s != nil && seg == s.ls.seg && off+int64(n) <= s.to {
		copy(buf, s.buf[off:])
		seq = s.ls.seq
		l.mu.Unlock()
	} else {
		ls := l.bySeg[seg]
		l.mu.Unlock()
		if ls == nil {
			return record{}, fmt.Errorf("%w: segment %d offset %d: pointer into a segment that is not in region %d's log", ErrCorrupt, seg, off, l.r.desc.ID)
		}
		seq = ls.recordSeq()
		if err := l.v.readAt(buf, l.g.filePtrOff(p), cat); err != nil {
			return record{}, err
		}
	}
	rec, ok := decodeRecord(buf, seq)
	if !ok {
		return record{}, errBadRecord(seg, off, "fails its checksum")
	}
	if string(rec.Key) != string(key) {
		return record{}, errBadRecord(seg, off, "holds another key")
	}
	return rec, nil
}

// writeLogHeader writes and syncs a new log segment's header (putLogHeader,
// then an fdatasync).
func (v *Volume) writeLogHeader(region uint64, ls *logSeg) error {
	if err := v.putLogHeader(region, ls, false); err != nil {
		return err
	}
	return v.syncData()
}

// putLogHeader writes a new log segment's header, not synced. In sync mode
// it first zeroes the segment's body: that turns the file system's
// unwritten (fallocated) extents into written ones once, off the commit
// path, so each group commit's fdatasync overwrites allocated blocks and
// need not journal extent conversions (about 15 % cheaper per fdatasync on
// ext4 here). In async mode the log is synced a segment at a time, so the
// zeroing would only double the log's writes. (Stale bytes of a reused
// segment never verify as records: their checksums are seeded with another
// sequence.) A follower's (direct) zeroes go past the page cache, as its
// records will.
func (v *Volume) putLogHeader(region uint64, ls *logSeg, direct bool) error {
	if v.opts.SyncMode == SyncModeSync {
		v.zeroOnce.Do(func() { v.zeros = alignedBytes(int(v.g.segSize)) })
		if err := v.writeSpan(v.zeros, v.g.fileOff(ls.seg), segHeaderSize, v.g.segSize, IOLog, direct, true); err != nil {
			return err
		}
	}
	h := make([]byte, segHeaderSize)
	segHeader{Kind: segKindLog, Region: region, PrimarySeg: ls.seg, Seq: ls.seq, SegNo: ls.seg}.encode(h)
	return v.writeAt(h, v.g.fileOff(ls.seg), IOLog)
}

// setLogEntries persists the listed log segments' descriptors.
func (l *vlog) setLogEntries(b *pebble.Batch, segs []*logSeg) {
	for _, s := range segs {
		b.Set(logKey(l.r.desc.ID, s.idx), s.encode(), nil)
	}
}

// maySeal reports whether appending a record of n bytes now would seal
// the tail (it would not fit).
func (l *vlog) maySeal(n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.off+n >= l.g.segSize
}

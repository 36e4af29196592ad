package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/rdma"
)

// ErrNoBackups: every backup of the region was dropped.
var ErrNoBackups = errors.New("replication: no live backups")

// ErrBackupDropped: a strict shipper dropped a backup; no write counts as
// replicated until the region's group is redone without it.
var ErrBackupDropped = errors.New("replication: a backup was dropped: writes wait for the region's new group")

// Backup is one backup's end of a region's log mirror: a connected QP and
// the buffer the backup exposed for the region, two segments long (the
// tail alternates between its halves, so the backup can persist one while
// the next fills).
type Backup struct {
	Name   string
	QP     rdma.QP
	Buffer rdma.RemoteMR
}

// Mirror copies one region's log tail, byte for byte and in log order,
// into every backup's buffer with one-sided WRITEs (paper §3.2): the
// backup's half-buffer is an exact image of the primary's tail segment at
// the same offsets. Appends only copy into a local staging image; Wait
// posts what is not yet posted (one WRITE per backup for everything
// appended since, so concurrent writers share WRITEs as they share a group
// commit) and returns when every live backup's WRITEs completed up to the
// asked offset: the acknowledgement a client may be given. TryHeld asks
// the same without waiting (posting only where WRITEs complete as posted),
// and TryHold with AppendHeld appends without waiting for the lock.
//
// A waiter collects the completions of the WRITEs it waits for itself (as
// an RDMA poster polls its CQ), so where WRITEs complete as they are posted
// (shm, loopback) a write's acknowledgement takes no goroutine hand-off; a
// goroutine of the mirror collects them while a waiter is parked and, now
// and then, when nobody waits.
//
// Append and Switch must be called in log order (under the log's lock);
// Wait may be called from any goroutine. A backup whose WRITE fails is
// dropped (Dropped reports it); Wait fails only when no backup is left.
type Mirror struct {
	segSize int64
	staging *rdma.MR // two halves, like the backups' buffers
	cq      *rdma.CQ

	mu       sync.Mutex
	cond     *sync.Cond
	half     int    // the tail's half of the buffers
	seg      uint64 // the tail's primary segment number
	appended int64  // bytes of the tail image written by Append
	// used is, per half, how far Append wrote into it: a half is cleared
	// that far when the tail moves back into it (a half never written is
	// still the mapping's zeros, and clearing it would only fault its
	// pages in).
	used    [2]int64
	posted  int64 // bytes posted to the backups
	backups []*mirrorBackup
	gen     uint64 // bumped at every Switch
	written uint64 // bytes posted, summed over backups
	waiters int    // goroutines in wait's or Confirm's cond.Wait
	probes  uint64 // the last Confirm probe round posted
	parks   uint64 // times a waiter parked (tests)
	pollBuf [16]rdma.Completion
	kick    chan struct{} // capacity 1: a waiter parked
	onDrop  func(name string, err error)
	closed  bool
	// postNow: every backup's QP completes a WRITE as it is posted
	// (rdma.Immediate): TryHeld may post without waiting.
	postNow bool
	tick    time.Duration      // idle completion drain and waiter wake-ups
	cancel  context.CancelFunc // stops the completion loop
	done    chan struct{}
}

type mirrorBackup struct {
	Backup
	acked   int64  // bytes of the current tail completed at this backup
	probed  uint64 // the last Confirm probe round completed at this backup
	ackGen  uint64
	err     error
	dropped bool
}

// NewMirror starts mirroring a tail in primary segment seg. The backups'
// buffers must be 2*segSize bytes, and their QPs must report to cq (which
// the mirror polls; give it a CQ of its own).
func NewMirror(segSize int64, seg uint64, cq *rdma.CQ, backups []Backup) (*Mirror, error) {
	return newMirror(segSize, seg, cq, backups, idleDrain)
}

// newMirror is NewMirror with the period of the mirror's timers (tests
// make it long to show that no completion waits for them).
func newMirror(segSize int64, seg uint64, cq *rdma.CQ, backups []Backup, tick time.Duration) (*Mirror, error) {
	staging, err := rdma.Register(int(2 * segSize))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Mirror{segSize: segSize, staging: staging, cq: cq, seg: seg, cancel: cancel, done: make(chan struct{}), kick: make(chan struct{}, 1), tick: tick}
	m.cond = sync.NewCond(&m.mu)
	for _, b := range backups {
		if b.Buffer.Len < uint64(2*segSize) {
			staging.Deregister()
			return nil, fmt.Errorf("replication: backup %s buffer of %d bytes, want %d", b.Name, b.Buffer.Len, 2*segSize)
		}
		m.backups = append(m.backups, &mirrorBackup{Backup: b})
	}
	m.postNow = true
	for _, b := range m.backups {
		im, ok := b.QP.(rdma.Immediate)
		m.postNow = m.postNow && ok && im.CompletesOnPost()
	}
	go m.completions(ctx)
	go m.ticker(m.done)
	return m, nil
}

// Pos names a position in the mirrored log: the end of a record in the
// tail of a given generation (one per Switch).
type Pos struct {
	gen uint64
	end int64
}

// Append places an encoded log record at off of the tail segment and
// returns the position to Wait for.
func (m *Mirror) Append(off int64, rec []byte) (Pos, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.appendLocked(off, rec)
}

// AppendHeld is Append by the holder of TryHold.
func (m *Mirror) AppendHeld(off int64, rec []byte) (Pos, error) {
	return m.appendLocked(off, rec)
}

func (m *Mirror) appendLocked(off int64, rec []byte) (Pos, error) {
	if off < 0 || off+int64(len(rec)) > m.segSize {
		return Pos{}, fmt.Errorf("replication: record at %d+%d outside a %d-byte segment", off, len(rec), m.segSize)
	}
	if off < m.appended || (off > m.appended && off != engine.SegmentHeaderSize) {
		// Records follow each other; only the first one of a segment may
		// skip to the end of the (unmirrored) header after a marker.
		return Pos{}, fmt.Errorf("replication: record at %d, the tail ends at %d (out of log order)", off, m.appended)
	}
	base := int64(m.half) * m.segSize
	copy(m.staging.Bytes()[base+off:], rec)
	m.appended = off + int64(len(rec))
	return Pos{gen: m.gen, end: m.appended}, nil
}

// behindLocked reports whether backup b has not completed the WRITEs up to
// pos of the current tail (a position of an older tail is complete: Switch
// waited for it).
func (m *Mirror) behindLocked(b *mirrorBackup, pos Pos) bool {
	return pos.gen == m.gen && (b.ackGen < pos.gen || (b.ackGen == pos.gen && b.acked < pos.end))
}

// TryHold takes the mirror's lock if nobody holds it (waiters hold it
// while they post and poll, which over tcp may wait for a slow backup) and
// reports whether it did; held, the caller appends with AppendHeld (at
// most once, in log order under the log's lock as every Append) and then
// lets it go with Release, for a writer that must not wait.
func (m *Mirror) TryHold() bool { return m.mu.TryLock() }

// Release lets go of what a TryHold that returned true took.
func (m *Mirror) Release() { m.mu.Unlock() }

// Tail is the position after everything appended so far.
func (m *Mirror) Tail() Pos {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Pos{gen: m.gen, end: m.appended}
}

// Switch moves the tail to primary segment seg (the other half of the
// buffers). It first waits until the old tail is complete at every live
// backup, so positions of older generations are acknowledged; a backup
// still behind when ctx expires is dropped. The tail switches in every
// case (the log has moved on); the error says why the wait ended early.
func (m *Mirror) Switch(ctx context.Context, seg uint64) error {
	err := m.Wait(ctx, m.Tail())
	if errors.Is(err, ErrNoBackups) {
		err = nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil { // cancelled (closing): nobody may count on the old tail
		for _, b := range m.backups {
			m.dropLocked(b, fmt.Errorf("replication: backup %s: tail switched before its WRITEs completed: %w", b.Name, err))
		}
	}
	m.used[m.half] = m.appended
	m.half ^= 1
	m.seg, m.appended, m.posted = seg, 0, 0
	m.gen++
	base := int64(m.half) * m.segSize
	clear(m.staging.Bytes()[base : base+m.used[m.half]])
	m.used[m.half] = 0
	return err
}

// Wait returns once every live backup holds the log up to pos. It posts
// pending bytes first. A position of an older tail is complete already
// (Switch waited for it).
func (m *Mirror) Wait(ctx context.Context, pos Pos) error {
	stop := context.AfterFunc(ctx, func() {
		m.mu.Lock()
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	defer stop()
	return m.wait(pos, ctx.Err)
}

// WaitTimeout is Wait with a timeout instead of a context, and without
// allocating: the path of every replicated write. A backup still behind
// when the timeout passes is dropped.
func (m *Mirror) WaitTimeout(pos Pos, timeout time.Duration) error {
	var deadline time.Time
	return m.wait(pos, func() error {
		// Checked only when the position is not reached yet.
		if deadline.IsZero() {
			deadline = time.Now().Add(timeout)
		} else if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		return nil
	})
}

// WaitStopped is WaitTimeout that also ends, with ctx's error, when ctx
// does (a stream closing while it waits).
func (m *Mirror) WaitStopped(ctx context.Context, pos Pos, timeout time.Duration) error {
	stop := context.AfterFunc(ctx, func() {
		m.mu.Lock()
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	defer stop()
	var deadline time.Time
	return m.wait(pos, func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(timeout)
		} else if time.Now().After(deadline) {
			return context.DeadlineExceeded
		}
		return nil
	})
}

// wait is Wait's loop; stopped says whether to give up (a deadline:
// drop the backups behind; any other error: return it).
func (m *Mirror) wait(pos Pos, stopped func() error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pos.gen > m.gen || (pos.gen == m.gen && pos.end > m.appended) {
		return fmt.Errorf("replication: waiting for position %+v past the log's tail", pos)
	}
	end, gen := pos.end, m.gen
	if pos.gen < gen {
		end = 0 // complete: only the live-backup check remains
	}
	if m.posted < end {
		m.postLocked()
	}
	behindAt := func(b *mirrorBackup) bool {
		// A later generation's ack implies this one's (in-order
		// delivery; Switch waited for it).
		return end > 0 && m.gen == gen && (b.ackGen < gen || (b.ackGen == gen && b.acked < end))
	}
	for {
		m.pollLocked()
		live, behind := 0, 0
		for _, b := range m.backups {
			if !b.dropped {
				live++
				if behindAt(b) {
					behind++
				}
			}
		}
		if live == 0 {
			return ErrNoBackups
		}
		if behind == 0 {
			return nil
		}
		switch err := stopped(); {
		case errors.Is(err, context.DeadlineExceeded):
			// A backup that has not completed a WRITE in the whole
			// timeout is as good as dead: drop it, keep the others.
			for _, b := range m.backups {
				if !b.dropped && behindAt(b) {
					m.dropLocked(b, fmt.Errorf("replication: backup %s: WRITEs not complete within the timeout", b.Name))
				}
			}
			continue
		case err != nil:
			return err
		case m.closed:
			// The stream is being closed (the region deposed or handed
			// over): the write is not known to be held; the client
			// retries at the region's next primary.
			return fmt.Errorf("replication: the mirror closed while a write waited: %w", ErrStreamClosed)
		}
		m.parks++
		m.parkLocked()
	}
}

// probeID marks the WRITE IDs of Confirm's probes (a tail WRITE's ID is
// its generation << 40 | its end: far below).
const probeID = 1 << 63

// Confirm returns nil once every backup of the mirror completed a probe
// posted after the call began: a signaled WRITE of no bytes into its
// buffer, which completes only while the buffer's key is valid, after
// the WRITEs posted before it. A backup that fenced this primary off
// (revoked the buffer: docs/failover.md) fails the probe and is dropped.
// So a read a primary finished before calling Confirm, which then
// returned nil, happened before any of these backups fenced it: before
// any of them was promoted. Confirm fails with ErrBackupDropped once any
// backup was dropped (the region's group is changing), with
// ErrStreamClosed once the mirror closed; a backup that does not complete
// the probe within timeout is dropped. A call waits for a round it posts
// itself (over shm and loopback a probe completes as it is posted).
func (m *Mirror) Confirm(timeout time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	round := m.probes + 1
	var deadline time.Time
	for {
		if m.closed {
			return fmt.Errorf("replication: the mirror closed while a read was confirmed: %w", ErrStreamClosed)
		}
		m.pollLocked()
		behind := 0
		for _, b := range m.backups {
			if b.dropped {
				return fmt.Errorf("%w: %s (%v)", ErrBackupDropped, b.Name, b.err)
			}
			if b.probed < round {
				behind++
			}
		}
		if behind == 0 {
			return nil
		}
		if m.probes < round {
			m.probes = round
			for _, b := range m.backups {
				err := b.QP.PostWrite(rdma.WriteWR{ID: probeID | round, Local: m.staging, Remote: b.Buffer, Signaled: true})
				if err != nil {
					m.dropLocked(b, fmt.Errorf("replication: backup %s: %w", b.Name, err))
				}
			}
			continue
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(timeout)
		} else if time.Now().After(deadline) {
			for _, b := range m.backups {
				if b.probed < round {
					m.dropLocked(b, fmt.Errorf("replication: backup %s: a probe not complete within the timeout", b.Name))
				}
			}
			continue
		}
		m.parkLocked()
	}
}

// parkLocked waits on the mirror's cond (mu held) with the completions
// goroutine watching the CQ meanwhile: the park of wait and Confirm.
func (m *Mirror) parkLocked() {
	m.waiters++
	select {
	case m.kick <- struct{}{}:
	default:
	}
	m.cond.Wait()
	m.waiters--
}

// ticker wakes waiters now and then, so that WaitTimeout sees its
// deadline pass, until done closes.
func (m *Mirror) ticker(done <-chan struct{}) {
	t := time.NewTicker(m.tick)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			m.mu.Lock()
			if m.waiters > 0 {
				m.cond.Broadcast()
			}
			m.mu.Unlock()
		}
	}
}

// postLocked posts [posted, appended) of the tail to every live backup,
// signaled; the completion's ID carries the generation and the end.
func (m *Mirror) postLocked() {
	from, to := m.posted, m.appended
	base := int64(m.half) * m.segSize
	for _, b := range m.backups {
		if b.dropped {
			continue
		}
		err := b.QP.PostWrite(rdma.WriteWR{
			ID: m.gen<<40 | uint64(to), Local: m.staging, LocalOff: int(base + from), Len: int(to - from),
			Remote: b.Buffer, RemoteOff: uint64(base + from), Signaled: true,
		})
		if err != nil {
			m.dropLocked(b, err)
			continue
		}
		m.written += uint64(to - from)
	}
	m.posted = to
}

func (m *Mirror) dropLocked(b *mirrorBackup, err error) {
	if !b.dropped {
		b.dropped, b.err = true, err
		m.cond.Broadcast()
		if m.onDrop != nil {
			go m.onDrop(b.Name, err)
		}
	}
}

// OnDrop makes the mirror call f (on a goroutine of its own) for every
// backup it drops.
func (m *Mirror) OnDrop(f func(name string, err error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onDrop = f
}

// Acked reports, without waiting, whether every live backup holds the log
// up to pos (and at least one is live).
func (m *Mirror) Acked(pos Pos) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pollLocked()
	live := 0
	for _, b := range m.backups {
		if b.dropped {
			continue
		}
		live++
		if m.behindLocked(b, pos) {
			return false
		}
	}
	return live > 0 && pos.gen <= m.gen
}

// TailHeld reports, without waiting, whether every live backup holds
// everything appended to the tail so far, or none is live (a Switch now
// would not wait).
func (m *Mirror) TailHeld() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pollLocked()
	for _, b := range m.backups {
		if !b.dropped && m.appended > 0 && (b.ackGen < m.gen || (b.ackGen == m.gen && b.acked < m.appended)) {
			return false
		}
	}
	return true
}

// writeProgress is one live backup's WRITEs as the hang watchdog sees
// them (hung.go).
type writeProgress struct {
	outstanding bool // WRITEs posted to it that have not all completed
	ack         Pos  // how far its completions reached
}

// progress collects the completions queued so far and reports, per live
// backup, whether WRITEs posted to it are outstanding and how far its
// completions reached (nil once the mirror is closed).
func (m *Mirror) progress() map[string]writeProgress {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.pollLocked()
	out := make(map[string]writeProgress, len(m.backups))
	for _, b := range m.backups {
		if b.dropped {
			continue
		}
		out[b.Name] = writeProgress{
			outstanding: m.posted > 0 && (b.ackGen < m.gen || b.acked < m.posted),
			ack:         Pos{gen: b.ackGen, end: b.acked},
		}
	}
	return out
}

// Census counts the live backups, and those of them whose names are not
// in skip, and reports whether any backup was dropped (one look under the
// mirror's lock: the per-write checks of a Shipper).
func (m *Mirror) Census(skip []string) (live, outside int, dropped bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.censusLocked(skip)
}

// TryCensus is Census if the mirror's lock is free now (told true), else
// it tells nothing.
func (m *Mirror) TryCensus(skip []string) (live, outside int, dropped, told bool) {
	if !m.mu.TryLock() {
		return 0, 0, false, false
	}
	defer m.mu.Unlock()
	live, outside, dropped = m.censusLocked(skip)
	return live, outside, dropped, true
}

// census is what Census reports.
type census struct {
	live, outside int
	dropped       bool
}

// TryHeld is, if the mirror's lock is free now (told true), whether every
// live backup holds pos (tail false: a position before the tail, held by
// every live backup) and the census. Where every backup's WRITEs complete
// as they are posted (rdma.Immediate) it first posts what is appended and
// not posted yet; it collects the completions, as Wait does, without
// waiting for any. Elsewhere a position not posted yet is not held.
func (m *Mirror) TryHeld(pos Pos, tail bool, skip []string) (held bool, c census, told bool) {
	if !m.mu.TryLock() {
		return false, census{}, false
	}
	defer m.mu.Unlock()
	if m.closed || (tail && (pos.gen > m.gen || (pos.gen == m.gen && pos.end > m.appended))) {
		return false, census{}, true
	}
	held = true
	if tail && pos.gen == m.gen && m.posted < pos.end {
		if m.postNow {
			m.postLocked()
		} else {
			held = false // a post may wait: Wait's
		}
	}
	m.pollLocked()
	for _, b := range m.backups {
		if !b.dropped && tail && m.behindLocked(b, pos) {
			held = false
		}
	}
	c.live, c.outside, c.dropped = m.censusLocked(skip)
	return held && c.live > 0, c, true
}

func (m *Mirror) censusLocked(skip []string) (live, outside int, dropped bool) {
	for _, b := range m.backups {
		switch {
		case b.dropped:
			dropped = true
		case slices.Contains(skip, b.Name):
			live++
		default:
			live++
			outside++
		}
	}
	return live, outside, dropped
}

// AnyDropped reports whether a backup was dropped.
func (m *Mirror) AnyDropped() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.backups {
		if b.dropped {
			return true
		}
	}
	return false
}

// IsDropped reports whether the backup was dropped.
func (m *Mirror) IsDropped(name string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.backups {
		if b.Name == name {
			return b.dropped
		}
	}
	return true
}

// completions records WRITE completions that no waiter polled, until
// Close: while a waiter is parked (asynchronous transports), and every
// idleDrain otherwise, so a broken QP is noticed with nobody writing. On
// transports that complete WRITEs as they are posted (shm), the waiter
// finds its completions itself and this goroutine is not woken per write.
func (m *Mirror) completions(ctx context.Context) {
	defer close(m.done)
	buf := make([]rdma.Completion, 64)
	t := time.NewTicker(m.tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-t.C:
		}
		for {
			// Drain the queue before waiting for a notification: the
			// one notification of a burst may have been taken already.
			n, parked := len(buf), 0
			for rounds := 0; n == len(buf) && rounds < maxPollRounds; rounds++ {
				n = m.cq.Poll(buf)
				m.mu.Lock()
				m.applyLocked(buf[:n])
				parked = m.waiters
				m.mu.Unlock()
			}
			if parked == 0 {
				break
			}
			select {
			case <-ctx.Done():
				return
			case <-m.cq.Notify():
			case <-t.C:
			}
		}
	}
}

// idleDrain is how often completions are collected with no waiter.
const idleDrain = 100 * time.Millisecond

// maxPollRounds bounds a drain of the CQ (posters keep filling it).
const maxPollRounds = 1024

// pollLocked collects the completions queued so far. After Close it
// collects nothing: the caller closes the QPs then, and their
// disconnections are no failures to report.
func (m *Mirror) pollLocked() {
	if m.closed {
		return
	}
	n := len(m.pollBuf)
	for rounds := 0; n == len(m.pollBuf) && rounds < maxPollRounds; rounds++ {
		n = m.cq.Poll(m.pollBuf[:])
		m.applyLocked(m.pollBuf[:n])
	}
}

// applyLocked records completions: acknowledged ends, and drops for
// failed WRITEs and broken QPs. It wakes the waiters.
func (m *Mirror) applyLocked(cs []rdma.Completion) {
	if len(cs) == 0 {
		return
	}
	for _, c := range cs {
		for _, b := range m.backups {
			if c.QP != b.QP {
				continue
			}
			switch {
			case c.Err != nil:
				m.dropLocked(b, fmt.Errorf("replication: backup %s: %w", b.Name, c.Err))
			case c.Op == rdma.OpWrite && c.WRID&probeID != 0:
				b.probed = max(b.probed, c.WRID&^probeID)
			case c.Op == rdma.OpWrite:
				gen, end := c.WRID>>40, int64(c.WRID&(1<<40-1))
				if gen > b.ackGen || (gen == b.ackGen && end > b.acked) {
					b.ackGen, b.acked = gen, end
				}
			}
		}
	}
	m.cond.Broadcast()
}

// Written is the number of bytes posted to backups so far (each backup's
// copy counted).
func (m *Mirror) Written() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.written
}

// Drop removes a backup from the mirror (its command channel failed):
// once Drop returns, no WRITE is posted to it (one posted before may still
// be in flight), and the mirror's waits no longer count it. The mirror
// reports the drop through OnDrop unless the backup was dropped already.
func (m *Mirror) Drop(name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.backups {
		if b.Name == name {
			m.dropLocked(b, err)
		}
	}
}

// Dropped lists the backups dropped so far with why.
func (m *Mirror) Dropped() map[string]error {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]error{}
	for _, b := range m.backups {
		if b.dropped {
			out[b.Name] = b.err
		}
	}
	return out
}

// Close stops the mirror (the QPs stay the caller's).
func (m *Mirror) Close() error {
	m.mu.Lock()
	m.closed = true
	m.cond.Broadcast()
	m.mu.Unlock()
	m.cancel()
	<-m.done
	return m.staging.Deregister()
}

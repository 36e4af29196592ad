package engine

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Region is a primary region: one key range's LSM tree on a volume, which
// takes writes, serves reads and compacts itself. It is safe for
// concurrent use; its compaction and GC goroutines stop at Volume.Close,
// or when a demotion (Volume.DemoteRegion) closes the handle. A Region
// never becomes a backup: a demotion closes it (every later call returns
// ErrClosed) and returns a new *Backup.
type Region struct{ *regionCore }

// regionCore is the state and logic both roles share: the descriptor, the
// levels and their versions, the log and its segment descriptors, reads,
// and the deferred freeing of replaced segments. Exactly one role handle
// (*Region or *Backup) wraps a core, for the core's whole life: a role
// change closes the core and builds a new one under the other type from
// the persisted state. The role-specific behaviour lives on the handle
// types; a core has no role flag. Exported methods declared on the core
// are the API both roles share.
type regionCore struct {
	v        *Volume
	desc     RegionDesc
	log      *vlog
	listener hooks
	repl     atomic.Pointer[replicatorBox]

	mu       sync.RWMutex // mem, imm, immEnd, cur, bgErr, spaceErr, compacting, heldFor
	memCond  *sync.Cond   // broadcast when L0 has room, a compaction attempt ends, bgErr is set or the region closes
	mem      *memtable
	imm      *memtable // frozen L0 being compacted into L1
	immEnd   uint64    // log position where imm ends (the next recovery point)
	immCkEnd uint64    // log position after the request-table checkpoint written at immEnd
	reqs     *reqTable // completion table (exactly-once writes; see once.go)
	now      func() time.Time
	cur      *version
	rp       uint64 // persisted L0 recovery point
	bgErr    error
	// spaceErr: the last compaction found no space (transient, unlike
	// bgErr): a write that would wait for it fails with it instead.
	spaceErr   error
	compacting bool
	// heldFor is the replicator that refused the frozen L0 (its records
	// are not replicated): the L0 compaction waits for another one
	// (l0HeldLocked).
	heldFor *replicatorBox
	closed  bool
	// follower: an ordinary region marked a Build-Index backup's copy
	// (follower.go); written under Volume.mu
	follower atomic.Bool
	held     int // Quiesce calls not yet released: client writes wait
	writers  atomic.Int64
	acks     acknowledger // waits for the writes TryPutOnce acknowledges later

	freeMu  sync.Mutex
	pending []pendingFree

	metaMu sync.Mutex      // serializes level installs and log-segment frees
	gcDone map[uint64]bool // sequences of log segments whose live records GC relocated; under metaMu
	gcMu   sync.Mutex      // one GC pass at a time

	kick    chan struct{}
	closing chan struct{}
	wg      sync.WaitGroup // compaction and GC goroutines

	flusherStop chan struct{}
	flusherDone sync.WaitGroup
	resumed     sync.Once

	// successor is the core of the region a promoted backup became: its
	// frees wait for this (closed) core's readers (see handOver).
	successor atomic.Pointer[regionCore]
}

// CreateRegion creates an empty region with its first log segment.
func (v *Volume) CreateRegion(desc RegionDesc) (*Region, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.canCreateLocked(desc); err != nil {
		return nil, err
	}
	s, err := v.allocSegment()
	if err != nil {
		return nil, err
	}
	ls := &logSeg{idx: 0, seg: s.seg, seq: s.seq}
	if err := v.writeLogHeader(desc.ID, ls); err != nil {
		v.alloc.release(s.seg)
		return nil, err
	}
	st := &regionState{desc: desc, rp: segHeaderSize, logs: []*logSeg{ls}}
	b := v.meta.NewBatch()
	st.writeAll(b)
	if err := v.commit(b); err != nil {
		return nil, err // s.seg stays allocated: the batch may have landed
	}
	r, err := recoverRegion(v, st)
	if err != nil {
		return nil, err
	}
	v.regions[desc.ID] = r
	return r, nil
}

// canCreateLocked checks that desc can become a new region. Called with
// v.mu held.
func (v *Volume) canCreateLocked(desc RegionDesc) error {
	if v.closed.Load() {
		return ErrClosed
	}
	if err := desc.validate(); err != nil {
		return err
	}
	if _, ok := v.regions[desc.ID]; ok {
		return fmt.Errorf("%w: %d", ErrRegionExists, desc.ID)
	}
	return nil
}

func (desc RegionDesc) validate() error {
	if desc.End != nil && len(desc.End) == 0 {
		return fmt.Errorf("%w: region %d end key is empty (nil means unbounded)", ErrBadOptions, desc.ID)
	}
	if desc.End != nil && desc.Start != nil && bytes.Compare(desc.Start, desc.End) >= 0 {
		return fmt.Errorf("%w: region %d range is empty", ErrBadOptions, desc.ID)
	}
	return nil
}

// OpenRegion returns primary region desc.ID, creating it from desc if
// the volume holds no region desc.ID; created reports which. A backup
// region desc.ID is not opened: ErrBackupRegion (Volume.Backup returns
// it).
func (v *Volume) OpenRegion(desc RegionDesc) (r *Region, created bool, err error) {
	v.mu.Lock()
	h, ok := v.regions[desc.ID]
	v.mu.Unlock()
	if ok {
		if r, ok := h.(*Region); ok {
			return r, false, nil
		}
		return nil, false, fmt.Errorf("%w: region %d is a backup", ErrBackupRegion, desc.ID)
	}
	r, err = v.CreateRegion(desc)
	return r, err == nil, err
}

// Region returns the open primary region id (ok false: the volume holds
// no region id, or holds it as a backup: see Volume.Backup).
func (v *Volume) Region(id uint64) (*Region, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.regions[id].(*Region)
	return r, ok
}

// Regions returns every primary region of the volume.
func (v *Volume) Regions() []*Region {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]*Region, 0, len(v.regions))
	for _, h := range v.regions {
		if r, ok := h.(*Region); ok {
			out = append(out, r)
		}
	}
	return out
}

// handle is a region's live handle in its role: *Region or *Backup. The
// volume holds one per region (Volume.regions, under Volume.mu); a role
// change closes it and replaces it with a handle of the other type.
type handle interface {
	core() *regionCore
	// close stops the region's work and makes what the role acknowledged
	// durable; later calls on the handle return ErrClosed.
	close() error
}

func (r *regionCore) core() *regionCore { return r }

// cores returns the core of every region of the volume, either role.
func (v *Volume) cores() []*regionCore {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]*regionCore, 0, len(v.regions))
	for _, h := range v.regions {
		out = append(out, h.core())
	}
	return out
}

// Desc returns the region's descriptor.
func (r *regionCore) Desc() RegionDesc { return r.desc }

// SetListener installs the listener for the region's events (nil removes
// it). Events in progress may still reach the previous listener. It
// returns once a segment switch made before it, without a listener, is
// sealed (durable): a listener sees every later switch (LogSealed).
func (r *Region) SetListener(l Listener) {
	r.listener.set(l)
	if l != nil {
		r.log.waitSealed() // a seal begun without it is over before it is told of later ones
	}
}

// SetReplicator makes acknowledged writes wait for rep (nil: no waiting:
// a write is acknowledged once appended, or durable in sync mode). Writes
// already past their append may still wait on the previous one. An L0
// compaction the previous one refused is retried with rep, once no
// Quiesce is in force. A caller retiring a replicator that must not be
// succeeded by "no waiting" uses ReplaceReplicator.
func (r *Region) SetReplicator(rep Replicator) {
	if rep == nil {
		r.repl.Store(nil)
		return
	}
	gate, _ := rep.(WriteGate)
	r.repl.Store(&replicatorBox{Replicator: rep, gate: gate})
	r.signal() // an L0 compaction held back for replication retries (after a Quiesce)
}

// WritesWait reports whether a put or delete returns only after other
// goroutines' work: the group commit in sync mode, or its replicator's
// acknowledgement (unless the replicator is a Waiter that says it does
// not wait). A hint for scheduling (a server hands the requests queued
// behind such a write to another worker), not a promise: any write may
// also wait for room in L0 or for a seal.
func (r *Region) WritesWait() bool {
	return ack{sync: r.v.opts.SyncMode == SyncModeSync, rep: r.repl.Load()}.waits()
}

// ReplaceReplicator installs next in place of old, atomically, if old is
// the region's replicator (compared with ==: replicators must be
// comparable); it reports whether it did. A write appended after the swap
// waits on next; one appended before waits on old. Swapping a closing
// stream for a refusing replicator (rather than for nil) is how a stream
// is detached without any later write being acknowledged unreplicated.
func (r *Region) ReplaceReplicator(old, next Replicator) bool {
	var nb *replicatorBox
	if next != nil {
		gate, _ := next.(WriteGate)
		nb = &replicatorBox{Replicator: next, gate: gate}
	}
	for {
		cur := r.repl.Load()
		if cur == nil || cur.Replicator != old {
			return false
		}
		if r.repl.CompareAndSwap(cur, nb) {
			if nb != nil {
				r.signal() // an L0 compaction held back for replication retries
			}
			return true
		}
	}
}

type replicatorBox struct {
	Replicator
	gate WriteGate // the Replicator's, if it is one
}

// SyncTo makes the region's log durable at least up to log position pos
// (a LogAppend.End), as a sync-mode write does: group commit with the
// region's other waiters. For a Replicator that must hold a write on the
// primary's disk (the primary is its only copy).
func (r *Region) SyncTo(pos uint64) error { return r.log.syncTo(pos) }

// Synced reports whether the region's log is durable up to pos: SyncTo(pos)
// would return nil without waiting. It never blocks.
func (r *Region) Synced(pos uint64) bool { return r.log.durable.Load() >= pos }

func (r *regionCore) newEmptyState() {
	r.mem = newMemtable()
	r.memCond = sync.NewCond(&r.mu)
	r.kick = make(chan struct{}, 1)
	r.closing = make(chan struct{})
	r.flusherStop = make(chan struct{})
	r.gcDone = map[uint64]bool{}
	r.reqs = newReqTable()
	r.now = time.Now
}

func (r *regionCore) checkKey(key []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > MaxKeySize:
		return fmt.Errorf("%w: %d bytes, limit %d", ErrKeyTooLarge, len(key), MaxKeySize)
	case r.desc.Start != nil && bytes.Compare(key, r.desc.Start) < 0,
		r.desc.End != nil && bytes.Compare(key, r.desc.End) >= 0:
		return fmt.Errorf("%w: region %d", ErrOutOfRange, r.desc.ID)
	}
	return nil
}

// Put stores value under key.
func (r *Region) Put(key, value []byte) error {
	if len(value) > r.v.MaxValueSize() {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), r.v.MaxValueSize())
	}
	_, err := r.write(recPut, key, value, RequestID{}, nil, r.v.opts.SyncMode == SyncModeSync, false, nil)
	return err
}

// Delete removes key (a tombstone; dropped at the last level).
func (r *Region) Delete(key []byte) error {
	_, err := r.write(recDelete, key, nil, RequestID{}, nil, r.v.opts.SyncMode == SyncModeSync, false, nil)
	return err
}

// Applying another copy's writes. A Build-Index backup applies batches
// of its primary's writes (a flush's records, a seed's pairs, the deletes
// that empty the region before a seed) and answers for each batch as a
// whole: ApplyPut, ApplyDelete and ApplyLogRecord do not wait for
// durability, whatever the sync mode, and CommitApplied then makes the
// batch durable with one group-committed fdatasync, where Put and Delete
// in sync mode would sync each write.

// ApplyPut is Put without the wait for durability (CommitApplied).
func (r *Region) ApplyPut(key, value []byte) error {
	if len(value) > r.v.MaxValueSize() {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrValueTooLarge, len(value), r.v.MaxValueSize())
	}
	_, err := r.write(recPut, key, value, RequestID{}, nil, false, false, nil)
	return err
}

// ApplyDelete is Delete without the wait for durability (CommitApplied).
func (r *Region) ApplyDelete(key []byte) error {
	_, err := r.write(recDelete, key, nil, RequestID{}, nil, false, false, nil)
	return err
}

// CommitApplied makes every write applied before it (ApplyPut,
// ApplyDelete, ApplyLogRecord, MergeRequestTable) as durable as the sync
// mode makes a Put before Put returns: in SyncModeSync on stable storage
// (the log synced up to its position: one fdatasync, shared with any
// other waiter), in SyncModeAsync nothing more (Sync does that). An error
// is the log's sticky failure: the writes may not be on the disk.
func (r *Region) CommitApplied() error {
	if r.v.opts.SyncMode != SyncModeSync {
		return nil
	}
	return r.Sync()
}

// write appends a record and indexes it in L0. cond, if set, is checked
// under the region lock right before the append; false skips the write.
// sync waits until the record is durable. A write with an identity
// (id.Client ≠ 0) is looked up in the completion table first: a duplicate
// is not appended again, but waits like its original (see waitDuplicate)
// and reports applied false. replicated applies a record the primary
// applied: its seq is never refused as stale. then set (TryPutOnce)
// makes a write that would wait before its append fail with errDeclined
// instead, having changed nothing; the wait after the append (the group
// commit, the replicator), if any, is the region's acknowledger's, which
// calls then with its outcome, and write returns errLater.
func (r *regionCore) write(kind uint8, key, value []byte, id RequestID, cond func() bool, sync, replicated bool, then func(error)) (bool, error) {
	try := then != nil
	if err := r.checkKey(key); err != nil {
		return false, err
	}
	if try && r.listener.wantsRecords() && r.listener.appendHolder() == nil {
		// A record listener whose LogAppended may wait, with no way to
		// take what it needs without waiting.
		return false, errDeclined
	}
	if cond == nil { // a client write: its replicator may refuse it before anything is appended
		if b := r.repl.Load(); b != nil && b.gate != nil {
			if err := admit(b.gate, try); err != nil {
				return false, err
			}
		}
	}
	k := append([]byte(nil), key...) // L0's copy, made outside the lock
	n := int64(recordSize(len(key), payloadLen(id, value)))
	if !try {
		r.mu.Lock()
	} else if !r.mu.TryLock() {
		// Held by another writer (a worker may be switching segments or
		// freezing L0 under it) or by readers: not worth a wait.
		return false, errDeclined
	}
	if try && (r.held > 0 || r.closed || r.bgErr != nil || r.memFull() || r.log.maySeal(n)) {
		// A Quiesce, an error to report, a freeze, a seal: all for a
		// caller that may wait. Nothing below waits then: with room in
		// L0 and the tail, waitRoomLocked returns at once, and a
		// listener's SealGate is asked only for a seal.
		r.mu.Unlock()
		return false, errDeclined
	}
	for {
		for r.held > 0 && cond == nil && !r.closed { // Quiesce: client writes wait; GC's finish its pass
			r.memCond.Wait()
		}
		// The gate is asked on every pass: other writers may have sealed
		// or appended while this one waited without the lock.
		gate := r.listener.sealGate()
		err := r.waitRoomLocked(cond != nil, gate)
		if errors.Is(err, errSealWait) {
			r.waitSeal(gate)
			continue
		}
		if err != nil {
			r.mu.Unlock()
			return false, err
		}
		// A stall in waitRoomLocked may have outlasted a Quiesce's start.
		if r.held > 0 && cond == nil && !r.closed {
			continue
		}
		// Admission: a record that seals the tail waits, without the
		// lock, until the listener can take the seal without waiting
		// (SealGate). Nothing is appended between here and the append.
		if gate != nil && r.log.maySeal(n) && !gate.SealReady() {
			r.waitSeal(gate)
			continue
		}
		break
	}
	r.writers.Add(1)
	defer r.writers.Add(-1) // a write acknowledged later holds one more (acknowledgeLater)
	if cond != nil && !cond() {
		r.mu.Unlock()
		return false, nil
	}
	if id.Client != 0 {
		switch v, end := r.reqs.check(id); {
		case v == reqDuplicate && try:
			r.mu.Unlock()
			return false, errDeclined // it waits as its original does
		case v == reqDuplicate:
			r.mu.Unlock()
			return false, r.waitDuplicate(end, sync)
		case v == reqStale && !replicated:
			r.mu.Unlock()
			return false, fmt.Errorf("%w: region %d client %d seq %d", ErrStaleRequest, r.desc.ID, id.Client, id.Seq)
		}
	}
	p, end, err := r.log.append(kind, key, value, id, try)
	if err != nil {
		r.mu.Unlock()
		return false, err
	}
	if id.Client != 0 {
		r.reqs.add(id, end, r.now())
	}
	if old, had := r.mem.put(k, entry{ptr: p, vlen: uint32(payloadLen(id, value)), tomb: kind == recDelete}); had {
		r.log.addGarbage(old.ptr, old.recSize(len(key)))
	}
	// The replicator that saw the append (its listener mirrored it) is the
	// one to wait for: one detached meanwhile must not let it go unwaited.
	rep := r.repl.Load()
	r.mu.Unlock()
	a := ack{end: end, sync: sync}
	if cond == nil { // GC relocations replicate, unacknowledged
		a.rep = rep
	}
	if try && a.waits() {
		if a.acknowledgedNow(r.log) {
			return true, nil // the wait would return at once: not made here, it may block
		}
		r.acknowledgeLater(a, then)
		return true, errLater
	}
	if err := r.wait(a, false); err != nil {
		return false, err
	}
	return true, nil
}

// errDeclined: a write made with try would have waited; nothing was
// changed.
var errDeclined = errors.New("engine: write declined: it would wait")

// admit asks gate whether a client write may be appended; try: without
// waiting (a TryWriteGate that cannot tell declines the write).
func admit(gate WriteGate, try bool) error {
	if !try {
		return gate.AdmitWrite()
	}
	if tg, ok := gate.(TryWriteGate); ok {
		told, err := tg.TryAdmitWrite()
		if !told {
			return errDeclined
		}
		return err
	}
	return gate.AdmitWrite()
}

// waits reports whether writes waiting on b wait for other goroutines'
// work (a replicator that is a Waiter says; any other does).
func (b *replicatorBox) waits() bool {
	if w, ok := b.Replicator.(Waiter); ok {
		return w.Waits()
	}
	return true
}

// errSealWait: waitRoomLocked would freeze L0 but the listener's
// SealGate is not ready.
var errSealWait = errors.New("engine: waiting for the listener's seal gate")

// waitSeal waits for gate with the region's lock released. Called with
// mu held; it returns with mu held, the region's state to be re-read.
func (r *regionCore) waitSeal(gate SealGate) {
	r.v.ctr.sealWaits.Add(1)
	r.mu.Unlock()
	gate.WaitSeal()
	r.mu.Lock()
}

func (r *regionCore) memFull() bool {
	return r.mem.len() >= r.v.opts.L0Pairs || (r.v.opts.L0Bytes > 0 && r.mem.kvBytes >= r.v.opts.L0Bytes)
}

// waitRoomLocked freezes a full L0, or waits (a stall) while the previous
// one is still being compacted. A GC relocation does not wait for an L0
// held back for replication (l0HeldLocked): it would hold up a Quiesce
// (the re-attach that ends the hold) from inside a GC pass; L0 takes it
// over its size.
//
// A freeze appends the request table's checkpoint, which may seal the
// log's tail: with a gate that is not ready it returns errSealWait
// instead, for the caller to wait for the gate without the lock.
func (r *regionCore) waitRoomLocked(relocation bool, gate SealGate) error {
	var start time.Time
	for {
		if r.closed {
			return ErrClosed
		}
		if r.bgErr != nil {
			return r.bgErr
		}
		if !r.memFull() {
			break
		}
		if r.imm == nil {
			if gate != nil && !gate.SealReady() {
				return errSealWait
			}
			if err := r.freezeLocked(); err != nil {
				return err
			}
			break
		}
		if relocation && r.l0HeldLocked() {
			break
		}
		if r.spaceErr != nil {
			// The frozen L0 cannot be compacted for want of space: refuse
			// rather than stall until space returns.
			return r.spaceErr
		}
		if start.IsZero() {
			start = time.Now()
		}
		r.memCond.Wait()
	}
	if !start.IsZero() {
		r.v.ctr.stallNanos.Add(int64(time.Since(start)))
	}
	return nil
}

// freezeLocked turns the L0 into the immutable one and starts compaction.
//
// It then appends the completion table as checkpoint records right at
// the new L0's start (immEnd, the compaction's recovery point): a replay
// from there, at a restart or a promotion, reads them first and so knows
// the outcomes of the writes compacted away. If that append fails the
// region fails (bgErr): advancing the recovery point without the table
// would let retries apply twice. If it fails for want of space (a new
// log segment), L0 is not frozen and the error is returned: the write that
// needed room fails, and the next one tries again (checkpoint records
// appended before the failure are ordinary table records to a replay).
func (r *regionCore) freezeLocked() error {
	mem := r.mem
	r.imm, r.immEnd = r.mem, r.log.pos()
	r.mem = newMemtable()
	end, err := r.checkpointLocked()
	if err != nil && r.spaceShortLocked(err) {
		r.mem, r.imm, r.immEnd = mem, nil, 0
		return err
	}
	r.immCkEnd = max(end, r.immEnd)
	if err != nil {
		r.immCkEnd = 0 // compactL0 refuses to move the recovery point
		if r.bgErr == nil {
			r.bgErr = fmt.Errorf("engine: region %d: request-table checkpoint: %w", r.desc.ID, err)
		}
		r.memCond.Broadcast()
	}
	r.signal()
	return nil
}

func (r *regionCore) signal() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Get returns a copy of the value stored under key, or ErrNotFound. On a
// Backup it finds what the installed levels index (the adopted log past
// the recovery point is indexed only by a promotion).
func (r *regionCore) Get(key []byte) ([]byte, error) {
	v, _, err := r.get(key, true, nil)
	return v, err
}

// TryGet is Get that never waits for a write to be acknowledged-grade: a
// key whose L0 record is not yet replicated (or durable, in sync mode),
// or whose region's Replicator cannot tell without waiting (it does not
// implement ReplicatedProbe), returns ok false and nothing else; the
// caller asks Get. So does a read that would wait for the region's or its
// log's lock held by another goroutine (a writer whose listener waits, a
// segment switch's flush). It still reads the levels and the log (a read
// from the page cache, or the device).
func (r *regionCore) TryGet(key []byte) (value []byte, ok bool, err error) {
	return r.get(key, false, nil)
}

// TryGetInto is TryGet that reads the value's record into dst's storage
// from its start (dst's length is ignored) when it fits in dst's capacity,
// else into a buffer of its own, as TryGet: the value returned then
// aliases dst, which the caller must not reuse while it needs the value.
// dst must not overlap key. The caller lends dst for the call only;
// nothing of the region keeps it.
func (r *regionCore) TryGetInto(key, dst []byte) (value []byte, ok bool, err error) {
	return r.get(key, false, dst)
}

// get reads key; an L0 hit not yet committed is waited for (wait) or
// reported as ok false. The record is read into dst if it fits
// (vlog.readTry).
func (r *regionCore) get(key []byte, wait bool, dst []byte) ([]byte, bool, error) {
	if err := r.checkKey(key); err != nil {
		return nil, true, err
	}
	if wait {
		r.mu.RLock()
	} else if !r.mu.TryRLock() {
		return nil, false, nil
	}
	if r.closed {
		r.mu.RUnlock()
		return nil, true, ErrClosed
	}
	e, ok := r.mem.get(key)
	if !ok && r.imm != nil {
		e, ok = r.imm.get(key)
	}
	inL0 := ok
	ver := r.cur
	ver.refs.Add(1)
	r.mu.RUnlock()
	defer r.release(ver)
	if inL0 {
		end, found, told := r.log.entryEnd(e, len(key), !wait)
		if !told {
			return nil, false, nil
		}
		if found {
			if !wait {
				if !r.committed(end) {
					return nil, false, nil
				}
			} else if err := r.waitCommitted(end); err != nil {
				return nil, true, err
			}
		}
	}
	for i := 1; !ok && i < len(ver.levels); i++ {
		var err error
		if e, ok, err = r.v.levelGet(ver.levels[i], key, IOIndex); err != nil {
			return nil, true, fmt.Errorf("engine: region %d level %d: %w", r.desc.ID, i, err)
		}
	}
	if !ok || e.tomb {
		return nil, true, ErrNotFound
	}
	rec, err := r.log.readTry(e.ptr, key, e.vlen, IOIndex, !wait, dst)
	if errors.Is(err, errLogBusy) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	// The record was read into dst or a buffer of this get's own: its
	// value is the caller's without a copy.
	return rec.Value[:len(rec.Value):len(rec.Value)], true, nil
}

func (r *regionCore) isClosed() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.closed
}

// Sync makes every write acknowledged before it durable.
func (r *Region) Sync() error {
	r.mu.RLock()
	closed := r.closed
	r.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	return r.log.syncTo(r.log.pos())
}

// close stops the background goroutines and syncs the log (once: a
// closed region returns nil).
func (r *Region) close() error {
	if !r.stop() {
		return nil
	}
	if err := r.log.syncTo(r.log.pos()); err != nil {
		return err
	}
	if err := r.log.saveEnds(); err != nil {
		return err
	}
	return r.log.dropPrepared()
}

// stop marks the core closed and waits for its goroutines; it reports
// whether this call closed it.
func (r *regionCore) stop() bool {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return false
	}
	r.closed = true
	r.memCond.Broadcast()
	r.mu.Unlock()
	close(r.closing)
	r.gcMu.Lock() // wait for a manual GC pass (it stops at the next segment)
	r.gcMu.Unlock()
	r.wg.Wait() // compaction and GC may still sync through the flusher
	close(r.flusherStop)
	r.flusherDone.Wait()
	r.log.sealers.Wait()
	return true
}

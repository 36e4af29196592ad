package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/pprof"
	"time"

	"go.uber.org/zap"
)

// Resume starts the region's background work (once; Open and
// CreateRegion do it unless Options.HoldBackground).
func (r *Region) Resume() {
	r.resumed.Do(r.startBackground)
}

func (r *Region) startBackground() {
	r.log.mu.Lock()
	r.log.flusherUp = true
	r.log.mu.Unlock()
	r.flusherDone.Add(1)
	go labeled("log-write", func() { r.log.flusher(r.flusherStop, r.flusherDone.Done) })
	r.wg.Add(3)
	go labeled("compaction", r.compactLoop)
	go labeled("gc", r.gcLoop)
	go labeled("log-write", func() { r.log.preparer(r.closing, r.wg.Done) })
}

// compactLoop runs compactions one at a time until none is needed.
func (r *regionCore) compactLoop() {
	defer r.wg.Done()
	for {
		select {
		case <-r.closing:
			return
		case <-r.kick:
		}
		for {
			select {
			case <-r.closing:
				return
			default:
			}
			did, err := r.compactOnce()
			if err != nil && r.v.spaceShort(err) {
				// No room for the new level: nothing was installed (the
				// build's segments are free again). Writes that would wait
				// for it fail meanwhile; it is tried again later, or as
				// soon as ProbeSpace finds room.
				r.mu.RLock()
				first := r.spaceErr == nil
				r.mu.RUnlock()
				if first {
					r.v.log.Warn("compaction waits for space", zap.Uint64("region", r.desc.ID), zap.Error(err))
				}
				r.setSpaceErr(err)
				select {
				case <-r.closing:
					return
				case <-r.v.spaceReturned():
				case <-time.After(spaceRetry):
				}
				continue
			}
			if err != nil {
				r.v.log.Error("compaction failed", zap.Uint64("region", r.desc.ID), zap.Error(err))
				r.mu.Lock()
				if r.bgErr == nil {
					if errors.Is(err, ErrVolumeFailed) || errors.Is(err, ErrMetadataFailed) {
						r.bgErr = fmt.Errorf("engine: region %d compaction: %w", r.desc.ID, err)
					} else {
						r.bgErr = fmt.Errorf("%w: region %d compaction: %w", ErrVolumeFailed, r.desc.ID, err)
					}
				}
				r.memCond.Broadcast()
				r.mu.Unlock()
				return
			}
			r.setSpaceErr(nil)
			if !did {
				break
			}
		}
	}
}

// capacity is the number of pairs level i holds before it is compacted.
func (r *regionCore) capacity(i int) int64 {
	c := int64(r.v.opts.L0Pairs)
	for ; i > 0 && c < 1<<50; i-- {
		c *= int64(r.v.opts.GrowthFactor)
	}
	return c
}

func (r *regionCore) compactOnce() (bool, error) {
	r.mu.Lock()
	imm, immEnd, ckEnd := r.imm, r.immEnd, r.immCkEnd
	ver := r.cur
	ver.refs.Add(1)
	r.compacting = true
	r.mu.Unlock()
	defer func() {
		r.release(ver)
		r.mu.Lock()
		r.compacting = false
		r.memCond.Broadcast()
		r.mu.Unlock()
	}()
	if imm != nil {
		r.mu.RLock()
		held := r.l0HeldLocked()
		r.mu.RUnlock()
		if !held {
			if ok, err := r.compactL0(imm, immEnd, ckEnd, ver); ok || err != nil {
				return true, err
			}
		}
	}
	for i := 1; i < len(ver.levels); i++ {
		if l := ver.levels[i]; l != nil && l.pairs > r.capacity(i) {
			return true, r.compactLevel(i, ver)
		}
	}
	return false, nil
}

// compactL0 merges the frozen L0 into L1 and advances the recovery point
// to immEnd. The request-table checkpoint written at immEnd (ending at
// ckEnd; 0: writing it failed) must be durable, and held by the region's
// replicator, before any replica can take immEnd as its recovery point: a
// replay from there must find it. It does nothing (false) while the
// replicator does not hold the frozen L0's records and the checkpoint: a
// level is read without asking the replicator (commit.go), so a record
// that entered one would be readable although the region's group may
// lack it (a write refused when a backup dropped out). The L0 is then
// held (l0HeldLocked) until another replicator is installed; meanwhile
// level compactions go on and Quiesce and WaitIdle do not wait for it.
func (r *regionCore) compactL0(imm *memtable, immEnd, ckEnd uint64, ver *version) (bool, error) {
	if ckEnd == 0 {
		return true, fmt.Errorf("engine: region %d: no request-table checkpoint at the recovery point", r.desc.ID)
	}
	// Every pointer of the new L1 must reach durable log bytes.
	if err := r.log.syncTo(ckEnd); err != nil {
		return true, err
	}
	if rep := r.repl.Load(); rep != nil {
		if err := rep.WaitReplicated(max(immEnd, ckEnd)); err != nil {
			r.mu.Lock()
			r.heldFor = rep
			r.memCond.Broadcast()
			r.mu.Unlock()
			r.v.log.Warn("L0 compaction held: its records are not replicated", zap.Uint64("region", r.desc.ID), zap.Error(err))
			return false, nil
		}
	}
	r.mu.Lock()
	r.heldFor = nil
	r.mu.Unlock()
	r.listener.LogFlushed(r.log.flushInfo(immEnd))
	info := CompactionInfo{Region: r.desc.ID, Src: 0, Dst: 1}
	srcs := []source{newMemIter(imm.t, nil, nil), newLevelIter(r.v, ver.level(1), nil, nil, IOCompaction)}
	return true, r.mergeInstall(info, srcs, ver, func(nv *version) {
		r.imm = nil
		r.memCond.Broadcast()
	}, immEnd)
}

// l0HeldLocked reports whether the frozen L0 waits for another replicator
// than the one that refused it (l0Held). Called with mu held.
func (r *regionCore) l0HeldLocked() bool {
	return r.imm != nil && l0Held(r.heldFor, r.repl.Load(), r.held > 0)
}

// l0Held decides whether an L0 compaction refused by replicator heldFor
// (nil: none refused) still waits, with cur the region's replicator now and
// quiesced whether a Quiesce is in force. Only a replicator installed
// since may confirm the records (a re-attach: its stream put the whole log
// on its backups); no replicator confirms nothing; and a quiesced region
// (a re-attach in progress) must stay still until released.
func l0Held(heldFor, cur *replicatorBox, quiesced bool) bool {
	return heldFor != nil && (cur == nil || cur == heldFor || quiesced)
}

// compactLevel merges Li into Li+1, or moves Li down when Li+1 is empty.
func (r *regionCore) compactLevel(i int, ver *version) error {
	info := CompactionInfo{Region: r.desc.ID, Src: i, Dst: i + 1}
	if ver.level(i+1) == nil {
		info.Move = true
		r.listener.CompactionStarted(info)
		r.metaMu.Lock()
		defer r.metaMu.Unlock()
		if r.levelsChanged(ver, i, i+1) {
			return nil // a level was installed meanwhile: decide again
		}
		l := ver.level(i)
		b := r.v.meta.NewBatch()
		b.Delete(levelKey(r.desc.ID, i), nil)
		b.Set(levelKey(r.desc.ID, i+1), l.encode(), nil)
		if err := r.v.commit(b); err != nil {
			return err
		}
		r.mu.Lock()
		r.installLocked(r.cur.with(i, nil).with(i+1, l), nil)
		r.mu.Unlock()
		r.v.ctr.levelMoves.Add(1)
		r.v.ctr.compactions.Add(1)
		r.listener.CompactionDone(info, l.info(i+1))
		return nil
	}
	srcs := []source{newLevelIter(r.v, ver.level(i), nil, nil, IOCompaction), newLevelIter(r.v, ver.level(i+1), nil, nil, IOCompaction)}
	return r.mergeInstall(info, srcs, ver, nil, 0)
}

// mergeInstall builds level info.Dst from srcs (newest first), commits it
// together with the removal of info.Src, installs the new version and frees
// the replaced levels' segments once no reader uses them. For an L0
// compaction (Src 0) it also persists the new recovery point rp.
func (r *regionCore) mergeInstall(info CompactionInfo, srcs []source, ver *version, onInstall func(*version), rp uint64) error {
	r.listener.CompactionStarted(info)
	garbage := map[uint64]int64{}
	shadow := func(k []byte, e entry) { garbage[r.v.g.seg(e.ptr)] += int64(e.recSize(len(k))) }
	last := ver.deepest() <= info.Dst
	b := newBuilder(r.v, r.desc.ID, info.Dst, r.follower.Load(), func(s BuiltSegment) error {
		r.v.ctr.segsBuilt.Add(1)
		r.listener.SegmentBuilt(info, s)
		return nil
	})
	// A level's pointers name records below the recovery point (an L0
	// compaction's: below rp, the end of the frozen L0), so the segments
	// a pointer may still be read in are those of the log up to it: every
	// one of them has been flushed to the backups. A log segment past it
	// (the tail, the prepared next) can only match a stale pointer into an
	// earlier segment of the same number, freed after GC relocated its
	// records and reused since.
	bound := rp
	if info.Src > 0 {
		r.mu.RLock()
		bound = r.rp
		r.mu.RUnlock()
	}
	live := r.log.liveSegs(bound)
	m := newMergeIter(srcs, shadow)
	for ; m.valid(); m.next() {
		k, e := m.key(), m.entry()
		if e.tomb && last {
			shadow(k, e)
			continue
		}
		if !live[r.v.g.seg(e.ptr)] {
			// The segment was freed (GC relocated what was live in it;
			// its number may be the log's again, past the recovery point):
			// newer data shadows this entry. Write a dead pointer, so no
			// replica has to translate a segment its log no longer has (or
			// has not adopted yet).
			e.ptr = r.v.g.ptr(0, r.v.g.off(e.ptr))
		}
		if err := b.add(k, e); err != nil {
			b.abort()
			return err
		}
	}
	if err := m.error(); err != nil {
		b.abort()
		return err
	}
	desc, err := b.finish()
	if err != nil {
		b.abort()
		return err
	}
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	if r.levelsChanged(ver, info.Src, info.Dst) {
		b.abort() // a level was installed meanwhile: compact again from the new version
		return nil
	}
	batch := r.v.meta.NewBatch()
	if info.Src > 0 {
		batch.Delete(levelKey(r.desc.ID, info.Src), nil)
	} else {
		batch.Set(regionKey(r.desc.ID, "rp"), binary.LittleEndian.AppendUint64(nil, rp), nil)
	}
	if desc.root == 0 {
		batch.Delete(levelKey(r.desc.ID, info.Dst), nil)
	} else {
		batch.Set(levelKey(r.desc.ID, info.Dst), desc.encode(), nil)
	}
	entries := r.log.applyGarbage(garbage)
	r.log.setLogEntries(batch, entries)
	if err := r.v.commit(batch); err != nil {
		// The batch may have landed: keep the new segments allocated.
		return err
	}
	r.log.markEndsSaved(entries)
	var old []uint64
	for _, n := range []int{info.Src, info.Dst} {
		if l := ver.level(n); l != nil && n > 0 {
			for _, s := range l.segs {
				old = append(old, s.seg)
			}
		}
	}
	r.mu.Lock()
	nv := r.cur.with(info.Dst, desc)
	if info.Src > 0 {
		nv = nv.with(info.Src, nil)
	} else {
		r.rp = rp
	}
	r.installLocked(nv, func() { r.v.alloc.release(old...) })
	if onInstall != nil {
		onInstall(nv)
	}
	r.mu.Unlock()
	r.v.ctr.compactions.Add(1)
	r.listener.CompactionDone(info, desc.info(info.Dst))
	return r.freeDeadLogLocked()
}

// levelsChanged reports whether levels src or dst (src 0: L0, not checked)
// differ from ver's: InstallLevel replaced one since the compaction began.
// Called with metaMu held.
func (r *regionCore) levelsChanged(ver *version, src, dst int) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return (src > 0 && r.cur.level(src) != ver.level(src)) || r.cur.level(dst) != ver.level(dst)
}

func (l *levelDesc) info(n int) LevelInfo {
	li := LevelInfo{Level: n, Root: l.root, Height: l.height, Pairs: l.pairs, KVBytes: l.kvBytes, Nodes: l.nodes}
	for _, s := range l.segs {
		li.Segments = append(li.Segments, s.seg)
		li.Seqs = append(li.Seqs, s.seq)
	}
	return li
}

// labeled runs f with the pprof label component=name on its goroutine
// (CPU profiles split by component: tebis bench replication).
func labeled(name string, f func()) {
	pprof.Do(context.Background(), pprof.Labels("component", name), func(context.Context) { f() })
}

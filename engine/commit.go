package engine

// Reads never return a write that could still be lost. A write is in L0
// (visible to readers) before its writer has it acknowledged: in a
// replicated region its record may not have reached every backup yet, in
// sync mode it may not be durable yet. A read that finds its key in L0, or
// a scan over a non-empty L0, first waits until the records it may return
// are acknowledged-grade (replicated, or durable); a crash or failover
// after the read then cannot take back what it returned. The wait is a
// position check once the write is done.

import "sync"

// waitCommitted waits until the log up to end is replicated (a region
// with a Replicator) or durable (sync mode).
func (r *regionCore) waitCommitted(end uint64) error {
	if r.v.opts.SyncMode == SyncModeSync {
		if err := r.log.syncTo(end); err != nil {
			return err
		}
	}
	if rep := r.repl.Load(); rep != nil {
		return rep.WaitReplicated(end)
	}
	return nil
}

// committed reports, without waiting, whether waitCommitted(end) would
// return nil at once: false when the log up to end is not durable yet
// (sync mode), or the region's Replicator does not confirm end
// (ReplicatedProbe), or cannot tell without waiting (it is no probe).
func (r *regionCore) committed(end uint64) bool {
	if r.v.opts.SyncMode == SyncModeSync && r.log.durable.Load() < end {
		return false
	}
	if rep := r.repl.Load(); rep != nil {
		p, ok := rep.Replicator.(ReplicatedProbe)
		return ok && p.Replicated(end)
	}
	return true
}

// lockOrTry locks mu, or with try only if it is free now, and reports
// whether it did.
func lockOrTry(mu *sync.Mutex, try bool) bool {
	if !try {
		mu.Lock()
		return true
	}
	return mu.TryLock()
}

// entryEnd is the log position after the record of L0 entry e of key
// (found false if its segment is no longer in the log). try: told false,
// and nothing else, if the log's lock is held by another goroutine.
func (l *vlog) entryEnd(e entry, keyLen int, try bool) (end uint64, found, told bool) {
	if !lockOrTry(&l.mu, try) {
		return 0, false, false
	}
	ls := l.bySeg[l.g.seg(e.ptr)]
	l.mu.Unlock()
	if ls == nil {
		return 0, false, true
	}
	return ls.idx<<l.g.shift | uint64(l.g.off(e.ptr)+int64(e.recSize(keyLen))), true, true
}

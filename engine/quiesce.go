package engine

import "time"

// Quiesce makes a running region still, for a caller that must read its
// state while nothing changes it (attaching replication to a region that
// already serves): client writes wait (they go on after release), writes
// in progress finish, GC stops after its current pass, and running or
// needed compactions complete. release undoes it; it must be called once.
// Reads go on throughout.
func (r *Region) Quiesce() (release func(), err error) {
	r.mu.Lock()
	r.held++
	r.mu.Unlock()
	r.gcMu.Lock()
	release = func() {
		r.gcMu.Unlock()
		r.mu.Lock()
		r.held--
		r.memCond.Broadcast()
		r.mu.Unlock()
		r.signal() // an L0 compaction held back for replication retries
	}
	for r.writers.Load() > 0 {
		time.Sleep(100 * time.Microsecond)
	}
	if err := r.WaitIdle(); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

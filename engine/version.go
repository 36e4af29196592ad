package engine

import "sync/atomic"

// version is an immutable set of a region's on-device levels. Readers hold a
// reference while they use its segments; segments a newer version dropped
// are freed once every older version is released.
type version struct {
	levels []*levelDesc // levels[i] is Li; levels[0] is unused; nil = empty
	refs   atomic.Int32
}

func (v *version) level(i int) *levelDesc {
	if i < len(v.levels) {
		return v.levels[i]
	}
	return nil
}

// deepest returns the number of the deepest non-empty level (0 if none).
func (v *version) deepest() int {
	for i := len(v.levels) - 1; i >= 1; i-- {
		if v.levels[i] != nil {
			return i
		}
	}
	return 0
}

// with returns a copy of v with level i replaced.
func (v *version) with(i int, l *levelDesc) *version {
	n := &version{levels: append([]*levelDesc(nil), v.levels...)}
	for len(n.levels) <= i {
		n.levels = append(n.levels, nil)
	}
	if l != nil && l.root == 0 {
		l = nil
	}
	n.levels[i] = l
	for len(n.levels) > 1 && n.levels[len(n.levels)-1] == nil {
		n.levels = n.levels[:len(n.levels)-1]
	}
	return n
}

// refersToLog reports whether any level points into log segment seg.
func (v *version) refersToLog(seg uint64) bool {
	for _, l := range v.levels {
		if l == nil {
			continue
		}
		if _, ok := l.logRefSet[seg]; ok {
			return true
		}
	}
	return false
}

// pendingFree is work deferred until a replaced version and all older ones
// are released.
type pendingFree struct {
	v    *version
	free func()
}

// acquire returns the current version with a reference held.
func (r *regionCore) acquire() *version {
	r.mu.RLock()
	v := r.cur
	v.refs.Add(1)
	r.mu.RUnlock()
	return v
}

func (r *regionCore) release(v *version) {
	if v.refs.Add(-1) == 0 {
		r.sweep()
	}
}

// installLocked makes nv current and defers free until readers of the old
// version are gone. Called with r.mu held.
func (r *regionCore) installLocked(nv *version, free func()) {
	old := r.cur
	nv.refs.Store(1)
	r.cur = nv
	r.freeMu.Lock()
	r.pending = append(r.pending, pendingFree{v: old, free: free})
	r.freeMu.Unlock()
	if old.refs.Add(-1) == 0 {
		// sweep takes freeMu only; safe under r.mu.
		r.sweep()
	}
}

func (r *regionCore) sweep() {
	r.freeMu.Lock()
	for len(r.pending) > 0 && r.pending[0].v.refs.Load() == 0 {
		if f := r.pending[0].free; f != nil {
			f()
		}
		r.pending = r.pending[1:]
	}
	r.freeMu.Unlock()
	if n := r.successor.Load(); n != nil {
		n.sweep() // a reader of a promoted backup's old handle may have gated it
	}
}

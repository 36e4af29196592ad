package engine

import (
	"fmt"
	"sort"
	"sync"
)

// allocator hands out segments of the volume. Its state is derived at open
// from the metadata (every referenced segment is used, all others below the
// high-water mark are free), so a crash never leaks a segment. Segment 0 is
// reserved so that device pointer 0 means nil.
type allocator struct {
	mu      sync.RWMutex
	free    []uint64 // sorted descending: pop takes the lowest
	hw      uint64   // next never-allocated segment
	max     int64    // capacity in segments, 0 = unlimited
	nextSeq uint64
	seqs    []uint64 // seqs[seg]: sequence of the live allocation, 0 if free
}

func newAllocator(max int64, nextSeq uint64, used []segRef) *allocator {
	a := &allocator{max: max, nextSeq: nextSeq, hw: 1}
	for _, u := range used {
		if u.seg+1 > a.hw {
			a.hw = u.seg + 1
		}
		if u.seq >= a.nextSeq {
			a.nextSeq = u.seq + 1
		}
	}
	a.seqs = make([]uint64, a.hw)
	for _, u := range used {
		a.seqs[u.seg] = u.seq
	}
	for s := a.hw - 1; s >= 1; s-- {
		if a.seqs[s] == 0 {
			a.free = append(a.free, s)
		}
	}
	sort.Slice(a.free, func(i, j int) bool { return a.free[i] > a.free[j] })
	return a
}

// alloc returns a free segment and a fresh sequence number.
func (a *allocator) alloc() (segRef, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allocLocked()
}

func (a *allocator) allocLocked() (segRef, error) {
	var s uint64
	if n := len(a.free); n > 0 {
		s = a.free[n-1]
		a.free = a.free[:n-1]
	} else {
		if a.max > 0 && int64(a.hw) >= a.max {
			return segRef{}, fmt.Errorf("%w: all %d segments in use", ErrNoSpace, a.max)
		}
		s = a.hw
		a.hw++
		a.seqs = append(a.seqs, 0)
	}
	if a.nextSeq == 0 {
		a.nextSeq = 1
	}
	r := segRef{seg: s, seq: a.nextSeq}
	a.nextSeq++
	a.seqs[s] = r.seq
	return r, nil
}

// allocWithin is alloc for a segment below limit (one the segment file
// covers), and on a capped volume only if more than margin segments are
// free before it (at least margin stay free); false: none such.
func (a *allocator) allocWithin(limit uint64, margin int64) (segRef, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.free)
	if a.max > 0 && int64(n)+a.max-int64(a.hw) <= margin {
		return segRef{}, false
	}
	// alloc takes the lowest free segment, else the high-water mark.
	if n > 0 && a.free[n-1] >= limit || n == 0 && a.hw >= limit {
		return segRef{}, false
	}
	s, err := a.allocLocked()
	return s, err == nil
}

// release returns segments to the free list. The caller guarantees that no
// committed metadata and no reader references them any more.
func (a *allocator) release(segs ...uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range segs {
		if s == 0 || s >= uint64(len(a.seqs)) || a.seqs[s] == 0 {
			panic(fmt.Sprintf("engine: release of segment %d that is not allocated", s))
		}
		a.seqs[s] = 0
		i := sort.Search(len(a.free), func(i int) bool { return a.free[i] <= s })
		a.free = append(a.free, 0)
		copy(a.free[i+1:], a.free[i:])
		a.free[i] = s
	}
}

// seqOf returns the sequence of the live allocation of seg (0 if free).
func (a *allocator) seqOf(seg uint64) uint64 {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if seg >= uint64(len(a.seqs)) {
		return 0
	}
	return a.seqs[seg]
}

func (a *allocator) usage() (used, free int64) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return int64(a.hw) - 1 - int64(len(a.free)), int64(len(a.free))
}

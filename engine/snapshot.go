package engine

import "fmt"

// Snapshot is a consistent view of a primary region taken while it
// serves: its levels, its log and its recovery point as of one instant,
// readable until Release even if compactions replace the levels and GC
// frees the log segments meanwhile (their segments are not reused until
// Release). It is what seeding a new backup reads while the region keeps
// serving. A Snapshot is used by one goroutine; Release it promptly: it
// holds back the reuse of every segment freed after it.
type Snapshot struct {
	r      *regionCore
	ver    *version
	Logs   []LogSegment // the region's log, oldest first (End 0: the tail or a prepared segment)
	Levels []LevelInfo
	RP     LogPoint // the recovery point (where replay starts)
	RPSeq  uint64   // the records' seed of the recovery point's segment
	// Tail is the log tail's segment, records' seed and bytes written;
	// TailImage holds its bytes up to the recovery point when the
	// recovery point is in the tail (nil otherwise).
	Tail      LogTail
	TailImage []byte
	released  bool
}

// Snapshot takes a snapshot of a primary region.
func (r *Region) Snapshot() (*Snapshot, error) {
	if r.isClosed() {
		return nil, ErrClosed
	}
	// Under metaMu no level is installed and no log segment freed: the
	// version, the recovery point and the log list agree.
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	r.mu.RLock()
	ver, rp := r.cur, r.rp
	ver.refs.Add(1)
	r.mu.RUnlock()
	s := &Snapshot{r: r.regionCore, ver: ver}
	for n := 1; n < len(ver.levels); n++ {
		if l := ver.levels[n]; l != nil {
			s.Levels = append(s.Levels, l.info(n))
		} else {
			s.Levels = append(s.Levels, LevelInfo{Level: n})
		}
	}
	// The log list, the recovery point's segment and the tail at one
	// instant (the tail may be sealed since rp was read: then it is in
	// the list, sealed).
	idx, off := rp>>r.v.g.shift, int64(rp&(uint64(r.v.g.segSize)-1))
	l := r.log
	l.lockSettled() // a segment the log left is listed sealed
	for _, ls := range l.segs {
		s.Logs = append(s.Logs, LogSegment{Segment: ls.seg, Seq: ls.recordSeq(), Primary: ls.primary, End: ls.end, Index: ls.idx})
		if ls.idx == idx {
			s.RP, s.RPSeq = LogPoint{Segment: ls.seg, Offset: off}, ls.recordSeq()
		}
	}
	s.Tail = LogTail{Segment: l.tail.seg, Seq: l.tail.seq, Index: l.tail.idx, Offset: l.off}
	if s.RP.Segment == l.tail.seg {
		s.TailImage = append([]byte(nil), l.buf[:off]...)
	}
	l.unlockSettled()
	if s.RP.Segment == 0 {
		r.release(ver)
		return nil, fmt.Errorf("%w: region %d: recovery point in log index %d, which the log no longer has", ErrCorrupt, r.desc.ID, idx)
	}
	return s, nil
}

// ReadLog is Region.ReadLog for the snapshot's sealed log segments, also
// those freed since it was taken.
func (s *Snapshot) ReadLog(seg, seq uint64, from, to int64) ([]byte, error) {
	if s.released {
		return nil, fmt.Errorf("%w: snapshot released", ErrClosed)
	}
	return s.r.readLog(seg, seq, from, to, true) // bySeg keeps them until the version is released
}

// ReadIndexSegment is Region.ReadIndexSegment in the snapshot's levels,
// with every leaf value pointer into a log segment the snapshot's log no
// longer has (GC relocated what was live in it; newer data shadows the
// entry) written as a dead pointer, as compactions write them: a backup
// seeded with it holds only the log segments the snapshot lists.
func (s *Snapshot) ReadIndexSegment(seg uint64) ([]byte, error) {
	if s.released {
		return nil, fmt.Errorf("%w: snapshot released", ErrClosed)
	}
	data, err := s.r.readIndexSegment(s.ver, seg)
	if err != nil {
		return nil, err
	}
	var seq uint64
	for _, li := range s.Levels {
		for i, x := range li.Segments {
			if x == seg {
				seq = li.Seqs[i]
			}
		}
	}
	// What a backup seeded from the snapshot maps: the sealed segments,
	// and the tail when the recovery point is in it. A level entry (older
	// than the recovery point) pointing anywhere else is stale.
	live := make(map[uint64]bool, len(s.Logs))
	for _, ls := range s.Logs {
		if ls.End != 0 {
			live[ls.Segment] = true
		}
	}
	if s.TailImage != nil {
		live[s.Tail.Segment] = true
	}
	g := s.r.v.g
	dead := func(p uint64, value bool) (uint64, error) {
		if value && g.seg(p) != 0 && !live[g.seg(p)] {
			return g.ptr(0, g.off(p)), nil
		}
		return p, nil
	}
	if _, err := s.r.v.RewriteIndexSegment(data, seg, seq, dead); err != nil {
		return nil, err
	}
	return data, nil
}

// Release lets the region reuse what the snapshot held. Idempotent.
func (s *Snapshot) Release() {
	if !s.released {
		s.released = true
		s.r.release(s.ver)
	}
}

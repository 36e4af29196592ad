package ring

// spans allocates contiguous byte ranges of a ring in order. Positions are
// monotonic counters (offset = counter % size); [head, tail) is in use. A
// range never wraps: when it does not fit before the ring's end, the rest
// of the lap is skipped (the request ring fills it with a NOOP).
//
// Ranges are released either in order up to a counter (releaseTo: the
// server consumed the request ring up to there) or one by one in any order
// (release: a reply slot was read), the head then advancing over released
// ranges at the front.
type spans struct {
	size       uint64
	head, tail uint64
	q          []span // outstanding ranges, allocation order (release mode)
}

type span struct {
	from, end uint64 // from includes any skipped lap end before the range
	done      bool
}

// reserve returns the counter of an n-byte range and the bytes skipped
// before it, or ok=false if the ring lacks room now.
func (s *spans) reserve(n uint64) (at, skip uint64, ok bool) {
	off := s.tail % s.size
	if off+n > s.size {
		skip = s.size - off
	}
	if s.tail+skip+n-s.head > s.size {
		return 0, 0, false
	}
	from := s.tail
	at = s.tail + skip
	s.tail = at + n
	s.q = append(s.q, span{from: from, end: s.tail})
	return at, skip, true
}

// releaseTo frees everything before counter c (in-order mode).
func (s *spans) releaseTo(c uint64) {
	if c > s.head {
		s.head = c
	}
	i := 0
	for i < len(s.q) && s.q[i].end <= s.head {
		i++
	}
	s.q = s.q[:copy(s.q, s.q[i:])]
}

// release frees the range reserved at counter at (any-order mode).
func (s *spans) release(at uint64) {
	for i := range s.q {
		if s.q[i].end > at && s.q[i].from <= at {
			s.q[i].done = true
			break
		}
	}
	i := 0
	for i < len(s.q) && s.q[i].done {
		s.head = s.q[i].end
		i++
	}
	s.q = s.q[:copy(s.q, s.q[i:])]
	if len(s.q) == 0 {
		s.head = s.tail
	}
}

package engine

// RegionStats is a snapshot of one region's shape, in either role: its L0
// (the in-memory index; empty on a Send-Index backup, which indexes
// nothing itself), its on-device levels and its log.
type RegionStats struct {
	// L0Pairs and L0Bytes are the pairs and the bytes of keys and values
	// in the L0 that takes writes (a frozen L0 being compacted not
	// counted); L0Fill is how full it is, in [0, 1]: the larger of
	// L0Pairs over the volume's L0Pairs option and L0Bytes over its
	// L0Bytes option (when set). L0 freezes and is compacted at 1.
	L0Pairs int
	L0Bytes int64
	L0Fill  float64
	// Compacting: a frozen L0 is being compacted into L1.
	Compacting bool
	// Levels are L1 to the deepest non-empty level, in order (Levels[i]
	// is level i+1; an empty level in between has zero counts).
	Levels []LevelStats
	// LogSegments is the number of segments the region's value log holds,
	// the tail included.
	LogSegments int
}

// LevelStats is one on-device level of a region.
type LevelStats struct {
	Level    int
	Pairs    int64 // pairs indexed, deletions included
	KVBytes  int64 // bytes of keys and values indexed
	Segments int   // index segments of the level's B+tree
}

// Stats returns a snapshot of the region's shape. It takes the region's
// locks briefly and reads nothing from the device.
func (r *regionCore) Stats() RegionStats {
	var st RegionStats
	r.mu.RLock()
	if r.mem != nil {
		st.L0Pairs, st.L0Bytes = r.mem.len(), r.mem.kvBytes
	}
	st.Compacting = r.imm != nil
	cur := r.cur
	if cur != nil {
		for i := 1; i <= cur.deepest(); i++ {
			ls := LevelStats{Level: i}
			if l := cur.level(i); l != nil {
				ls.Pairs, ls.KVBytes, ls.Segments = l.pairs, l.kvBytes, len(l.segs)
			}
			st.Levels = append(st.Levels, ls)
		}
	}
	r.mu.RUnlock()
	st.L0Fill = l0Fill(st.L0Pairs, st.L0Bytes, r.v.opts.L0Pairs, r.v.opts.L0Bytes)
	if r.log != nil {
		r.log.mu.Lock()
		st.LogSegments = len(r.log.segs)
		r.log.mu.Unlock()
	}
	return st
}

// l0Fill is how full an L0 of pairs and bytes is against its capacities
// (maxBytes <= 0: no byte cap), capped at 1.
func l0Fill(pairs int, bytes int64, maxPairs int, maxBytes int64) float64 {
	f := 0.0
	if maxPairs > 0 {
		f = float64(pairs) / float64(maxPairs)
	}
	if maxBytes > 0 {
		f = max(f, float64(bytes)/float64(maxBytes))
	}
	return min(f, 1)
}

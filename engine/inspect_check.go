package engine

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
)

// Problem is one thing Check found wrong.
type Problem struct {
	Region uint64 `json:"region,omitempty"`
	Level  int    `json:"level,omitempty"`
	What   string `json:"what"`
}

// CheckReport is what Check verified and found.
type CheckReport struct {
	Segments      int       `json:"segments_checked"`
	Nodes         int64     `json:"nodes_checked"`
	Pairs         int64     `json:"pairs_checked"`
	Records       int64     `json:"log_records_checked"`
	StaleShadowed int64     `json:"stale_shadowed_pointers"` // into freed log segments, but shadowed by newer data
	Problems      []Problem `json:"problems"`
}

// OK reports whether nothing was found wrong.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 }

// maxProblems bounds a report.
const maxProblems = 200

func (r *CheckReport) add(p Problem) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, p)
	}
}

// Check verifies the whole volume: segment headers; every node's
// checksum, key order within and across nodes, every child pointer landing
// on a node of the right height, inside its parent's key range and in the
// level's own segments; every leaf value pointer landing on a log record
// with the same key (a pointer into a freed log segment is tolerated only
// when a newer level or the log tail shadows the key); each log segment's
// records up to its sealed end; descriptor counts; and that no segment is
// referenced twice or lies outside the file.
func (in *Inspector) Check() *CheckReport {
	rep := &CheckReport{}
	owner := map[uint64]string{}
	for _, id := range in.regionIDs() {
		st := in.states[id]
		claim := func(seg uint64, what string) {
			if prev, dup := owner[seg]; dup {
				rep.add(Problem{Region: id, What: fmt.Sprintf("segment %d is referenced twice: by %s and by %s", seg, prev, what)})
			}
			owner[seg] = what
			if seg == 0 || in.g.fileOff(seg) >= in.size {
				rep.add(Problem{Region: id, What: fmt.Sprintf("%s: segment %d lies outside the volume file (%d segments)", what, seg, in.fileSegments())})
			}
		}
		for _, ls := range st.logs {
			what := fmt.Sprintf("region %d log index %d", id, ls.idx)
			claim(ls.seg, what)
			rep.Segments++
			err := in.segmentRecords(id, ls, segHeaderSize, func(LogRecord) error { rep.Records++; return nil })
			if err != nil {
				rep.add(Problem{Region: id, What: err.Error()})
			}
		}
		for _, n := range levelNumbers(st) {
			l := st.levels[n]
			for _, s := range l.segs {
				claim(s.seg, fmt.Sprintf("region %d level %d", id, n))
				rep.Segments++
				h, err := in.segHeader(s.seg)
				switch {
				case err != nil:
					rep.add(Problem{Region: id, Level: n, What: err.Error()})
				case h.Kind != segKindIndex || h.Seq != s.seq || h.Region != id:
					// (The header's level may be lower: a moved level
					// keeps the segments it was built in.)
					rep.add(Problem{Region: id, Level: n, What: fmt.Sprintf("segment %d: header (kind %d, seq %d, region %d) does not match the level (seq %d)",
						s.seg, h.Kind, h.Seq, h.Region, s.seq)})
				}
			}
			in.checkLevel(rep, id, st, n)
		}
	}
	return rep
}

// checkLevel walks one level's tree.
func (in *Inspector) checkLevel(rep *CheckReport, id uint64, st *regionState, n int) {
	l := st.levels[n]
	own := map[uint64]bool{}
	for _, s := range l.segs {
		own[s.seg] = true
	}
	logs := map[uint64]*logSeg{}
	for _, ls := range st.logs {
		logs[ls.seg] = ls
	}
	reached := map[uint64]bool{}
	var last []byte
	var nodes, pairs int64
	problem := func(format string, a ...any) {
		rep.add(Problem{Region: id, Level: n, What: fmt.Sprintf(format, a...)})
	}
	// walk checks the subtree at p, whose keys must lie in [lo, hi).
	var walk func(p uint64, height int, lo, hi []byte) bool
	walk = func(p uint64, height int, lo, hi []byte) bool {
		if !own[in.g.seg(p)] {
			problem("node pointer %s is not in the level's segments", in.PtrString(p))
			return false
		}
		nd, err := in.node(p)
		if err != nil {
			problem("%v", err)
			return false
		}
		reached[in.g.seg(p)] = true
		nodes++
		if nd.height != height {
			problem("node %s has height %d, expected %d", in.PtrString(p), nd.height, height)
			return false
		}
		if lo != nil && !bytes.Equal(nd.keys[0], lo) {
			problem("node %s starts at key %q, its parent's entry says %q", in.PtrString(p), nd.keys[0], lo)
		}
		if hi != nil && bytes.Compare(nd.keys[len(nd.keys)-1], hi) >= 0 {
			problem("node %s ends at key %q, at or past the next separator %q", in.PtrString(p), nd.keys[len(nd.keys)-1], hi)
		}
		if nd.leaf {
			for i, k := range nd.keys {
				if last != nil && bytes.Compare(k, last) <= 0 {
					problem("leaf %s key %q is not after the previous leaf's last key %q", in.PtrString(p), k, last)
				}
				last = append(last[:0], k...)
				pairs++
				in.checkValue(rep, id, st, n, logs, k, nd.ptrs[i], nd.vlens[i])
			}
			return true
		}
		for i, c := range nd.ptrs {
			var next []byte
			if i+1 < len(nd.keys) {
				next = nd.keys[i+1]
			} else {
				next = hi
			}
			if !walk(c, height-1, nd.keys[i], next) {
				return false
			}
		}
		return true
	}
	if walk(l.root, l.height, nil, nil) {
		if nodes != l.nodes || pairs != l.pairs {
			problem("descriptor says %d nodes and %d keys, the tree has %d and %d", l.nodes, l.pairs, nodes, pairs)
		}
		// The allocator owes the level exactly the segments its tree uses.
		for _, s := range l.segs {
			if !reached[s.seg] {
				problem("segment %d is allocated to the level but no node of its tree is in it (leaked)", s.seg)
			}
		}
	}
	rep.Nodes += nodes
	rep.Pairs += pairs
}

// checkValue verifies that a leaf's value pointer lands on a record with
// the same key.
func (in *Inspector) checkValue(rep *CheckReport, id uint64, st *regionState, level int, logs map[uint64]*logSeg, key []byte, p uint64, vlen uint32) {
	seg, off := in.g.seg(p), in.g.off(p)
	ls, ok := logs[seg]
	if !ok {
		if in.shadowed(st, level, key) {
			rep.StaleShadowed++
			return
		}
		rep.add(Problem{Region: id, Level: level, What: fmt.Sprintf("key %q points to %s, not in the region's log (and no newer version shadows it)", key, in.PtrString(p))})
		return
	}
	n := int64(recordSize(len(key), int(vlen)))
	if off < segHeaderSize || off+n > in.g.segSize {
		rep.add(Problem{Region: id, Level: level, What: fmt.Sprintf("key %q: value pointer %s out of segment bounds", key, in.PtrString(p))})
		return
	}
	buf := make([]byte, n)
	if _, err := in.file.ReadAt(buf, in.g.filePtrOff(p)); err != nil {
		rep.add(Problem{Region: id, Level: level, What: fmt.Sprintf("key %q: read record at %s: %v", key, in.PtrString(p), err)})
		return
	}
	rec, ok := decodeRecord(buf, ls.recordSeq())
	if (!ok || !bytes.Equal(rec.Key, key)) && in.shadowed(st, level, key) {
		// GC freed the segment this old pointer named and the log reused
		// it; newer data hides the key, as reads see it.
		rep.StaleShadowed++
		return
	}
	switch {
	case !ok:
		rep.add(Problem{Region: id, Level: level, What: fmt.Sprintf("key %q: the log record at %s fails its checksum", key, in.PtrString(p))})
	case !bytes.Equal(rec.Key, key):
		rep.add(Problem{Region: id, Level: level, What: fmt.Sprintf("key %q: the log record at %s holds key %q", key, in.PtrString(p), rec.Key)})
	}
}

// shadowed reports whether a newer level or the log from the recovery
// point holds key.
func (in *Inspector) shadowed(st *regionState, level int, key []byte) bool {
	for _, n := range levelNumbers(st) {
		if n >= level {
			break
		}
		if _, found, err := in.lookup(st.levels[n], key); err == nil && found {
			return true
		}
	}
	found := false
	_ = in.Log(st.desc.ID, LogPosition{Index: st.rp >> in.g.shift, Offset: in.g.off(st.rp)}, func(r LogRecord) error {
		if bytes.Equal(r.Key, key) {
			found = true
			return errStop
		}
		return nil
	})
	return found
}

var errStop = errors.New("stop")

// lookup finds key in a level.
func (in *Inspector) lookup(l *levelDesc, key []byte) (NodeEntry, bool, error) {
	p := l.root
	for {
		nd, err := in.node(p)
		if err != nil {
			return NodeEntry{}, false, err
		}
		i, found := nd.search(key)
		if nd.leaf {
			if !found {
				return NodeEntry{}, false, nil
			}
			return NodeEntry{Key: key, Ptr: nd.ptrs[i], ValueLen: nd.vlens[i], Tombstone: nd.flags[i]&flagTombstone != 0}, true, nil
		}
		if i >= len(nd.ptrs) {
			return NodeEntry{}, false, nil
		}
		p = nd.ptrs[i]
	}
}

// Pair is one live key-value pair of a region's logical content.
type Pair struct {
	Key, Value []byte
}

// Content returns a region's logical content, sorted: the levels merged
// (newer levels win), then the log from the recovery point replayed on
// top (what recovery would rebuild as L0), tombstones removed. It holds
// the region's keys in memory.
func (in *Inspector) Content(region uint64) ([]Pair, error) {
	st, ok := in.states[region]
	if !ok {
		return nil, fmt.Errorf("engine: no region %d", region)
	}
	type val struct {
		ptr  uint64
		vlen uint32
		tomb bool
		v    []byte
		inV  bool
	}
	m := map[string]val{}
	ns := levelNumbers(st)
	for i := len(ns) - 1; i >= 0; i-- {
		err := in.Tree(region, ns[i], func(_ int, d NodeDump) error {
			if d.Leaf {
				for _, e := range d.Entries {
					m[string(e.Key)] = val{ptr: e.Ptr, vlen: e.ValueLen, tomb: e.Tombstone}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	err := in.Log(region, LogPosition{Index: st.rp >> in.g.shift, Offset: in.g.off(st.rp)}, func(r LogRecord) error {
		if r.Checkpoint { // the completion table, not a pair
			return nil
		}
		m[string(r.Key)] = val{tomb: r.Tombstone, v: append([]byte(nil), r.Value...), inV: true}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]Pair, 0, len(m))
	for k, v := range m {
		if v.tomb {
			continue
		}
		value := v.v
		if !v.inV {
			n := int64(recordSize(len(k), int(v.vlen)))
			if off := in.g.off(v.ptr); off < segHeaderSize || off+n > in.g.segSize {
				return nil, fmt.Errorf("%w: key %q: value pointer %s out of segment bounds", ErrCorrupt, k, in.PtrString(v.ptr))
			}
			buf := make([]byte, n)
			if _, err := in.file.ReadAt(buf, in.g.filePtrOff(v.ptr)); err != nil {
				return nil, fmt.Errorf("engine: key %q: read value at %s: %w", k, in.PtrString(v.ptr), err)
			}
			rec, ok := decodeRecord(buf, in.recSeqs[in.g.seg(v.ptr)])
			if !ok || string(rec.Key) != k {
				return nil, fmt.Errorf("%w: key %q: no matching log record at %s", ErrCorrupt, k, in.PtrString(v.ptr))
			}
			value = rec.Value
		}
		out = append(out, Pair{Key: []byte(k), Value: value})
	}
	sort.Slice(out, func(i, j int) bool { return bytes.Compare(out[i].Key, out[j].Key) < 0 })
	return out, nil
}

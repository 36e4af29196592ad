package engine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/cockroachdb/pebble/v2"
)

// regionState is a region's persisted metadata, as loaded at open.
type regionState struct {
	desc    RegionDesc
	hasDesc bool
	rp      uint64 // L0 recovery point: replay the log from this position
	logs    []*logSeg
	levels  map[int]*levelDesc
	backup  bool // a Send-Index backup region (role key "backup")
	// follower: an ordinary region that is a Build-Index backup's copy
	// (role key "follower", follower.go)
	follower bool
}

// usedSegments lists every segment the state references.
func (st *regionState) usedSegments() []segRef {
	var out []segRef
	for _, l := range st.logs {
		out = append(out, segRef{seg: l.seg, seq: l.seq})
	}
	for _, l := range st.levels {
		out = append(out, l.segs...)
	}
	return out
}

// writeAll adds the whole state to a batch (region creation).
func (st *regionState) writeAll(b *pebble.Batch) {
	id := st.desc.ID
	b.Set(regionKey(id, "desc"), st.desc.encode(), nil)
	b.Set(regionKey(id, "rp"), binary.LittleEndian.AppendUint64(nil, st.rp), nil)
	if st.backup {
		b.Set(regionKey(id, "role"), []byte(roleBackup), nil)
	}
	for _, l := range st.logs {
		b.Set(logKey(id, l.idx), l.encode(), nil)
	}
	for n, l := range st.levels {
		b.Set(levelKey(id, n), l.encode(), nil)
	}
}

// loadRegionStates reads every region's metadata.
func (v *Volume) loadRegionStates() (map[uint64]*regionState, error) {
	return v.loadStatesIn([]byte("r/"), []byte("r0"))
}

// loadRegionState reads one region's metadata.
func (v *Volume) loadRegionState(id uint64) (*regionState, error) {
	states, err := v.loadStatesIn(regionKey(id, ""), append(regionPrefix(id), '/'+1))
	if err != nil {
		return nil, err
	}
	st, ok := states[id]
	if !ok {
		return nil, fmt.Errorf("%w: region %d has no metadata", ErrCorrupt, id)
	}
	return st, nil
}

// loadStatesIn reads the metadata of the regions whose keys lie in
// [lower, upper).
func (v *Volume) loadStatesIn(lower, upper []byte) (map[uint64]*regionState, error) {
	it, err := v.meta.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("engine: read metadata: %w", err)
	}
	defer it.Close()
	states := map[uint64]*regionState{}
	for it.First(); it.Valid(); it.Next() {
		k, val := it.Key(), it.Value()
		if len(k) < 11 || k[10] != '/' {
			return nil, fmt.Errorf("%w: metadata key %q", ErrCorrupt, k)
		}
		id := binary.BigEndian.Uint64(k[2:10])
		st := states[id]
		if st == nil {
			st = &regionState{levels: map[int]*levelDesc{}}
			states[id] = st
		}
		suffix := k[11:]
		switch {
		case bytes.Equal(suffix, []byte("desc")):
			if st.desc, err = decodeRegionDesc(val); err != nil {
				return nil, err
			}
			st.hasDesc = true
		case bytes.Equal(suffix, []byte("rp")):
			if len(val) != 8 {
				return nil, fmt.Errorf("%w: region %d recovery point", ErrCorrupt, id)
			}
			st.rp = binary.LittleEndian.Uint64(val)
		case bytes.Equal(suffix, []byte("role")):
			switch string(val) {
			case roleBackup:
				st.backup = true
			case roleFollower:
				st.follower = true
			default:
				return nil, fmt.Errorf("%w: region %d role %q", ErrCorrupt, id, val)
			}
		case bytes.HasPrefix(suffix, []byte("log/")) && len(suffix) == 12:
			ls, err := decodeLogSeg(binary.BigEndian.Uint64(suffix[4:]), val)
			if err != nil {
				return nil, err
			}
			st.logs = append(st.logs, &ls)
		case bytes.HasPrefix(suffix, []byte("lvl/")) && len(suffix) == 12:
			l, err := decodeLevelDesc(val)
			if err != nil {
				return nil, err
			}
			st.levels[int(binary.BigEndian.Uint64(suffix[4:]))] = l
		default:
			return nil, fmt.Errorf("%w: metadata key %q", ErrCorrupt, k)
		}
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("engine: read metadata: %w", err)
	}
	for id, st := range states {
		if !st.hasDesc || st.desc.ID != id || (len(st.logs) == 0 && !st.backup) {
			return nil, fmt.Errorf("%w: region %d metadata incomplete", ErrCorrupt, id)
		}
		sort.Slice(st.logs, func(i, j int) bool { return st.logs[i].idx < st.logs[j].idx })
		if err := st.validate(v.g); err != nil {
			return nil, fmt.Errorf("region %d: %w", id, err)
		}
	}
	return states, nil
}

// validate checks the loaded metadata against the volume's geometry, so
// that recovery never indexes past a segment.
func (st *regionState) validate(g geometry) error {
	for _, l := range st.logs {
		if l.seg == 0 || l.seq == 0 || (l.end != 0 && (l.end < segHeaderSize || l.end >= g.segSize)) {
			return fmt.Errorf("%w: log segment %d (index %d, end %d) out of bounds", ErrCorrupt, l.seg, l.idx, l.end)
		}
	}
	if off := int64(st.rp & (uint64(g.segSize) - 1)); off < segHeaderSize {
		return fmt.Errorf("%w: recovery point offset %d inside a segment header", ErrCorrupt, off)
	}
	if len(st.logs) > 0 {
		if rpIdx, tail := st.rp>>g.shift, st.logs[len(st.logs)-1].idx; rpIdx > tail {
			return fmt.Errorf("%w: recovery point in log index %d beyond the tail %d", ErrCorrupt, rpIdx, tail)
		}
	}
	for i := 1; i < len(st.logs); i++ {
		if st.logs[i].idx == st.logs[i-1].idx {
			return fmt.Errorf("%w: log index %d twice", ErrCorrupt, st.logs[i].idx)
		}
	}
	for n, l := range st.levels {
		if n < 1 || l.root == 0 || len(l.segs) == 0 {
			return fmt.Errorf("%w: level %d descriptor", ErrCorrupt, n)
		}
		for _, s := range l.segs {
			if s.seg == 0 || s.seq == 0 {
				return fmt.Errorf("%w: level %d segment %d", ErrCorrupt, n, s.seg)
			}
		}
	}
	return nil
}

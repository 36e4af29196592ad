package replication

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

var (
	// ErrUnmapped: a pointer names a segment the map does not translate.
	ErrUnmapped = errors.New("replication: pointer into an unmapped segment")
	// ErrConflict: a segment is mapped twice to different targets, or two
	// segments to one target.
	ErrConflict = errors.New("replication: conflicting segment mapping")
	// ErrBadEncoding: an encoded map does not decode.
	ErrBadEncoding = errors.New("replication: malformed segment map")
)

// SegMap maps the primary's segment numbers to this server's. The log map
// and the index map are both SegMaps.
type SegMap struct {
	to   map[uint64]uint64
	from map[uint64]uint64 // reverse, to refuse two sources for one target
}

// NewSegMap returns an empty map.
func NewSegMap() *SegMap { return &SegMap{to: map[uint64]uint64{}, from: map[uint64]uint64{}} }

// Add records primary -> local. Adding the same pair again is a no-op;
// anything else that contradicts the map is ErrConflict.
func (m *SegMap) Add(primary, local uint64) error {
	if primary == 0 || local == 0 {
		return fmt.Errorf("%w: segment 0 (%d -> %d)", ErrConflict, primary, local)
	}
	if cur, ok := m.to[primary]; ok {
		if cur == local {
			return nil
		}
		return fmt.Errorf("%w: primary segment %d maps to %d, not %d", ErrConflict, primary, cur, local)
	}
	if src, ok := m.from[local]; ok {
		return fmt.Errorf("%w: local segment %d already holds primary segment %d", ErrConflict, local, src)
	}
	m.to[primary], m.from[local] = local, primary
	return nil
}

// Remove forgets primary's mapping (its segment was freed).
func (m *SegMap) Remove(primary uint64) {
	if local, ok := m.to[primary]; ok {
		delete(m.to, primary)
		delete(m.from, local)
	}
}

// Lookup translates a primary segment number.
func (m *SegMap) Lookup(primary uint64) (uint64, bool) {
	l, ok := m.to[primary]
	return l, ok
}

// Len is the number of mappings.
func (m *SegMap) Len() int { return len(m.to) }

// Encode serializes the map (count u32, then primary u64, local u64 pairs
// sorted by primary; little-endian): what a backup persists so that it
// still translates after a restart.
func (m *SegMap) Encode() []byte {
	keys := make([]uint64, 0, len(m.to))
	for k := range m.to {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+16*len(keys)), uint32(len(keys)))
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint64(b, k)
		b = binary.LittleEndian.AppendUint64(b, m.to[k])
	}
	return b
}

// DecodeSegMap parses what Encode wrote.
func DecodeSegMap(b []byte) (*SegMap, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadEncoding, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(len(b)-4) != uint64(n)*16 {
		return nil, fmt.Errorf("%w: %d pairs in %d bytes", ErrBadEncoding, n, len(b))
	}
	m := NewSegMap()
	for i := range int(n) {
		o := 4 + 16*i
		if err := m.Add(binary.LittleEndian.Uint64(b[o:]), binary.LittleEndian.Uint64(b[o+8:])); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadEncoding, err)
		}
	}
	return m, nil
}

package replication

import (
	"errors"
	"fmt"
)

var (
	// ErrUnmapped: a pointer names a segment the map does not translate.
	ErrUnmapped = errors.New("replication: pointer into an unmapped segment")
	// ErrConflict: a segment is mapped twice to different targets, or two
	// segments to one target.
	ErrConflict = errors.New("replication: conflicting segment mapping")
)

// SegMap maps the primary's segment numbers to this server's. A
// Translator reads two: the index map of the compaction being received
// (the Replica's, in memory, dropped once the level is installed) and a
// copy of the backup's log map. The log map itself is the engine.Backup's:
// persisted in its adopted log segments' descriptors, changed only through
// it (AdoptLog, DropLog, RebaseLog, ResetBackup), and copied into a SegMap
// per command (engine.Backup.LogMap). A SegMap is not safe for concurrent
// use.
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

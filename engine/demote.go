package engine

import (
	"fmt"
)

// DemoteRegion turns primary region id into an empty Send-Index backup
// region at epoch (the server was failed over while it was away, and the
// region's new primary will seed it): in one metadata commit its log and
// levels leave the region, the backup role is set, the recovery point
// returns to the start and the descriptor takes the epoch. The old
// *Region handle is closed first (its background work stops; every later
// call returns ErrClosed); its segments are freed after the commit, once
// reads in progress on the old handle are done. The volume then holds the
// new *Backup, which is returned. Refusals change nothing: ErrBadOptions
// for an unknown region or an epoch not newer than the region's,
// ErrBackupRegion for a backup. Safe for concurrent use.
func (v *Volume) DemoteRegion(id uint64, epoch uint64) (*Backup, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, err := roleChangeLocked[*Region](v, id, epoch, "demotion")
	if err != nil {
		return nil, err
	}
	if err := old.close(); err != nil {
		v.log.Warn("closing the demoted region's log failed (its data is dropped anyway)")
	}
	old.metaMu.Lock()
	defer old.metaMu.Unlock()
	st, err := v.loadRegionState(id)
	if err != nil {
		return nil, err
	}
	b := v.meta.NewBatch()
	for _, ls := range st.logs {
		b.Delete(logKey(id, ls.idx), nil)
	}
	for n := range st.levels {
		b.Delete(levelKey(id, n), nil)
	}
	desc := old.desc
	desc.Epoch = epoch
	ns := &regionState{desc: desc, rp: segHeaderSize, backup: true}
	ns.writeAll(b)
	if err := v.commit(b); err != nil {
		return nil, fmt.Errorf("engine: demote region %d: %w", id, err)
	}
	var free []uint64
	for _, s := range st.usedSegments() {
		free = append(free, s.seg)
	}
	// Freed once the old handle's readers are done with its last version.
	old.mu.Lock()
	old.installLocked(&version{levels: []*levelDesc{nil}}, func() { v.alloc.release(free...) })
	old.mu.Unlock()
	nr := rebuildBackup(v, ns)
	v.regions[id] = nr
	return nr, nil
}

// roleChangeLocked finds region id for a role change to epoch, which must
// be newer than its own: a promotion (H *Backup) or a demotion (H
// *Region). A region in the other role is ErrBackupRegion. Called with
// v.mu held.
func roleChangeLocked[H handle](v *Volume, id, epoch uint64, what string) (H, error) {
	var none H
	if v.closed.Load() {
		return none, ErrClosed
	}
	h, ok := v.regions[id]
	if !ok {
		return none, fmt.Errorf("%w: no region %d", ErrBadOptions, id)
	}
	old, ok := h.(H)
	_, isBackup := h.(*Backup)
	switch {
	case !ok && isBackup:
		return none, fmt.Errorf("%w: region %d is a backup already", ErrBackupRegion, id)
	case !ok:
		return none, fmt.Errorf("%w: region %d is not a backup", ErrBackupRegion, id)
	case epoch <= old.core().desc.Epoch:
		return none, fmt.Errorf("%w: %s of region %d to epoch %d, not newer than its epoch %d", ErrBadOptions, what, id, epoch, old.core().desc.Epoch)
	}
	return old, nil
}

package engine

import "fmt"

// Followers. A Build-Index backup keeps an ordinary region (it indexes its
// primary's records with its own writes), so nothing in the region itself
// says that it is a copy of another server's region rather than the
// server's own. The difference matters after a restart: a copy's newest
// records were in its replication buffer, which the restart lost, so it may
// lack writes its primary acknowledged and must not be served as a primary
// without the group's say. The role key records it ("follower", beside
// "backup" for a Send-Index backup region).

const roleFollower = "follower"

// SetFollower marks the ordinary region id as a follower's copy (on) or
// as the server's own again (off), in one synced metadata commit. A
// Send-Index backup region (a *Backup) is refused (ErrBackupRegion: its
// role says so already), an unknown region too (ErrBadOptions), and any
// call after Close (ErrClosed).
func (v *Volume) SetFollower(id uint64, on bool) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed.Load() {
		return ErrClosed
	}
	h, ok := v.regions[id]
	if !ok {
		return fmt.Errorf("%w: no region %d", ErrBadOptions, id)
	}
	r, ok := h.(*Region)
	if !ok {
		return fmt.Errorf("%w: region %d is a backup", ErrBackupRegion, id)
	}
	if r.follower.Load() == on {
		return nil
	}
	b := v.meta.NewBatch()
	if on {
		b.Set(regionKey(id, "role"), []byte(roleFollower), nil)
	} else {
		b.Delete(regionKey(id, "role"), nil)
	}
	if err := v.commit(b); err != nil {
		return err
	}
	r.follower.Store(on)
	return nil
}

// IsCopy reports whether region id holds a copy of another server's
// region rather than its own: a Send-Index backup region, or an ordinary
// region marked a follower (SetFollower). ErrBadOptions for an unknown
// region, ErrClosed after Close.
func (v *Volume) IsCopy(id uint64) (bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed.Load() {
		return false, ErrClosed
	}
	switch h := v.regions[id].(type) {
	case *Backup:
		return true, nil
	case *Region:
		return h.follower.Load(), nil
	}
	return false, fmt.Errorf("%w: no region %d", ErrBadOptions, id)
}

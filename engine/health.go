package engine

import (
	"errors"
	"fmt"
	"time"
)

// A volume's disk can fail in two ways (docs/operations.md, "Full or
// failing disks"):
//
//   - No space (ErrNoSpace alone): a segment could not be allocated (the
//     volume's capacity, a full file system, or the space reserve). Nothing
//     was stored and nothing is poisoned: the write that needed the
//     segment fails, a compaction that needed one is retried (every
//     spaceRetry, and at once when ProbeSpace finds room) and meanwhile a
//     write that would wait for it fails too (a full L0 refuses instead of
//     stalling). Once space returns, writes succeed again.
//   - Failed (ErrVolumeFailed, ErrMetadataFailed): a write or sync of the
//     log, the segment file or the metadata store failed. What depends on
//     it is refused until the volume is reopened (a restart), which
//     recovers from what is on disk: in sync mode every acknowledged write.
//
// Reads go on in both states: of levels, and of L0 records that were
// durable (sync mode) or replicated before the failure.

// spaceRetry is how often a compaction that found no space tries again.
const spaceRetry = time.Second

// probeSegments is how many segments a capped volume (MaxSegments) must
// have free for ProbeSpace to report room again.
const probeSegments = 2

// Health reports whether the volume stores writes: nil; an error wrapping
// ErrVolumeFailed or ErrMetadataFailed once a write or sync failed (until
// the volume is reopened); or an error wrapping ErrNoSpace while the last
// allocation that failed for want of space has not been followed by a
// ProbeSpace that found room.
func (v *Volume) Health() error {
	if err := v.failure(); err != nil {
		return err
	}
	if p := v.noSpace.Load(); p != nil {
		return *p
	}
	return nil
}

// failure is the first permanent failure of the volume or a region.
func (v *Volume) failure() error {
	if f := v.metaFailed.Load(); f != nil {
		return *f
	}
	if f := v.syncFailed.Load(); f != nil {
		return *f
	}
	for _, r := range v.cores() {
		if err := r.failure(); err != nil {
			return err
		}
	}
	return nil
}

// failure is the region's permanent failure: its log's, or its
// background work's.
func (r *regionCore) failure() error {
	if r.log != nil {
		if err := r.log.failedErr(); err != nil {
			return err
		}
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.bgErr
}

// failedErr is the log's sticky failure, if any.
func (l *vlog) failedErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// ProbeSpace checks that the volume has room to grow again: free
// segments or room in the segment file for a growth step's worth of
// segments (a capped volume: at least probeSegments, and at most what its
// cap leaves), or else a growth step it makes now (so the probe is the
// operation that failed: growing the file, with the space reserve kept). On success it clears the no-space state of Health
// and wakes the compactions waiting for space; otherwise it returns an
// error wrapping ErrNoSpace. A failed volume returns its failure: space
// cannot help it.
func (v *Volume) ProbeSpace() error {
	if v.closed.Load() {
		return ErrClosed
	}
	if err := v.failure(); err != nil {
		return err
	}
	if err := v.probeRoom(); err != nil {
		v.setNoSpace(err)
		return err
	}
	if v.noSpace.Swap(nil) != nil {
		// Writes wait for the compactions again (instead of failing with
		// their last error), which try again now.
		for _, r := range v.cores() {
			r.setSpaceErr(nil)
		}
		v.spaceMu.Lock()
		close(v.spaceBack)
		v.spaceBack = make(chan struct{})
		v.spaceMu.Unlock()
	}
	return nil
}

// spaceReturned is closed when ProbeSpace next finds room after a
// shortage.
func (v *Volume) spaceReturned() <-chan struct{} {
	v.spaceMu.Lock()
	defer v.spaceMu.Unlock()
	return v.spaceBack
}

func (v *Volume) probeRoom() error {
	a := v.alloc
	a.mu.RLock()
	free, hw, capacity := int64(len(a.free)), int64(a.hw), a.max
	a.mu.RUnlock()
	need := max(v.chunk/v.g.segSize, 1) // a growth step's worth
	if capacity > 0 {
		avail := free + capacity - hw
		if avail < probeSegments {
			return fmt.Errorf("%w: %d of %d segments free", ErrNoSpace, avail, capacity)
		}
		need = min(need, avail)
	}
	v.growMu.Lock()
	defer v.growMu.Unlock()
	room := (v.extent - v.g.fileOff(uint64(hw))) / v.g.segSize
	if free+max(room, 0) >= need {
		return nil
	}
	return v.growLocked(v.chunk)
}

// spaceShort reports whether err is a want of space that left nothing
// half done (a retry succeeds once space returns): ErrNoSpace, on a volume
// with no permanent failure.
func (v *Volume) spaceShort(err error) bool {
	return transientNoSpace(err) && v.failure() == nil
}

// spaceShortLocked is spaceShort for a caller holding r.mu (it does not
// look at other regions: their failures do not make this one's
// allocation failure permanent).
func (r *regionCore) spaceShortLocked(err error) bool {
	return transientNoSpace(err) && r.v.metaFailed.Load() == nil && r.v.syncFailed.Load() == nil &&
		r.log.failedErr() == nil && r.bgErr == nil
}

func transientNoSpace(err error) bool {
	return errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrVolumeFailed) && !errors.Is(err, ErrMetadataFailed)
}

// setSpaceErr records (err) or clears (nil) a compaction's want of
// space, waking writers and waiters.
func (r *regionCore) setSpaceErr(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && r.spaceErr == nil {
		return
	}
	r.spaceErr = err
	r.memCond.Broadcast()
}

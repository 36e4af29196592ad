package replication

import (
	"errors"
	"fmt"

	"github.com/tebis-go/tebis/engine"
)

// ErrTooFewCopies: fewer copies of the region's writes than its minimum
// (the region map's min_copies) can be made; the region refuses writes
// (reads go on) until its group has enough backups again.
var ErrTooFewCopies = errors.New("replication: too few copies")

// Copies of a write. A write is acknowledged only once at least MinCopies
// copies hold it, the primary counted: the primary (its log, in memory in
// async mode) plus every backup of the stream, not joining, whose WRITE of
// the record completed. A joining backup counts as none: it is never
// promoted. When the primary is the only copy its record must also be on
// its disk before the acknowledgement (fdatasync, as in sync mode): a
// write a lone primary acknowledged survives that primary's crash.

// ackRule decides, for a write held by the primary and by backups other
// copies in the stream, whether it may be acknowledged (err: refused,
// wrapping ErrTooFewCopies with how many copies it has and needs) and
// whether the primary must make it durable first (sync).
func ackRule(backups, minCopies int) (sync bool, err error) {
	minCopies = max(minCopies, 1)
	if have := 1 + backups; have < minCopies {
		return false, fmt.Errorf("%w: %d of the %d copies a write needs (min_copies)", ErrTooFewCopies, have, minCopies)
	}
	return backups == 0, nil
}

// Alone is the replicator of a primary with no backup in a stream (its
// group is empty, or has only joining backups not yet attached): every
// write is made durable on the primary before its acknowledgement, whatever
// the region's sync mode, and with MinCopies above 1 every write is
// refused (ErrTooFewCopies) while reads go on. It implements
// engine.Replicator and engine.WriteGate.
type Alone struct {
	Region    *engine.Region
	MinCopies int
	// Unsafe acknowledges as the region's sync mode says, without the
	// lone primary's own fdatasync: in async mode a write is acknowledged
	// from memory and the primary's crash loses it. It exists to measure
	// the paper's No-Replication (a benchmark's baseline), never to serve
	// data anyone needs.
	Unsafe bool
}

// WaitReplicated makes the log durable up to pos: the primary is the only
// copy (Unsafe: returns at once).
func (a *Alone) WaitReplicated(pos uint64) error {
	if a.Unsafe {
		return nil
	}
	return a.Region.SyncTo(pos)
}

// Replicated reports whether the log is durable up to pos (Unsafe:
// always true) (engine.ReplicatedProbe).
func (a *Alone) Replicated(pos uint64) bool { return a.Unsafe || a.Region.Synced(pos) }

// Waits reports whether a write waits for the primary's fdatasync: not
// when Unsafe (engine.Waiter).
func (a *Alone) Waits() bool { return !a.Unsafe }

// AdmitWrite refuses every write when MinCopies is above 1.
func (a *Alone) AdmitWrite() error {
	_, err := ackRule(0, a.MinCopies)
	return err
}

// WaitAcknowledged is AdmitWrite's rule, then WaitReplicated.
func (a *Alone) WaitAcknowledged(pos uint64) error {
	if err := a.AdmitWrite(); err != nil {
		return err
	}
	return a.WaitReplicated(pos)
}

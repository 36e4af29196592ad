package engine

import "errors"

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrNotFound is returned by Get for a key that is absent or deleted.
	ErrNotFound = errors.New("engine: key not found")
	// ErrClosed is returned by every operation after Close.
	ErrClosed = errors.New("engine: closed")
	// ErrCorrupt reports a checksum or structure failure read from the
	// device. The wrapping error names the segment and offset.
	ErrCorrupt = errors.New("engine: corrupt data")
	// ErrEmptyKey is returned for a zero-length key.
	ErrEmptyKey = errors.New("engine: empty key")
	// ErrKeyTooLarge is returned for a key longer than MaxKeySize.
	ErrKeyTooLarge = errors.New("engine: key too large")
	// ErrValueTooLarge is returned for a value longer than the volume's
	// maximum value size (see Volume.MaxValueSize).
	ErrValueTooLarge = errors.New("engine: value too large")
	// ErrNoSpace is returned when the volume has no free segment (its
	// capacity is reached) or the file system reports that it is full,
	// or growing the segment file would leave less than
	// Options.SpaceReserve free. Alone (not with ErrVolumeFailed) it is
	// transient: nothing was stored, nothing is poisoned, and the same
	// write succeeds once space returns (Volume.Health, ProbeSpace).
	ErrNoSpace = errors.New("engine: no space left on volume")
	// ErrVolumeFailed wraps a write or sync of the volume that failed in a
	// way only a reopen recovers from (an I/O error, or ENOSPC from an
	// fdatasync or a write the engine cannot redo): the region's log, or
	// the whole volume after a failed fdatasync, refuses what depends on it
	// from then on. The device's error is wrapped too.
	ErrVolumeFailed = errors.New("engine: volume failed (reopen it)")
	// ErrRegionExists is returned by CreateRegion for a used region id.
	ErrRegionExists = errors.New("engine: region exists")
	// ErrOutOfRange is returned for a key outside the region's key range.
	ErrOutOfRange = errors.New("engine: key outside region range")
	// ErrMetadataFailed is returned once the metadata store failed a write:
	// the volume refuses further metadata changes until it is reopened.
	ErrMetadataFailed = errors.New("engine: metadata store failed")
	// ErrBadOptions is returned by Open for inconsistent options.
	ErrBadOptions = errors.New("engine: bad options")
	// ErrBadRequestID: a write's RequestID is malformed (Seq 0, or Ack
	// above Seq).
	ErrBadRequestID = errors.New("engine: bad request id")
	// ErrStaleRequest: a write's sequence number is below what its client
	// acknowledged as complete; the region neither applies it nor knows its
	// outcome (the client promised never to send it again).
	ErrStaleRequest = errors.New("engine: stale request")
)

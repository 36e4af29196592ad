package engine

import (
	"sync/atomic"
	"time"
)

// IOCategory names what a device access was for.
type IOCategory int

// The categories device bytes are split by.
const (
	// IOLog: value-log appends and log replay at recovery.
	IOLog IOCategory = iota
	// IOCompaction: reading source levels and writing the new level.
	IOCompaction
	// IOIndex: reads of nodes and values on the Get/Scan path.
	IOIndex
	// IOGC: value-log GC reads (re-appends are counted as IOLog).
	IOGC
	// IOMeta: the pebble metadata store.
	IOMeta
	numIOCategories
)

func (c IOCategory) String() string {
	switch c {
	case IOLog:
		return "log"
	case IOCompaction:
		return "compaction"
	case IOIndex:
		return "index"
	case IOGC:
		return "gc"
	case IOMeta:
		return "meta"
	}
	return "unknown"
}

// Stats is a snapshot of a volume's counters. Byte counts are exact counts
// of bytes passed to the file system.
type Stats struct {
	BytesRead    [numIOCategories]uint64
	BytesWritten [numIOCategories]uint64
	Compactions  uint64
	// LevelMoves counts compactions done by moving a level down without
	// rewriting it (empty destination).
	LevelMoves uint64
	// Syncs counts fdatasync calls on the segment file.
	Syncs       uint64
	GCRuns      uint64
	GCRelocated uint64 // bytes of live records re-appended by GC
	GCFreed     uint64 // log segments freed by GC
	StallTime   time.Duration
	// LogSeals counts log segments that filled and were sealed (the tail
	// switched to the next segment); a partial flush before an L0
	// compaction is not a seal.
	LogSeals uint64
	// SealWaits counts writes (and L0 freezes) that waited, without the
	// region's lock, for the listener's SealGate before sealing the tail:
	// replication's flow control at a segment switch.
	SealWaits uint64
	// IndexSegmentsBuilt counts index segments written by this volume's
	// compactions (each is shipped to Send-Index backups as it is built).
	IndexSegmentsBuilt uint64
	// DirectBytesWritten counts the bytes of BytesWritten that replicas
	// wrote past the page cache (Options.BufferedReplicaWrites).
	DirectBytesWritten uint64
	SegmentsUsed       int64
	SegmentsFree       int64
}

// TotalRead is the sum of BytesRead over all categories.
func (s Stats) TotalRead() uint64 {
	var t uint64
	for _, b := range s.BytesRead {
		t += b
	}
	return t
}

// TotalWritten is the sum of BytesWritten over all categories.
func (s Stats) TotalWritten() uint64 {
	var t uint64
	for _, b := range s.BytesWritten {
		t += b
	}
	return t
}

// counters are the live, atomically updated counters behind Stats.
type counters struct {
	read        [numIOCategories]atomic.Uint64
	written     [numIOCategories]atomic.Uint64
	compactions atomic.Uint64
	levelMoves  atomic.Uint64
	syncs       atomic.Uint64
	gcRuns      atomic.Uint64
	gcRelocated atomic.Uint64
	gcFreed     atomic.Uint64
	stallNanos  atomic.Int64
	logSeals    atomic.Uint64
	sealWaits   atomic.Uint64
	segsBuilt   atomic.Uint64
	direct      atomic.Uint64
}

func (c *counters) snapshot() Stats {
	var s Stats
	for i := range s.BytesRead {
		s.BytesRead[i] = c.read[i].Load()
		s.BytesWritten[i] = c.written[i].Load()
	}
	s.Compactions = c.compactions.Load()
	s.LevelMoves = c.levelMoves.Load()
	s.Syncs = c.syncs.Load()
	s.GCRuns = c.gcRuns.Load()
	s.GCRelocated = c.gcRelocated.Load()
	s.GCFreed = c.gcFreed.Load()
	s.StallTime = time.Duration(c.stallNanos.Load())
	s.LogSeals = c.logSeals.Load()
	s.SealWaits = c.sealWaits.Load()
	s.IndexSegmentsBuilt = c.segsBuilt.Load()
	s.DirectBytesWritten = c.direct.Load()
	return s
}

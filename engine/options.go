package engine

import (
	"fmt"
	"math/bits"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap"
)

// SyncMode selects when a write is acknowledged.
type SyncMode int

const (
	// SyncModeSync acknowledges a write after its log record is on stable
	// storage. Concurrent writers share one fdatasync (group commit).
	SyncModeSync SyncMode = iota
	// SyncModeAsync acknowledges a write once its record is in the log
	// buffer; Region.Sync makes it durable.
	SyncModeAsync
)

func (m SyncMode) String() string {
	if m == SyncModeAsync {
		return "async"
	}
	return "sync"
}

// ParseSyncMode parses "sync" or "async".
func ParseSyncMode(s string) (SyncMode, error) {
	switch s {
	case "sync":
		return SyncModeSync, nil
	case "async":
		return SyncModeAsync, nil
	}
	return 0, fmt.Errorf("%w: sync mode %q (want sync or async)", ErrBadOptions, s)
}

// Documented limits.
const (
	// DefaultSegmentSize is the paper's segment size: 2 MiB.
	DefaultSegmentSize = 2 << 20
	// DefaultNodeSize is the size of every B+tree node.
	DefaultNodeSize = 4096
	// MaxKeySize is the largest key accepted, in bytes.
	MaxKeySize = 1024
	// MaxValueSize is the largest value accepted on a volume with the
	// default segment size; smaller segments lower it (Volume.MaxValueSize).
	MaxValueSize = 1 << 20
	// DefaultSpaceReserve is Options.SpaceReserve's default: 16 MiB.
	DefaultSpaceReserve = 16 << 20
	// DefaultLogPrepareAhead is Options.LogPrepareAhead's default.
	DefaultLogPrepareAhead = 4
)

// Options configure a volume and the regions it hosts. The zero value of
// every field but FS and Dir means "the default".
type Options struct {
	// FS is the file system every engine file goes through. Default: vfs.Default.
	FS vfs.FS
	// Dir is the volume's data directory. Required.
	Dir string
	// SegmentSize is the size of a segment: a power of two between 64 KiB
	// and 1 GiB. Fixed when the volume is created. Default 2 MiB.
	SegmentSize int64
	// NodeSize is the size of a B+tree node, a power of two between 4 KiB
	// and 32 KiB. Fixed when the volume is created. Default 4 KiB.
	NodeSize int
	// MaxSegments caps the volume at this many segments (a device's size);
	// 0 means unlimited (the file system's own limit applies).
	MaxSegments int64
	// SpaceReserve is how much free space the file system must keep after
	// the segment file grows: growing that would leave less fails with
	// ErrNoSpace (transient) instead, so that the metadata store, whose
	// failed writes are fatal to the volume (ErrMetadataFailed), still
	// has room to commit while the segment file cannot grow. Checked when
	// the file system reports its free space (vfs.FS.GetDiskUsage).
	// Default DefaultSpaceReserve; negative: no reserve.
	SpaceReserve int64
	// GrowStep is how far the segment file grows at a time (a file system
	// allocation: later writes and their fdatasync need no size update).
	// Default 32 MiB; at least one segment.
	GrowStep int64
	// L0Pairs is the capacity of L0 in key-value pairs. Default 96K.
	L0Pairs int
	// L0Bytes, if positive, also caps L0 by the bytes of keys and values.
	L0Bytes int64
	// GrowthFactor f: level i holds up to L0Pairs*f^i pairs. Default 4.
	GrowthFactor int
	// SyncMode selects when writes are acknowledged. Default SyncModeSync.
	SyncMode SyncMode
	// LogPrepareAhead is how many log segments a region keeps prepared
	// ahead of its tail (allocated, header synced, named in the metadata).
	// Once at most one is left, the preparer prepares the rest in one
	// batch, one fdatasync and one metadata commit for all, so a region
	// writing fast pays for preparation once per several segments and
	// its switches do not wait for it. Segments beyond the first are
	// taken only out of room the volume already has (docs/format.md).
	// Default DefaultLogPrepareAhead; 1 prepares one segment at a time.
	LogPrepareAhead int
	// HoldBackground keeps every region's background work (compaction,
	// GC, log preparation and group commit) stopped until Region.Resume:
	// a replicating server attaches its backups first, so that no
	// compaction escapes them.
	HoldBackground bool
	// CacheBytes is the node cache's budget. Default 64 MiB; negative
	// disables the cache.
	CacheBytes int64
	// GCGarbageRatio is the fraction of garbage at which a sealed log
	// segment becomes a GC candidate. Default 0.5.
	GCGarbageRatio float64
	// GCInterval is how often the background GC looks for candidates;
	// negative disables automatic GC (Region.GC still works). Default 10s.
	GCInterval time.Duration
	// CompactionBypassCache keeps compactions out of the OS page cache, as
	// Kreon's direct I/O does: the segments a compaction (or a backup's
	// rewrite of shipped ones) writes are written back and dropped from
	// the cache, and what a merge reads is dropped after it; the file gets
	// no kernel readahead (it would cache what follows a merge's reads).
	// Reads of levels then go to the device unless the engine's own node
	// cache holds them; merges read their inputs' leaves and leaves'
	// parents a segment at a time, lookups a node at a time. Best effort
	// (fadvise; no effect on an in-memory FS but the merges' reads).
	CompactionBypassCache bool
	// BufferedReplicaWrites writes replicas' data through the OS page
	// cache like a primary's. By default a Send-Index backup's log and
	// index segments and a Build-Index backup's (a follower's) log and
	// levels are written with direct I/O (O_DIRECT), in whole 4 KiB
	// blocks: replicas' data is read only after a promotion (and in a
	// follower's merges and GC), so it neither takes the page cache from
	// the data primaries serve nor pays a copy into it. Writes are
	// buffered whatever this says where the file system refuses O_DIRECT,
	// with segments under 2 MiB or pages other than 4 KiB (OpenOSDirect),
	// or on an FS other than the OS's that is no DirectOpener.
	// Durability is unchanged: the same fdatasync calls make either kind
	// durable.
	BufferedReplicaWrites bool
	// RequestRetention is how long a region keeps a client's write
	// outcomes (its completion table row) after it last saw the client:
	// a retry of a write older than that is applied again. It must exceed
	// the clients' retry window (client.MaxRetryWindow). Default
	// DefaultRequestRetention.
	RequestRetention time.Duration
	// Logger receives the engine's logs. Default: zap.NewNop().
	Logger *zap.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, fmt.Errorf("%w: Dir is required", ErrBadOptions)
	}
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.NodeSize == 0 {
		o.NodeSize = DefaultNodeSize
	}
	if err := checkGeometry(o.SegmentSize, o.NodeSize); err != nil {
		return o, err
	}
	if o.L0Pairs == 0 {
		o.L0Pairs = 96 * 1024
	}
	if o.L0Pairs < 2 {
		return o, fmt.Errorf("%w: L0Pairs %d < 2", ErrBadOptions, o.L0Pairs)
	}
	if o.GrowthFactor == 0 {
		o.GrowthFactor = 4
	}
	if o.GrowthFactor < 2 {
		return o, fmt.Errorf("%w: growth factor %d < 2", ErrBadOptions, o.GrowthFactor)
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = 64 << 20
	}
	if o.GCGarbageRatio == 0 {
		o.GCGarbageRatio = 0.5
	}
	if o.LogPrepareAhead == 0 {
		o.LogPrepareAhead = DefaultLogPrepareAhead
	}
	if o.LogPrepareAhead < 1 || o.LogPrepareAhead > maxLogPrepareAhead {
		return o, fmt.Errorf("%w: LogPrepareAhead %d outside [1,%d]", ErrBadOptions, o.LogPrepareAhead, maxLogPrepareAhead)
	}
	if o.GCGarbageRatio < 0 || o.GCGarbageRatio > 1 {
		return o, fmt.Errorf("%w: GC garbage ratio %v outside [0,1]", ErrBadOptions, o.GCGarbageRatio)
	}
	if o.GCInterval == 0 {
		o.GCInterval = 10 * time.Second
	}
	if o.RequestRetention == 0 {
		o.RequestRetention = DefaultRequestRetention
	}
	if o.RequestRetention < 0 {
		return o, fmt.Errorf("%w: request retention %v is negative", ErrBadOptions, o.RequestRetention)
	}
	if o.GrowStep == 0 {
		o.GrowStep = growChunk
	}
	o.GrowStep = max(o.GrowStep, o.SegmentSize)
	if o.SpaceReserve == 0 {
		o.SpaceReserve = DefaultSpaceReserve
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o, nil
}

// checkGeometry validates a segment and node size pair.
func checkGeometry(segSize int64, nodeSize int) error {
	if segSize < 64<<10 || segSize > 1<<30 || bits.OnesCount64(uint64(segSize)) != 1 {
		return fmt.Errorf("%w: segment size %d is not a power of two in [64 KiB, 1 GiB]", ErrBadOptions, segSize)
	}
	if nodeSize < 4096 || nodeSize > 32<<10 || bits.OnesCount(uint(nodeSize)) != 1 || int64(nodeSize)*8 > segSize {
		return fmt.Errorf("%w: node size %d is not a power of two in [4 KiB, 32 KiB] and at most 1/8 of a segment", ErrBadOptions, nodeSize)
	}
	return nil
}

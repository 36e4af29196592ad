package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/errors/oserror"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/dgraph-io/ristretto/v2"
	"go.uber.org/zap"
)

// Volume is one server's data directory: a file of fixed-size segments, a
// pebble metadata store, and the regions stored in them. It is safe for
// concurrent use.
type Volume struct {
	opts Options
	g    geometry
	fs   vfs.FS
	lock io.Closer
	file vfs.File
	// direct is file opened for direct I/O (direct.go), nil if the
	// volume writes everything buffered; directOn is cleared for good
	// when the file system refuses a direct write (the file stays open
	// for writes in flight, until closeFiles).
	direct   DirectFile
	directOn atomic.Bool
	meta     *pebble.DB
	alloc    *allocator
	cache    *ristretto.Cache[uint64, *node]
	ctr      counters
	log      *zap.Logger

	mu         sync.Mutex
	regions    map[uint64]handle // one live handle per region, in its role
	closed     atomic.Bool
	metaFailed atomic.Pointer[error]
	syncFailed atomic.Pointer[error]
	// noSpace is the last allocation that failed for want of space, until
	// ProbeSpace finds room again (Health).
	noSpace   atomic.Pointer[error]
	spaceMu   sync.Mutex
	spaceBack chan struct{} // closed (and replaced) when ProbeSpace clears noSpace; under spaceMu

	growMu   sync.Mutex
	extent   int64  // bytes of the segment file allocated so far
	chunk    int64  // how far the file grows at a time (Options.GrowStep)
	seqLease uint64 // persisted bound on segment sequences; under growMu

	zeroOnce sync.Once
	zeros    []byte // a segment of zeros, dioBlock-aligned; read-only once made
}

// seqLeaseBlock is how many segment sequences one v/seq commit leases.
const seqLeaseBlock = 1024

// growChunk is how far the segment file is extended at a time.
const growChunk = 32 << 20

// maxLogPrepareAhead bounds Options.LogPrepareAhead.
const maxLogPrepareAhead = 16

// allocSpare allocates a segment wanted ahead of need (a log segment
// prepared beyond the next), only while space is plentiful: never while the
// volume reports a want of space; on a capped volume only while more than
// spareSteps growth steps' worth of segments (and probeSegments) stay free;
// on an uncapped one only while the file system has room for the segment
// file to grow by spareSteps steps beyond the space reserve (when it can
// tell); and always out of room the volume has without growing its file (a
// free segment, or one the file covers). It never grows the file nor marks
// the volume out of space: false means no spare now.
func (v *Volume) allocSpare() (segRef, bool) {
	if v.noSpace.Load() != nil || (v.opts.MaxSegments == 0 && !v.fsHeadroom()) {
		return segRef{}, false
	}
	v.growMu.Lock()
	defer v.growMu.Unlock()
	margin := probeSegments + spareSteps*max(v.chunk/v.g.segSize, 1)
	s, ok := v.alloc.allocWithin(uint64(v.extent/v.g.segSize), margin)
	if !ok {
		return segRef{}, false
	}
	if err := v.leaseSeqLocked(s); err != nil {
		return segRef{}, false
	}
	return s, true
}

// spareSteps is how many growth steps of room, beyond the space reserve,
// the file system must have for allocSpare to take a segment.
const spareSteps = 4

// fsHeadroom reports whether the file system has room for the segment file
// to grow by spareSteps steps beyond the space reserve (true if it cannot
// tell, like an in-memory one).
func (v *Volume) fsHeadroom() bool {
	du, err := v.fs.GetDiskUsage(v.opts.Dir)
	if err != nil {
		return true
	}
	return du.AvailBytes >= uint64(max(v.opts.SpaceReserve, 0))+spareSteps*uint64(v.chunk)
}

// leaseSeqLocked makes sure the persisted sequence bound covers s's
// sequence, releasing s if it cannot. Called with growMu held.
func (v *Volume) leaseSeqLocked(s segRef) error {
	if s.seq < v.seqLease {
		return nil
	}
	// Sequences are leased in blocks: v/seq is an upper bound of every
	// sequence handed out, so none repeats after a crash.
	lease := s.seq + seqLeaseBlock
	b := v.meta.NewBatch()
	b.Set(keySeq, binary.LittleEndian.AppendUint64(nil, lease), nil)
	if err := v.commitRaw(b); err != nil {
		v.alloc.release(s.seg)
		return err
	}
	v.seqLease = lease
	return nil
}

// allocSegment allocates a segment and makes sure the file covers it.
func (v *Volume) allocSegment() (segRef, error) {
	s, err := v.alloc.alloc()
	if err != nil {
		v.setNoSpace(err)
		return s, err
	}
	end := v.g.fileOff(s.seg + 1)
	v.growMu.Lock()
	defer v.growMu.Unlock()
	if err := v.leaseSeqLocked(s); err != nil {
		return segRef{}, err
	}
	if end > v.extent {
		if err := v.growLocked(max(end-v.extent, v.chunk)); err != nil {
			v.alloc.release(s.seg)
			v.setNoSpace(err)
			return segRef{}, err
		}
	}
	return s, nil
}

// growLocked extends the segment file by n bytes, unless that would leave
// the file system with less than the space reserve free. Called with
// growMu held.
func (v *Volume) growLocked(n int64) error {
	if res := v.opts.SpaceReserve; res > 0 {
		// A file system that cannot tell (an in-memory one) is not checked.
		if du, err := v.fs.GetDiskUsage(v.opts.Dir); err == nil && du.AvailBytes < uint64(n)+uint64(res) {
			return fmt.Errorf("%w: growing the segment file by %d bytes would leave less than the %d reserved for metadata (%d bytes free)",
				ErrNoSpace, n, res, du.AvailBytes)
		}
	}
	if err := growFile(v.file, v.extent, n); err != nil {
		return fmt.Errorf("engine: grow segment file: %w", ioErr(err))
	}
	v.extent += n
	return nil
}

// setNoSpace records an allocation that failed for want of space.
func (v *Volume) setNoSpace(err error) {
	if errors.Is(err, ErrNoSpace) {
		v.noSpace.Store(&err)
	}
}

const dataFileName = "segments"

// Open opens the volume in opts.Dir, creating it if it does not exist, and
// recovers every region it holds (levels from metadata, L0 by replaying the
// log from the recovery point). An existing volume is never reformatted.
func Open(opts Options) (*Volume, error) {
	explicitSeg, explicitNode := opts.SegmentSize, opts.NodeSize
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &Volume{opts: opts, fs: opts.FS, log: opts.Logger, regions: map[uint64]handle{}, chunk: opts.GrowStep, spaceBack: make(chan struct{})}
	if err := v.fs.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("engine: create %s: %w", opts.Dir, err)
	}
	// Make the directory's own entry durable (it may have just been created).
	if err := syncDir(v.fs, v.fs.PathDir(opts.Dir)); err != nil {
		return nil, err
	}
	v.lock, err = v.fs.Lock(v.fs.PathJoin(opts.Dir, "LOCK"))
	if err != nil {
		return nil, fmt.Errorf("engine: lock volume %s: %w", opts.Dir, err)
	}
	if err := v.open(explicitSeg, explicitNode); err != nil {
		for _, r := range v.regions {
			r.close() // regions recovered before the failure
		}
		v.closeFiles()
		return nil, err
	}
	return v, nil
}

func (v *Volume) openMeta(dir string) error {
	mfs := countingFS{FS: v.fs, read: &v.ctr.read[IOMeta], written: &v.ctr.written[IOMeta]}
	var db *pebble.DB
	err := v.guardMeta(func() (err error) {
		db, err = pebble.Open(dir, &pebble.Options{FS: mfs, Logger: pebbleLogger{v.log}})
		return err
	})
	if err != nil {
		return fmt.Errorf("engine: open metadata: %w", err)
	}
	v.meta = db
	return nil
}

// volumeMarker names the file whose presence says the volume was created
// completely. Until it exists, Open starts the creation over: no write can
// have been acknowledged on a volume that was never created.
const volumeMarker = "VOLUME"

// createMeta makes a new volume's metadata store and superblock, then the
// marker file.
func (v *Volume) createMeta(dir string) error {
	if err := v.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("engine: remove %s: %w", dir, err)
	}
	if err := v.openMeta(dir); err != nil {
		return err
	}
	if err := v.writeSuper(); err != nil {
		return err
	}
	name := v.fs.PathJoin(v.opts.Dir, volumeMarker)
	f, err := v.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("engine: create %s: %w", name, err)
	}
	_, err = f.Write([]byte("tebis volume\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("engine: write %s: %w", name, ioErr(err))
	}
	return v.syncDir()
}

func (v *Volume) open(explicitSeg int64, explicitNode int) error {
	metaDir := v.fs.PathJoin(v.opts.Dir, "meta")
	if _, err := v.fs.Stat(v.fs.PathJoin(v.opts.Dir, volumeMarker)); oserror.IsNotExist(err) {
		if err := v.createMeta(metaDir); err != nil {
			return err
		}
	} else if err != nil {
		return fmt.Errorf("engine: stat volume marker: %w", err)
	} else if err := v.openMeta(metaDir); err != nil {
		return err
	}
	if err := v.loadSuper(explicitSeg, explicitNode); err != nil {
		return err
	}
	path := v.fs.PathJoin(v.opts.Dir, dataFileName)
	var err error
	v.file, err = v.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("engine: open %s: %w", path, err)
	}
	if v.opts.CompactionBypassCache {
		noReadahead(v.file) // or a merge's node reads would cache what follows them
	}
	if !v.opts.BufferedReplicaWrites {
		d, why, err := openDirect(v.fs, path, v.g.segSize)
		switch {
		case err != nil:
			v.log.Warn("direct I/O unavailable: replicas' writes go through the page cache", zap.Error(err))
		case d == nil:
			v.log.Info("replicas' writes go through the page cache", zap.String("why", why))
		default:
			v.direct = d
			v.directOn.Store(true)
		}
	}
	if err := v.syncDir(); err != nil {
		return err
	}
	fi, err := v.file.Stat()
	if err != nil {
		return fmt.Errorf("engine: stat %s: %w", path, err)
	}
	v.extent = fi.Size()
	if v.opts.CacheBytes > 0 {
		v.cache, err = ristretto.NewCache(&ristretto.Config[uint64, *node]{
			NumCounters: 10 * v.opts.CacheBytes / int64(v.g.nodeSize),
			MaxCost:     v.opts.CacheBytes,
			BufferItems: 64,
		})
		if err != nil {
			return fmt.Errorf("engine: node cache: %w", err)
		}
	}
	return v.loadRegions()
}

// writeSuper records a new volume's geometry.
func (v *Volume) writeSuper() error {
	var e enc
	e.u32(formatVersion)
	e.u64(uint64(v.opts.SegmentSize))
	e.u32(uint32(v.opts.NodeSize))
	b := v.meta.NewBatch()
	b.Set(keySuper, e.b, nil)
	if err := v.commitRaw(b); err != nil {
		return fmt.Errorf("engine: write superblock: %w", err)
	}
	return nil
}

// loadSuper reads the superblock or writes it for a new volume.
func (v *Volume) loadSuper(explicitSeg int64, explicitNode int) error {
	b, closer, err := v.meta.Get(keySuper)
	if errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("%w: metadata store has no superblock", ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("engine: read superblock: %w", err)
	}
	d := dec{b: b, what: "superblock"}
	ver, seg, nodeSize := d.u32(), int64(d.u64()), int(d.u32())
	closer.Close()
	if d.err != nil {
		return d.err
	}
	if ver != formatVersion {
		return fmt.Errorf("%w: volume format %d, this build reads %d", ErrCorrupt, ver, formatVersion)
	}
	if err := checkGeometry(seg, nodeSize); err != nil {
		return fmt.Errorf("%w: superblock: %w", ErrCorrupt, err)
	}
	if (explicitSeg != 0 && explicitSeg != seg) || (explicitNode != 0 && explicitNode != nodeSize) {
		return fmt.Errorf("%w: volume has segment size %d and node size %d", ErrBadOptions, seg, nodeSize)
	}
	v.opts.SegmentSize, v.opts.NodeSize = seg, nodeSize
	v.g = newGeometry(seg, nodeSize)
	return nil
}

func (v *Volume) syncDir() error { return syncDir(v.fs, v.opts.Dir) }

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("engine: open dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("engine: sync dir: %w", ioErr(err))
	}
	return nil
}

// loadRegions reads every region's metadata, builds the allocator from the
// segments they reference, then recovers each region.
func (v *Volume) loadRegions() error {
	var nextSeq uint64
	if b, c, err := v.meta.Get(keySeq); err == nil {
		if len(b) != 8 {
			c.Close()
			return fmt.Errorf("%w: metadata sequence counter is %d bytes", ErrCorrupt, len(b))
		}
		nextSeq = binary.LittleEndian.Uint64(b)
		v.seqLease = nextSeq
		c.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("engine: read seq: %w", err)
	}
	states, err := v.loadRegionStates()
	if err != nil {
		return err
	}
	var used []segRef
	owner := map[uint64]uint64{}
	for id, st := range states {
		for _, u := range st.usedSegments() {
			if prev, dup := owner[u.seg]; dup {
				return fmt.Errorf("%w: segment %d referenced twice (regions %d and %d)", ErrCorrupt, u.seg, prev, id)
			}
			owner[u.seg] = id
			used = append(used, u)
		}
	}
	v.alloc = newAllocator(v.opts.MaxSegments, nextSeq, used)
	ids := make([]uint64, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		r, err := recoverHandle(v, states[id])
		if err != nil {
			return fmt.Errorf("engine: recover region %d: %w", id, err)
		}
		v.regions[id] = r
	}
	return nil
}

// commit applies a metadata batch durably. Pebble treats a failed WAL
// write as fatal (its Logger.Fatalf); the engine turns that into
// ErrMetadataFailed and refuses every later commit (fail-stop for metadata,
// nothing half-applied).
func (v *Volume) commit(b *pebble.Batch) error { return v.commitRaw(b) }

func (v *Volume) commitRaw(b *pebble.Batch) error {
	if f := v.metaFailed.Load(); f != nil {
		b.Close()
		return *f
	}
	return v.guardMeta(func() error {
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("engine: metadata commit: %w", ioErr(err))
		}
		return nil
	})
}

// guardMeta runs a metadata store call, turning pebble's fatal errors into
// ErrMetadataFailed.
func (v *Volume) guardMeta(f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(fatalMeta)
			if !ok {
				panic(p)
			}
			err = fmt.Errorf("%w: %s", ErrMetadataFailed, string(f))
			v.metaFailed.CompareAndSwap(nil, &err)
		}
	}()
	return f()
}

// writeAt writes b at a file offset, counting it under cat.
func (v *Volume) writeAt(b []byte, off int64, cat IOCategory) error {
	n, err := v.file.WriteAt(b, off)
	v.ctr.written[cat].Add(uint64(n))
	if err != nil {
		err = fmt.Errorf("engine: write at %d: %w", off, ioErr(err))
		v.setNoSpace(err)
		return err
	}
	if cat == IOCompaction && v.opts.CompactionBypassCache {
		dropCache(v.file, off, int64(n), true)
	}
	return nil
}

// readAt fills b from a file offset, counting it under cat.
func (v *Volume) readAt(b []byte, off int64, cat IOCategory) error {
	n, err := v.file.ReadAt(b, off)
	v.ctr.read[cat].Add(uint64(n))
	if cat == IOCompaction && v.opts.CompactionBypassCache && n > 0 {
		dropCache(v.file, off, int64(n), false)
	}
	if err != nil && !(errors.Is(err, io.EOF) && n == len(b)) {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: segment %d: read past end of volume", ErrCorrupt, uint64(off)/uint64(v.g.segSize))
		}
		return fmt.Errorf("engine: read at %d: %w", off, ioErr(err))
	}
	return nil
}

// syncData makes every write to the segment file durable.
//
// A failed fdatasync poisons the whole volume: the kernel reports a lost
// write-back once, to whichever sync runs first, and every region shares the
// file, so no later sync may be trusted to cover earlier writes.
func (v *Volume) syncData() error {
	if f := v.syncFailed.Load(); f != nil {
		return *f
	}
	v.ctr.syncs.Add(1)
	if err := v.file.SyncData(); err != nil {
		err = fmt.Errorf("%w: sync: %w", ErrVolumeFailed, ioErr(err))
		v.syncFailed.CompareAndSwap(nil, &err)
		return *v.syncFailed.Load()
	}
	return nil
}

// ioErr maps a full file system to ErrNoSpace.
func ioErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	}
	return err
}

// MaxValueSize is the largest value this volume accepts.
func (v *Volume) MaxValueSize() int {
	m := v.g.maxRecord() - recHeaderLen - MaxKeySize - ridLen
	return min(m, MaxValueSize)
}

// SegmentSize and NodeSize report the volume's geometry.
func (v *Volume) SegmentSize() int64 { return v.g.segSize }

// NodeSize is the size of every B+tree node on the volume.
func (v *Volume) NodeSize() int { return v.g.nodeSize }

// Stats returns a snapshot of the volume's counters.
func (v *Volume) Stats() Stats {
	s := v.ctr.snapshot()
	s.SegmentsUsed, s.SegmentsFree = v.alloc.usage()
	return s
}

func (v *Volume) closeFiles() {
	if v.meta != nil {
		v.meta.Close()
	}
	if v.file != nil {
		v.file.Close()
	}
	if v.direct != nil {
		v.direct.Close()
	}
	if v.cache != nil {
		v.cache.Close()
	}
	if v.lock != nil {
		v.lock.Close()
	}
}

// Close stops every region's background work, makes every acknowledged
// write durable, and releases the volume. Operations after Close return
// ErrClosed.
func (v *Volume) Close() error {
	if v.closed.Swap(true) {
		return ErrClosed
	}
	v.mu.Lock()
	regions := make([]handle, 0, len(v.regions))
	for _, r := range v.regions {
		regions = append(regions, r)
	}
	v.mu.Unlock()
	var first error
	for _, r := range regions {
		if err := r.close(); err != nil && first == nil {
			first = err
		}
	}
	if f := v.metaFailed.Load(); f != nil {
		// The metadata store's commit pipeline is broken: do not wait on it.
		if first == nil {
			first = *f
		}
	} else if err := v.meta.Close(); err != nil && first == nil {
		first = err
	}
	v.meta = nil
	v.closeFiles()
	return first
}

type pebbleLogger struct{ l *zap.Logger }

func (p pebbleLogger) Infof(f string, a ...any)  { p.l.Sugar().Debugf("meta: "+f, a...) }
func (p pebbleLogger) Errorf(f string, a ...any) { p.l.Sugar().Errorf("meta: "+f, a...) }

// fatalMeta is the panic value of pebbleLogger.Fatalf, recovered by commit.
type fatalMeta string

func (p pebbleLogger) Fatalf(f string, a ...any) {
	p.l.Sugar().Errorf("meta: fatal: "+f, a...)
	panic(fatalMeta(fmt.Sprintf(f, a...)))
}

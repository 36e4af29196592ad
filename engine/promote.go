package engine

import "fmt"

// Promotion (paper §3.5): when a primary fails, one of its Send-Index
// backups becomes the region's primary. The backup already holds the
// levels and the log; it persists what its replication buffer holds of the
// primary's unflushed tail, starts a fresh tail segment of its own, and
// rebuilds L0 by replaying the log from the recovery point, exactly as a
// restart replays a primary's log. The other backups then rename the
// primary segment numbers of their log maps to the new primary's
// (RebaseLog).

// PromoteTail is the failed primary's unflushed log tail as mirrored into
// the backup's replication buffer: the primary's segment number, the seed
// of its records' checksums (the primary segment's sequence), the
// segment-sized image (records start at SegmentHeaderSize, at the same
// offsets as on the primary) and where its valid records end (TailEnd).
// PromoteBackup reads Image during the call only (it may be the
// replication buffer itself).
type PromoteTail struct {
	Segment, Seq uint64
	Image        []byte
	End          int64
}

// TailEnd returns the offset in a tail image where its valid records stop:
// records are decoded back to back from SegmentHeaderSize, sealed with the
// seed seq, up to the first that is incomplete or fails its checksum. A
// replication buffer is reused, so the bytes past the tail's records may
// hold an older segment's records; those were sealed with another
// sequence and do not verify. An image shorter than SegmentHeaderSize
// holds no record: the result is SegmentHeaderSize. TailEnd only reads
// image.
func TailEnd(image []byte, seq uint64) int64 { return recordsEnd(image, segHeaderSize, seq) }

// recordsEnd decodes records sealed with seq back to back from off and
// returns the offset after the last that verifies.
func recordsEnd(image []byte, off int64, seq uint64) int64 {
	for off < int64(len(image)) {
		rec, ok := decodeRecord(image[off:], seq)
		if !ok {
			break
		}
		off += int64(rec.Size)
	}
	return off
}

// PromoteBackup turns backup region id into a primary at epoch (newer than
// the region's epoch), and returns its new *Region handle.
//
// It adopts tail (nil: none) like AdoptLog: tail must be the primary
// segment that follows every adopted one, or one adopted in part (then
// only the rest is written). It then writes a fresh tail segment after
// the adopted ones, which all stay sealed at their adopted ends, and
// commits, in one metadata batch, the removal of the backup role, the new
// tail's descriptor and the region descriptor at the new epoch. A crash or
// an error before that commit leaves a backup (with the tail adopted or
// not; no segment is leaked), after it a primary.
//
// On success the old *Backup handle is closed: every call on it returns
// ErrClosed (reads already in progress finish, and the segments they read
// are not freed under them). The volume then serves a new *Region rebuilt
// from the persisted state as a restart would: levels as installed, L0
// replayed from the recovery point through the adopted log. Its background
// work starts unless Options.HoldBackground (then the caller calls
// Resume); it has no listener or replicator until the caller sets them.
//
// Refusals change nothing: ErrBackupRegion for a region that is not a
// backup; ErrBadOptions for an unknown region, an epoch that is not newer,
// or a malformed tail (End outside the segment's record area, a short
// image, records that do not verify up to End: see TailEnd). If the commit
// fails, or the rebuild after it (the region is a primary on the device),
// the old handle is closed and the region serves nothing until the volume
// is reopened. PromoteBackup waits for the backup's metadata operations in
// progress (AdoptLog, ApplyCompaction, DropLog, RebaseLog); it is safe for
// concurrent use.
func (v *Volume) PromoteBackup(id uint64, epoch uint64, tail *PromoteTail) (*Region, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	old, err := roleChangeLocked[*Backup](v, id, epoch, "promotion")
	if err != nil {
		return nil, err
	}
	if err := v.checkTail(tail); err != nil {
		return nil, err
	}
	// The backup's metadata operations hold one of these: none runs during
	// the promotion, and each finds the handle closed after it.
	old.metaMu.Lock()
	defer old.metaMu.Unlock()
	old.log.logMetaMu.Lock()
	defer old.log.logMetaMu.Unlock()
	if old.isClosed() {
		return nil, ErrClosed
	}
	if tail != nil && tail.End > segHeaderSize {
		// The adopted tail is replayed as a sealed segment: every record
		// up to End must verify, or the region could not be recovered.
		if from := old.adoptedEnd(tail.Segment, tail.Seq); from < tail.End && recordsEnd(tail.Image[:tail.End], from, tail.Seq) != tail.End {
			return nil, fmt.Errorf("%w: promotion tail: the records of primary segment %d from %d do not verify up to %d", ErrBadOptions, tail.Segment, from, tail.End)
		}
		if _, err := old.adoptLocked(tail.Segment, tail.Seq, tail.Image, tail.End); err != nil {
			return nil, err
		}
	}
	ls, err := old.freshTailLocked()
	if err != nil {
		return nil, err
	}
	desc := old.desc
	desc.Epoch = epoch
	b := v.meta.NewBatch()
	b.Delete(regionKey(id, "role"), nil)
	b.Set(logKey(id, ls.idx), ls.encode(), nil)
	b.Set(regionKey(id, "desc"), desc.encode(), nil)
	err = v.commit(b)
	// Committed or perhaps committed: the backup handle must not change the
	// metadata any more (and ls.seg stays allocated).
	old.close()
	if err != nil {
		return nil, fmt.Errorf("engine: promote region %d: %w", id, err)
	}
	st, err := v.loadRegionState(id)
	var nr *Region
	if err == nil {
		nr, err = rebuildRegion(v, st)
	}
	if err != nil {
		return nil, fmt.Errorf("engine: region %d promoted, but rebuilding it failed (reopen the volume): %w", id, err)
	}
	old.handOver(nr)
	v.regions[id] = nr
	if !v.opts.HoldBackground {
		nr.Resume()
	}
	return nr, nil
}

// adoptedEnd returns how far a backup region adopted primary segment seg
// (records sealed with seq): SegmentHeaderSize if not at all.
func (r *Backup) adoptedEnd(seg, seq uint64) int64 {
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if s.primary == seg && s.recSeq == seq {
			return s.end
		}
	}
	return segHeaderSize
}

// checkTail validates a promotion's tail.
func (v *Volume) checkTail(t *PromoteTail) error {
	if t == nil {
		return nil
	}
	if t.Segment == 0 || t.Seq == 0 || t.End < segHeaderSize || t.End >= v.g.segSize || int64(len(t.Image)) < t.End {
		return fmt.Errorf("%w: promotion tail: primary segment %d seq %d, end %d of a %d-byte image (segment size %d)",
			ErrBadOptions, t.Segment, t.Seq, t.End, len(t.Image), v.g.segSize)
	}
	return nil
}

// freshTailLocked allocates the promoted region's tail segment, next in
// its log, and writes its header. Called with metaMu and logMetaMu held
// (the log and the recovery point are stable).
func (r *Backup) freshTailLocked() (*logSeg, error) {
	g := r.v.g
	l := r.log
	l.mu.Lock()
	var idx uint64
	if n := len(l.segs); n > 0 {
		idx = l.segs[n-1].idx + 1
	}
	l.mu.Unlock()
	// ApplyCompaction keeps the recovery point in the log; only an empty
	// log has it at the start of the fresh tail.
	if rpIdx, rpOff := r.rp>>g.shift, g.off(r.rp); rpIdx > idx || (rpIdx == idx && rpOff != segHeaderSize) {
		return nil, fmt.Errorf("%w: region %d recovery point %d:%d lies past its log (next index %d)", ErrCorrupt, r.desc.ID, rpIdx, rpOff, idx)
	}
	s, err := r.v.allocSegment()
	if err != nil {
		return nil, err
	}
	ls := &logSeg{idx: idx, seg: s.seg, seq: s.seq}
	if err := r.v.writeLogHeader(r.desc.ID, ls); err != nil {
		r.v.alloc.release(s.seg) // never committed: nothing names it
		return nil, err
	}
	return ls, nil
}

// handOver makes the successor nr of the closed backup core r wait, before
// it frees any segment, until every reader of r's versions is done: an
// old-handle read in progress keeps reading the segments it started with.
// r's releases sweep nr too.
func (r *regionCore) handOver(nr *Region) {
	r.mu.Lock()
	cur := r.cur
	r.mu.Unlock()
	r.freeMu.Lock()
	gate := make([]pendingFree, 0, len(r.pending)+1)
	for _, p := range r.pending {
		gate = append(gate, pendingFree{v: p.v})
	}
	r.freeMu.Unlock()
	gate = append(gate, pendingFree{v: cur})
	nr.freeMu.Lock()
	nr.pending = append(gate, nr.pending...)
	nr.freeMu.Unlock()
	r.successor.Store(nr.regionCore)
	r.release(cur) // the region's own reference: closed, it installs nothing more
}

// RebaseLog renames the primary segment numbers of this backup region's
// adopted log segments after a failover: the backup now follows a new
// primary (typically a promoted backup: its LogSegments give Primary ->
// Segment) whose log holds the same records in segments of other numbers.
// m maps every adopted segment's old primary number to the new one;
// entries for segments the region does not hold are ignored. The records'
// seeds stay. All descriptors are rewritten in one metadata commit, so a
// crash leaves the old or the new numbers; the log map (LogMap,
// AdoptedLog, LogSegments) and AdoptLog use the new ones afterwards.
//
// An adopted segment missing from m, a target 0 or two sources mapped to
// one target is ErrBadOptions, and nothing changes. The caller serializes
// it with the replica's other commands (it waits for AdoptLog and DropLog
// in progress).
func (r *Backup) RebaseLog(m map[uint64]uint64) error {
	seen := make(map[uint64]uint64, len(m))
	for from, to := range m {
		if to == 0 {
			return fmt.Errorf("%w: rebase of primary log segment %d to segment 0", ErrBadOptions, from)
		}
		if other, dup := seen[to]; dup {
			return fmt.Errorf("%w: rebase of primary log segments %d and %d to one segment %d", ErrBadOptions, other, from, to)
		}
		seen[to] = from
	}
	l := r.log
	l.logMetaMu.Lock() // the log's list changes only under it
	defer l.logMetaMu.Unlock()
	if r.isClosed() {
		return ErrClosed
	}
	l.mu.Lock()
	segs := append([]*logSeg(nil), l.segs...)
	descs := make([]logSeg, len(segs))
	for i, s := range segs {
		descs[i] = *s
	}
	l.mu.Unlock()
	b := r.v.meta.NewBatch()
	for _, c := range descs {
		to, ok := m[c.primary]
		if !ok {
			b.Close()
			return fmt.Errorf("%w: rebase map lacks primary log segment %d (local segment %d)", ErrBadOptions, c.primary, c.seg)
		}
		c.primary = to
		b.Set(logKey(r.desc.ID, c.idx), c.encode(), nil)
	}
	if err := r.v.commit(b); err != nil {
		return err
	}
	l.mu.Lock()
	for _, s := range segs {
		s.primary = m[s.primary]
	}
	l.mu.Unlock()
	return nil
}

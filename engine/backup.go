package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// Backup regions (Send-Index, paper §3.3). A backup region holds a copy of
// a primary's region without indexing anything itself: its log is made of
// the primary's log segments, adopted as they fill (or are flushed before
// an L0 compaction), and its levels are the primary's, shipped segment by
// segment, rewritten (RewriteIndexSegment) and installed with
// ApplyCompaction. It has no L0, no log tail, no compaction and no GC of
// its own, and its handle type (*Backup) has no write API. Reads see what
// its levels index.
//
// The region's role is persisted: a reopened volume opens it as a backup
// again, until Volume.PromoteBackup makes it a primary (promote.go).

// Backup is a Send-Index backup region: it applies what its primary ships
// (AdoptLog, ApplyCompaction, DropLog, ResetBackup, RebaseLog) and serves
// no writes. It is safe for concurrent use; the replica applying its
// primary's commands serializes them (one sender per region). A Backup
// never becomes a primary: a promotion (Volume.PromoteBackup) closes it
// (every later call returns ErrClosed) and returns a new *Region.
//
// The log map. A backup owns its log map, which names, for each log
// segment it adopted, the primary's number of that segment: primary
// segment -> local segment. It is persisted nowhere else than in the
// adopted segments' descriptors in the volume's metadata (the primary's
// number beside the local one, and the primary's sequence, which seeds the
// records' checksums), so it survives restarts. AdoptLog adds to it;
// DropLog and ResetBackup remove from it; RebaseLog renames its primary
// numbers. LogMap, AdoptedLog, LogSegments (Primary) and LogRecoveryPoint
// read it; what they return are copies, valid until the next change.
// Nothing else holds the map: a replica translating a shipped segment's
// pointers takes a copy per command. A promotion leaves the descriptors
// as they are: the promoted Region's LogSegments still name each adopted
// segment's old primary number, which its backups rebase onto.
type Backup struct{ *regionCore }

// ErrBackupRegion is returned for a role change or lookup that finds a
// region in the other role (Volume.PromoteBackup of a primary,
// Volume.DemoteRegion of a backup, Volume.OpenRegion or
// Volume.SetFollower of a backup).
var ErrBackupRegion = errors.New("engine: operation not allowed on this region's role")

const roleBackup = "backup"

// CreateBackupRegion creates an empty backup region.
func (v *Volume) CreateBackupRegion(desc RegionDesc) (*Backup, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.canCreateLocked(desc); err != nil {
		return nil, err
	}
	st := &regionState{desc: desc, rp: segHeaderSize, backup: true}
	b := v.meta.NewBatch()
	st.writeAll(b)
	if err := v.commit(b); err != nil {
		return nil, err
	}
	r := rebuildBackup(v, st)
	v.regions[desc.ID] = r
	return r, nil
}

// Backup returns the open backup region id (ok false: the volume holds no
// region id, or holds it as a primary: see Volume.Region).
func (v *Volume) Backup(id uint64) (*Backup, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	r, ok := v.regions[id].(*Backup)
	return r, ok
}

// rebuildBackup builds a live backup region from its persisted state: its
// levels and its adopted log (every segment sealed at its adopted end). A
// backup has no background work to start.
func rebuildBackup(v *Volume, st *regionState) *Backup {
	r := newCore(v, st)
	l := r.log
	for _, ls := range st.logs {
		l.bySeg[ls.seg] = ls
		ls.endSaved = true
	}
	r.cur = levelsVersion(st)
	r.rp = st.rp
	return &Backup{r}
}

// close stops the region (it has no log tail: everything it adopted or
// installed is durable already). Once: a closed region returns nil.
func (r *Backup) close() error {
	r.stop()
	return nil
}

// AdoptLog persists image[:end) of the primary's log segment primarySeg
// (whose records are sealed with primarySeq) as a segment of this backup
// region's log, and returns the local segment. The first call for a
// primary segment allocates the local segment and appends it to the log;
// later calls (the rest of a segment first flushed partly before an L0
// compaction) write only the bytes past what was adopted before. The
// bytes are synced and the descriptor committed before it returns.
func (r *Backup) AdoptLog(primarySeg, primarySeq uint64, image []byte, end int64) (uint64, error) {
	if end < segHeaderSize || end >= r.v.g.segSize || int64(len(image)) < end {
		return 0, fmt.Errorf("%w: adopt log segment %d up to %d (image %d bytes)", ErrBadOptions, primarySeg, end, len(image))
	}
	l := r.log
	l.logMetaMu.Lock()
	defer l.logMetaMu.Unlock()
	if r.isClosed() { // checked under logMetaMu: a promotion closes the handle holding it
		return 0, ErrClosed
	}
	return r.adoptLocked(primarySeg, primarySeq, image, end)
}

// adoptLocked is AdoptLog on checked arguments. Called with logMetaMu held.
func (r *Backup) adoptLocked(primarySeg, primarySeq uint64, image []byte, end int64) (uint64, error) {
	g := r.v.g
	l := r.log
	l.mu.Lock()
	var ls *logSeg
	for _, s := range l.segs {
		if s.primary == primarySeg && s.recSeq == primarySeq {
			ls = s
		}
	}
	var idx uint64
	if n := len(l.segs); n > 0 {
		idx = l.segs[n-1].idx + 1
	}
	l.mu.Unlock()
	from := int64(segHeaderSize)
	c := logSeg{}
	if ls != nil {
		if end <= ls.end {
			return ls.seg, nil // adopted already (a resent flush)
		}
		from, c = ls.end, *ls
	} else {
		s, err := r.v.allocSegment()
		if err != nil {
			return 0, err
		}
		c = logSeg{idx: idx, seg: s.seg, seq: s.seq, primary: primarySeg, recSeq: primarySeq}
		h := make([]byte, segHeaderSize)
		segHeader{Kind: segKindLog, Region: r.desc.ID, PrimarySeg: primarySeg, Seq: s.seq, SegNo: s.seg}.encode(h)
		if err := r.v.writeAt(h, g.fileOff(s.seg), IOLog); err != nil {
			r.v.alloc.release(s.seg)
			return 0, err
		}
	}
	err := r.v.writeSpan(image, g.fileOff(c.seg), from, end, IOLog, true, false)
	if err == nil {
		err = r.v.syncData()
	}
	if err != nil {
		if ls == nil {
			r.v.alloc.release(c.seg) // never committed: nothing names it
		}
		return 0, err
	}
	c.end = end
	b := r.v.meta.NewBatch()
	b.Set(logKey(r.desc.ID, c.idx), c.encode(), nil)
	if err := r.v.commit(b); err != nil {
		return 0, err // a new segment stays allocated: the batch may have landed
	}
	l.mu.Lock()
	if ls != nil {
		ls.end = end
	} else {
		n := c
		n.endSaved = true
		l.segs = append(l.segs, &n)
		l.bySeg[n.seg] = &n
	}
	l.mu.Unlock()
	return c.seg, nil
}

// LogMap returns a copy of the backup region's log map (see Backup):
// primary log segment -> local segment, for every adopted segment still
// in the log. Should two adopted segments carry one primary number (the
// primary reused a number it freed, and the free has not come yet), the
// newer one is mapped, as AdoptedLog finds it.
func (r *Backup) LogMap() map[uint64]uint64 {
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	m := make(map[uint64]uint64, len(l.segs))
	for _, s := range l.segs {
		if s.primary != 0 {
			m[s.primary] = s.seg
		}
	}
	return m
}

// AdoptedLog returns the adopted copy of the primary's log segment
// primarySeg (see LogMap): its local number (Segment), the records' seed
// it was adopted with (Seq), the primary's number (Primary) and its
// adopted end. ok is false when the log map has no such segment.
func (r *Backup) AdoptedLog(primarySeg uint64) (seg LogSegment, ok bool) {
	if primarySeg == 0 {
		return LogSegment{}, false
	}
	l := r.log
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.segs {
		if s.primary == primarySeg {
			seg, ok = LogSegment{Segment: s.seg, Seq: s.recordSeq(), Primary: s.primary, End: s.end, Index: s.idx}, true
		}
	}
	return seg, ok
}

// DropLog frees the local copy of the primary's log segment primarySeg
// (the primary freed it: its records are dead or relocated). Unknown
// segments are ignored.
func (r *Backup) DropLog(primarySeg uint64) error {
	if r.isClosed() {
		return ErrClosed
	}
	l := r.log
	l.mu.Lock()
	var dead []*logSeg
	for _, s := range l.segs {
		if s.primary == primarySeg {
			dead = append(dead, s)
		}
	}
	l.mu.Unlock()
	if len(dead) == 0 {
		return nil
	}
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	if r.isClosed() { // checked under metaMu: a promotion closes the handle holding it
		return ErrClosed
	}
	return r.freeLogSegsLocked(dead)
}

// LogPoint names a position in a backup region's log: an offset in one of
// its (local) log segments.
type LogPoint struct {
	Segment uint64
	Offset  int64
}

// ApplyCompaction installs, in one metadata commit, the outcome of the
// primary's compaction c: level c.Dst becomes l (c.Move: the region's own
// level c.Src, l is ignored), level c.Src (if not L0) becomes empty, and
// for an L0 compaction the recovery point moves to rp (a local log
// position; the log before it is indexed). Replaced segments are freed once
// no reader uses them.
func (r *Backup) ApplyCompaction(c CompactionInfo, l *InstalledLevel, rp *LogPoint) error {
	if r.isClosed() {
		return ErrClosed
	}
	if c.Dst < 1 || c.Src < 0 || c.Src >= c.Dst || (c.Move && c.Src == 0) {
		return fmt.Errorf("%w: compaction L%d -> L%d (move %v)", ErrBadOptions, c.Src, c.Dst, c.Move)
	}
	var newRP uint64
	if c.Src == 0 {
		if rp == nil {
			return fmt.Errorf("%w: L0 compaction without a recovery point", ErrBadOptions)
		}
		r.log.mu.Lock()
		ls := r.log.bySeg[rp.Segment]
		r.log.mu.Unlock()
		if ls == nil || ls.dropped || rp.Offset < segHeaderSize || rp.Offset > ls.end {
			return fmt.Errorf("%w: recovery point %d:%d is not in the region's log", ErrBadOptions, rp.Segment, rp.Offset)
		}
		newRP = ls.idx<<r.v.g.shift | uint64(rp.Offset)
	}
	r.metaMu.Lock()
	defer r.metaMu.Unlock()
	r.mu.RLock()
	ver, closed := r.cur, r.closed
	r.mu.RUnlock()
	if closed { // checked under metaMu: a promotion closes the handle holding it
		return ErrClosed
	}
	var dst *levelDesc
	switch {
	case c.Move:
		if dst = ver.level(c.Src); dst == nil {
			return fmt.Errorf("%w: move of empty level %d", ErrBadOptions, c.Src)
		}
	case l == nil:
		return fmt.Errorf("%w: compaction L%d -> L%d without a level", ErrBadOptions, c.Src, c.Dst)
	default:
		var err error
		if dst, err = r.levelDescOf(l); err != nil {
			return err
		}
		if err := r.v.syncData(); err != nil { // the segments WriteSegment wrote
			return err
		}
	}
	b := r.v.meta.NewBatch()
	if c.Src > 0 {
		b.Delete(levelKey(r.desc.ID, c.Src), nil)
	} else {
		b.Set(regionKey(r.desc.ID, "rp"), binary.LittleEndian.AppendUint64(nil, newRP), nil)
	}
	if dst.root == 0 {
		b.Delete(levelKey(r.desc.ID, c.Dst), nil)
	} else {
		b.Set(levelKey(r.desc.ID, c.Dst), dst.encode(), nil)
	}
	if err := r.v.commit(b); err != nil {
		return err
	}
	var old []uint64
	for _, n := range []int{c.Src, c.Dst} {
		if p := ver.level(n); p != nil && n > 0 && !(c.Move && n == c.Src) {
			for _, s := range p.segs {
				old = append(old, s.seg)
			}
		}
	}
	r.mu.Lock()
	nv := ver.with(c.Dst, dst)
	if c.Src > 0 {
		nv = nv.with(c.Src, nil)
	} else {
		r.rp = newRP
	}
	r.installLocked(nv, func() { r.v.alloc.release(old...) })
	r.mu.Unlock()
	r.v.ctr.compactions.Add(1)
	return nil
}

// levelDescOf checks an installed level's segments and builds its
// descriptor.
func (r *regionCore) levelDescOf(l *InstalledLevel) (*levelDesc, error) {
	desc := &levelDesc{root: l.Root, height: l.Height, pairs: l.Pairs, kvBytes: l.KVBytes, nodes: l.Nodes}
	refs := append([]uint64(nil), l.LogRefs...)
	sort.Slice(refs, func(i, j int) bool { return refs[i] < refs[j] })
	for i, s := range refs {
		if i == 0 || s != refs[i-1] {
			desc.logRefs = append(desc.logRefs, s)
		}
	}
	for _, s := range l.Segments {
		seq := r.v.alloc.seqOf(s)
		if seq == 0 {
			return nil, fmt.Errorf("%w: segment %d is not allocated", ErrBadOptions, s)
		}
		desc.segs = append(desc.segs, segRef{seg: s, seq: seq})
	}
	desc.indexRefs()
	return desc, nil
}

// Levels describes the region's on-device levels, L1 first (empty levels
// included, up to the deepest).
func (r *regionCore) Levels() []LevelInfo {
	r.mu.RLock()
	ver := r.cur
	r.mu.RUnlock()
	var out []LevelInfo
	for n := 1; n < len(ver.levels); n++ {
		if l := ver.levels[n]; l != nil {
			out = append(out, l.info(n))
		} else {
			out = append(out, LevelInfo{Level: n})
		}
	}
	return out
}

// LogSegment describes one segment of a region's log: its number, the seed
// of its records (the primary's, for an adopted segment; the primary's
// segment number in Primary), and its end (0: the primary's tail).
type LogSegment struct {
	Segment, Seq, Primary uint64
	End                   int64
	// Index is the segment's position in the region's log (consecutive
	// segments have consecutive indexes; a gap is a freed segment). Not
	// part of any wire or state encoding.
	Index uint64
}

// LogSegments lists the region's log, oldest first. A segment the log left
// is listed once it is sealed (durable, its End set): the call waits for a
// seal in progress.
func (r *regionCore) LogSegments() []LogSegment {
	l := r.log
	l.lockSettled()
	defer l.unlockSettled()
	out := make([]LogSegment, 0, len(l.segs))
	for _, s := range l.segs {
		out = append(out, LogSegment{Segment: s.seg, Seq: s.recordSeq(), Primary: s.primary, End: s.end, Index: s.idx})
	}
	return out
}

// ReadLog returns bytes [from, to) of sealed segment seg (records sealed
// with seq) of the region's log: catching a backup up on what its buffer
// lost. The caller keeps the segment from being freed meanwhile (the
// region's compactions and GC held, as when replication attaches).
func (r *Region) ReadLog(seg, seq uint64, from, to int64) ([]byte, error) {
	return r.readLog(seg, seq, from, to, false)
}

// readLog is ReadLog; dropped allows segments freed but not reused yet
// (a snapshot holds them).
func (r *regionCore) readLog(seg, seq uint64, from, to int64, dropped bool) ([]byte, error) {
	if r.isClosed() {
		return nil, ErrClosed
	}
	l := r.log
	l.mu.Lock()
	ls := l.bySeg[seg]
	ok := ls != nil && (dropped || !ls.dropped) && ls.recordSeq() == seq && ls.end != 0 && from >= segHeaderSize && to <= ls.end && from <= to
	l.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w: log segment %d (seq %d) bytes %d..%d", ErrBadOptions, seg, seq, from, to)
	}
	b := make([]byte, to-from)
	if err := r.v.readAt(b, r.v.g.fileOff(seg)+from, IOLog); err != nil {
		return nil, err
	}
	return b, nil
}

// LogRecoveryPoint is the backup's L0 recovery point (the log before it
// is indexed by the levels) in the primary's terms: the adopted segment
// holding it, named by the primary's number (Segment and Primary; Seq is
// the records' seed), and the offset in it. ok is false when no segment of
// the log holds it (a backup that adopted nothing since its copy was
// emptied). Safe for concurrent use.
func (r *Backup) LogRecoveryPoint() (seg LogSegment, off int64, ok bool) {
	seg, off, ok = r.logRecoveryPoint()
	seg.Segment = seg.Primary
	return seg, off, ok
}

// LogRecoveryPoint is the region's L0 recovery point (the log before it
// is indexed by the levels): the log segment holding it (Seq is the
// records' seed; Primary is set for a segment adopted as a backup before
// a promotion) and the offset in it. ok is false when no segment of the
// log holds it. Safe for concurrent use.
func (r *Region) LogRecoveryPoint() (seg LogSegment, off int64, ok bool) {
	return r.logRecoveryPoint()
}

// logRecoveryPoint is LogRecoveryPoint in local terms.
func (r *regionCore) logRecoveryPoint() (seg LogSegment, off int64, ok bool) {
	ls, off, _ := r.recoverySegment()
	if ls == nil {
		return LogSegment{}, off, false
	}
	r.log.lockSettled()
	defer r.log.unlockSettled()
	return LogSegment{Segment: ls.seg, Seq: ls.recordSeq(), Primary: ls.primary, End: ls.end}, off, true
}

package replication

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
)

// Mode is a cluster's replication scheme.
type Mode uint8

const (
	// SendIndex: backups adopt the primary's log segments and install the
	// index segments it ships, rewritten (paper §3.3).
	SendIndex Mode = iota + 1
	// BuildIndex: backups apply the replicated records to their own
	// region, which indexes and compacts them itself (the baseline).
	BuildIndex
)

func (m Mode) String() string {
	switch m {
	case SendIndex:
		return "send-index"
	case BuildIndex:
		return "build-index"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode reads "send-index" or "build-index".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "send-index":
		return SendIndex, nil
	case "build-index":
		return BuildIndex, nil
	}
	return 0, fmt.Errorf("replication: unknown mode %q (send-index or build-index)", s)
}

// Replica is the backup side of one region: it applies the primary's
// commands, in order, to the backup's region (an engine.Backup for
// Send-Index, an ordinary engine.Region for Build-Index). Buffer is the
// registered buffer the primary's Mirror writes the log tail into (two
// segments). Handle is safe for concurrent use but commands must arrive in
// the primary's order (one sender per region). The replica owns no
// goroutine. It keeps no copy of a Send-Index backup's log map: the
// engine.Backup owns it, and each command reads it there.
type Replica struct {
	mu sync.Mutex
	id uint64 // the region's
	// backup is the Send-Index backup region (nil for Build-Index); after
	// Promote its handle is closed and region is the primary it became.
	backup *engine.Backup
	// region is the Build-Index backup's ordinary region, or the primary
	// a Send-Index promotion returned (nil before it).
	region  *engine.Region
	vol     *engine.Volume
	mode    Mode
	epoch   uint64
	buf     []byte
	segSize int64

	// Send-Index: the compaction being received.
	compacting bool
	cur        Command // its CompactionStart
	index      *SegMap
	built      []uint64
	refs       map[uint64]struct{}
	retired    *SegMap
	// freed lists the primary's log segments (number and sequence) freed
	// while this replica followed it: a buffer half may still hold one,
	// which a promotion must not adopt. The number alone is not an
	// identity: the primary's log reuses it, and a half holding the
	// reused segment must be adopted. Cleared when the numbering changes
	// (a rebase to a new primary, a reset).
	freed map[logID]bool
	// flushed: the position in the primary's log (the tail marker's
	// index) of the last sealed segment this stream flushed out of a
	// buffer half, when known (flushedKnown): a promotion or a report
	// checks that the halves continue the log from there (gapLocked).
	// Forgotten at every new stream (CmdCheck), reset, rebase, catch-up
	// and new buffer.
	flushed      uint64
	flushedKnown bool

	// incomplete: the copy may lack acknowledged writes (from the start,
	// a reset, a rebase or a new buffer until the primary's CmdInSync).
	incomplete bool
	// reported: the highest epoch at which the replica reported its copy
	// complete for a failover (Report); commands of that epoch or older
	// are refused (ErrReported).
	reported uint64

	// Build-Index: the point of the primary's log the region holds
	// everything before (known: set by CmdApplyFrom, moved by flushes),
	// whether its segment was flushed sealed up to it, the epoch of the
	// stream whose check it answered last (flushes of another stream are
	// refused), and after Promote what the other backups may need.
	applied  Position
	known    bool
	sealed   bool
	stream   uint64
	agreed   bool // the stream named its starting point
	handover *Handover

	// rewritten counts the shipped index segments rewritten and written
	// (Send-Index); read without mu, which a command holds through its
	// disk I/O.
	rewritten atomic.Uint64
}

// logID names a primary's log segment: its number and the allocation
// sequence (its records' seed) it has under that number.
type logID struct{ seg, seq uint64 }

// NewSendIndexReplica serves Send-Index backup region b of vol at epoch,
// with the primary's log tail mirrored into buf.
func NewSendIndexReplica(vol *engine.Volume, b *engine.Backup, epoch uint64, buf []byte) (*Replica, error) {
	r, err := newReplica(vol, b.Desc().ID, SendIndex, epoch, buf)
	if err == nil {
		r.backup = b
	}
	return r, err
}

// NewBuildIndexReplica serves region (an ordinary region: a Build-Index
// backup indexes its primary's records itself) of vol at epoch, with the
// primary's log tail mirrored into buf.
func NewBuildIndexReplica(vol *engine.Volume, region *engine.Region, epoch uint64, buf []byte) (*Replica, error) {
	r, err := newReplica(vol, region.Desc().ID, BuildIndex, epoch, buf)
	if err == nil {
		r.region = region
	}
	return r, err
}

func newReplica(vol *engine.Volume, id uint64, mode Mode, epoch uint64, buf []byte) (*Replica, error) {
	seg := vol.SegmentSize()
	if int64(len(buf)) < 2*seg {
		return nil, fmt.Errorf("replication: replica buffer of %d bytes, want %d", len(buf), 2*seg)
	}
	return &Replica{id: id, vol: vol, mode: mode, epoch: epoch, buf: buf, segSize: seg, retired: NewSegMap(), incomplete: true}, nil
}

// Complete reports whether the replica's copy (its region and buffer)
// holds every write its primary acknowledged: true from a stream's
// CmdInSync until a reset (a seed), a rebase (a new primary whose
// catch-up has not landed), a new buffer (SetBuffer), or a new replica (a
// restart: the buffer is gone). A replica whose copy is not complete must
// not be promoted: the master is told (region/logpos.go). Complete does
// not read the buffer; Report and Promote also check that its halves
// continue the log the stream flushed (a copy with a segment in neither
// is incomplete to them).
func (r *Replica) Complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.incomplete
}

// Epoch is the newest epoch the replica accepted.
func (r *Replica) Epoch() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.epoch
}

// RaiseEpoch makes the replica refuse commands older than epoch (a new
// primary connected at it: the old one's commands still in flight must
// not apply to the new primary's buffer).
func (r *Replica) RaiseEpoch(epoch uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch = max(r.epoch, epoch)
}

// Region is a Build-Index backup's region, or the primary a Send-Index
// backup's Promote returned; nil for a Send-Index backup not promoted.
func (r *Replica) Region() *engine.Region {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.region
}

// Backup is a Send-Index backup's region (closed once Promote returned);
// nil for a Build-Index backup.
func (r *Replica) Backup() *engine.Backup { return r.backup }

// Reply applies one command and returns what the backup answers: its
// state (replwire.State) for a check, nothing otherwise.
func (r *Replica) Reply(c *Command) ([]byte, error) {
	if err := r.Handle(c); err != nil {
		return nil, err
	}
	if c.Kind == CmdCheck && r.mode == SendIndex {
		return replwire.State{Logs: backupLogs(r.backup), Levels: replwire.Shapes(r.backup.Levels()), RP: regionRP(r.backup)}.Encode(), nil
	}
	if c.Kind == CmdCheck {
		return r.appliedReply(), nil
	}
	return nil, nil
}

// backupLogs is a backup region's log in the primary's terms (primary
// segment numbers, adopted ends).
func backupLogs(r *engine.Backup) []engine.LogSegment {
	var out []engine.LogSegment
	for _, l := range r.LogSegments() {
		out = append(out, engine.LogSegment{Segment: l.Primary, Seq: l.Seq, End: l.End})
	}
	return out
}

// Handle applies one command. A command of an older epoch is refused with
// ErrStaleEpoch, one of an epoch the replica reported its copy complete at
// (Report) with ErrReported; a newer epoch is adopted (the primary learnt
// it first). Any other error leaves the replica consistent (nothing
// half-installed) but its copy incomplete until a stream's IN_SYNC; the
// primary should drop a backup that failed a command.
func (r *Replica) Handle(c *Command) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.Region != r.id {
		return fmt.Errorf("%w: command for region %d sent to region %d", ErrOutOfOrder, c.Region, r.id)
	}
	if c.Epoch < r.epoch {
		return fmt.Errorf("%w: %s at epoch %d, region %d is at %d", ErrStaleEpoch, c.Kind, c.Epoch, c.Region, r.epoch)
	}
	if c.Epoch <= r.reported {
		// Only the primary the report was about sends at that epoch.
		return fmt.Errorf("%w: %s at epoch %d: the copy was reported complete at epoch %d", ErrReported, c.Kind, c.Epoch, r.reported)
	}
	if err := r.handle(c); err != nil {
		if !errors.Is(err, ErrStaleEpoch) {
			// A command the copy did not take (a check that differs, a
			// flush or install that failed): it may lack what the
			// primary holds until a stream's IN_SYNC says otherwise.
			r.incomplete = true
		}
		return err
	}
	return nil
}

// handle applies c (region and epoch checked). Called with r.mu held.
func (r *Replica) handle(c *Command) error {
	r.epoch = c.Epoch
	if c.Kind == CmdInSync {
		r.incomplete = false
		return nil
	}
	if r.mode == BuildIndex {
		err := r.handleBuild(c)
		// Even after a failure part-way: r.applied covers what was applied.
		if cerr := r.commitBuild(); err == nil {
			err = cerr
		}
		return err
	}
	switch c.Kind {
	case CmdFlush:
		if len(c.Data) > 0 {
			if int64(len(c.Data)) > c.End || c.End >= r.segSize {
				return fmt.Errorf("%w: %d catch-up bytes ending at %d", ErrMalformed, len(c.Data), c.End)
			}
			r.flushedKnown = false
			delete(r.freed, logID{c.Segment, c.Seq}) // adopted again: live
			image := make([]byte, r.segSize)
			copy(image[c.End-int64(len(c.Data)):], c.Data)
			_, err := r.backup.AdoptLog(c.Segment, c.Seq, image, c.End)
			return err
		}
		h := int64(c.Half) * r.segSize
		img := r.buf[h : h+r.segSize]
		var m replwire.Marker
		if c.End > engine.SegmentHeaderSize { // else no byte of the half is read
			var err error
			if m, err = r.checkHalf(c, img); err != nil {
				return err
			}
		}
		delete(r.freed, logID{c.Segment, c.Seq}) // adopted again: live
		if _, err := r.backup.AdoptLog(c.Segment, c.Seq, img, c.End); err != nil {
			return err
		}
		if c.Sealed && c.End > engine.SegmentHeaderSize && (!r.flushedKnown || m.Index > r.flushed) {
			r.flushed, r.flushedKnown = m.Index, true // (a resent flush moves nothing back)
		}
		return nil
	case CmdCompactionStart:
		r.abortLocked()
		r.compacting, r.cur = true, *c
		r.index, r.built, r.refs = NewSegMap(), nil, map[uint64]struct{}{}
		return nil
	case CmdIndexSegment:
		return r.indexSegment(c)
	case CmdCompactionDone:
		return r.install(c)
	case CmdLogFree:
		return r.logFree(c)
	case CmdReset:
		r.abortLocked()
		r.retired = NewSegMap()
		r.freed = nil
		r.flushedKnown = false
		r.incomplete = true
		// What the halves hold predates the seed: the stream re-sends the
		// tail (with its marker) after it.
		replwire.ClearMarker(r.buf[:r.segSize])
		replwire.ClearMarker(r.buf[r.segSize : 2*r.segSize])
		return r.backup.ResetBackup()
	case CmdRebase:
		pairs, err := replwire.DecodeRebase(c.Data)
		if err != nil {
			return err
		}
		r.freed = nil // named in the old primary's numbering
		r.flushedKnown = false
		r.incomplete = true
		return rebase(r.backup, pairs)
	case CmdCheck:
		r.flushedKnown = false // a new stream: its tail starts afresh
		st, err := replwire.DecodeState(c.Data)
		if err != nil {
			return err
		}
		return checkState(r.backup, r.segSize, st)
	}
	return fmt.Errorf("%w: kind %d", ErrMalformed, c.Kind)
}

// checkHalf verifies that buffer half img holds the log segment flush c
// names: its tail marker names c's region, segment and sequence. It
// returns the marker. A half that does not is refused (ErrOutOfSync):
// adopting it would persist other bytes under the segment's name, records
// that fail their checksums or another segment's. A stream never sends
// such a flush to a backup its mirror still writes to; a half the next
// segment overwrote before its flush is what a backup dropped late would
// find (the flush of the half, cancelled, applied when it resumes), and a
// half the mirror never reached, one dropped early.
func (r *Replica) checkHalf(c *Command, img []byte) (replwire.Marker, error) {
	m, ok := replwire.DecodeMarker(img)
	switch {
	case !ok:
		return m, fmt.Errorf("%w: flush of log segment %d (seq %d) from buffer half %d, which holds no tail marker", ErrOutOfSync, c.Segment, c.Seq, c.Half)
	case m.Region != c.Region || m.Segment != c.Segment || m.Seq != c.Seq:
		return m, fmt.Errorf("%w: flush of region %d log segment %d (seq %d) from buffer half %d, which holds region %d segment %d (seq %d)",
			ErrOutOfSync, c.Region, c.Segment, c.Seq, c.Half, m.Region, m.Segment, m.Seq)
	}
	return m, nil
}

// gapLocked reports a hole in a Send-Index copy's log (nil: none known):
// a buffer half is more than one segment past the last sealed segment
// the stream flushed (flushed), and no half holds the segment right after
// it. A backup the stream counts never has one: the switch to a segment
// waits for its flush of the segment two before, and a dropped backup
// gets no WRITE after its drop (Shipper: hung.go). Called with r.mu held;
// the buffer rules of LogPosition apply.
func (r *Replica) gapLocked(halves []promoteHalf) error {
	if r.mode != SendIndex || !r.flushedKnown {
		return nil
	}
	var newest replwire.Marker
	for _, h := range halves {
		if h.m.Index == r.flushed+1 {
			return nil // the segment after the flushed one: its flush has not come
		}
		if h.m.Index > newest.Index {
			newest = h.m
		}
	}
	if newest.Index <= r.flushed+1 {
		return nil
	}
	return fmt.Errorf("%w: region %d: the buffer holds log segment %d at position %d, the last one flushed is at position %d and no half holds the one after it",
		ErrIncompleteCopy, r.id, newest.Segment, newest.Index, r.flushed)
}

// indexSegment rewrites and writes one shipped segment.
func (r *Replica) indexSegment(c *Command) error {
	if !r.compacting || c.Move {
		return fmt.Errorf("%w: index segment %d outside a compaction", ErrOutOfOrder, c.Segment)
	}
	local, seq, err := r.vol.AllocSegment()
	if err != nil {
		return err
	}
	if err := r.index.Add(c.Segment, local); err != nil {
		r.vol.FreeSegment(local)
		return err
	}
	r.built = append(r.built, local)
	tr, err := r.translator()
	if err != nil {
		return err
	}
	data := append([]byte(nil), c.Data...) // c.Data aliases the request
	refs, err := r.vol.RewriteIndexSegment(data, local, seq, tr.PointerMap())
	if err != nil {
		return fmt.Errorf("replication: rewrite primary segment %d: %w", c.Segment, err)
	}
	for _, s := range refs {
		r.refs[s] = struct{}{}
	}
	if err := r.vol.WriteSegment(local, data); err != nil {
		return err
	}
	r.rewritten.Add(1)
	return nil
}

// IndexSegmentsRewritten counts the shipped index segments this replica
// rewrote for its own log and wrote (Send-Index), without waiting for a
// command being applied.
func (r *Replica) IndexSegmentsRewritten() uint64 { return r.rewritten.Load() }

// translator returns a Translator for the compaction being received: its
// log map is a copy of the backup's (engine.Backup.LogMap), taken now.
func (r *Replica) translator() (*Translator, error) {
	log := NewSegMap()
	for p, l := range r.backup.LogMap() {
		if err := log.Add(p, l); err != nil {
			return nil, err
		}
	}
	tr, err := NewTranslator(r.segSize, log, r.index)
	if err != nil {
		return nil, err
	}
	tr.Retired = r.retired
	return tr, nil
}

// install installs the level the primary just installed.
func (r *Replica) install(c *Command) error {
	if !r.compacting || c.Src != r.cur.Src || c.Dst != r.cur.Dst || c.Move != r.cur.Move {
		return fmt.Errorf("%w: compaction L%d->L%d done without its start", ErrOutOfOrder, c.Src, c.Dst)
	}
	info := engine.CompactionInfo{Region: c.Region, Src: int(c.Src), Dst: int(c.Dst), Move: c.Move}
	var rp *engine.LogPoint
	if c.Src == 0 {
		l, ok := r.backup.AdoptedLog(c.RPSeg)
		if !ok {
			return fmt.Errorf("%w: recovery point in primary log segment %d, which this backup has not adopted", ErrUnmapped, c.RPSeg)
		}
		if l.Seq != c.Seq {
			// Another segment under the same number (the log reuses
			// freed numbers): this backup missed a free or a flush.
			return fmt.Errorf("%w: recovery point in primary log segment %d seq %d, adopted here as seq %d", ErrOutOfSync, c.RPSeg, c.Seq, l.Seq)
		}
		rp = &engine.LogPoint{Segment: l.Segment, Offset: c.RPOff}
	}
	var lvl *engine.InstalledLevel
	if !c.Move {
		tr, err := r.translator()
		if err != nil {
			return err
		}
		lvl = &engine.InstalledLevel{Height: int(c.Height), Pairs: c.Pairs, KVBytes: c.KVBytes, Nodes: c.Nodes}
		if c.Root != 0 {
			if lvl.Root, err = tr.Translate(c.Root, false); err != nil {
				return err
			}
		}
		for _, s := range c.Segments {
			local, ok := r.index.Lookup(s)
			if !ok {
				return fmt.Errorf("%w: level segment %d was never shipped", ErrUnmapped, s)
			}
			lvl.Segments = append(lvl.Segments, local)
		}
		if len(lvl.Segments) != len(r.built) {
			return fmt.Errorf("%w: level of %d segments, %d shipped", ErrOutOfOrder, len(lvl.Segments), len(r.built))
		}
		for s := range r.refs {
			lvl.LogRefs = append(lvl.LogRefs, s)
		}
	}
	if err := r.backup.ApplyCompaction(info, lvl, rp); err != nil {
		return err
	}
	r.compacting, r.built, r.index = false, nil, nil
	r.retired = NewSegMap()
	return nil
}

// logFree drops the local copy of a freed primary log segment; while a
// compaction runs, its merge may still name the segment, so the mapping
// is kept (retired) until the compaction is installed. A local copy of the
// same number under another sequence is not the freed segment and stays.
func (r *Replica) logFree(c *Command) error {
	if r.freed == nil {
		r.freed = map[logID]bool{}
	}
	r.freed[logID{c.Segment, c.Seq}] = true
	l, ok := r.backup.AdoptedLog(c.Segment)
	if !ok {
		return nil
	}
	if l.Seq != c.Seq {
		return fmt.Errorf("%w: free of log segment %d seq %d, this backup holds it with seq %d", ErrOutOfSync, c.Segment, c.Seq, l.Seq)
	}
	if r.compacting {
		r.retired.Remove(c.Segment) // a segment number the log reused and freed again
		_ = r.retired.Add(c.Segment, l.Segment)
	}
	return r.backup.DropLog(c.Segment)
}

// abortLocked frees the segments of a compaction that never completed
// (the primary restarted it, or the backup is being closed).
func (r *Replica) abortLocked() {
	for _, s := range r.built {
		r.vol.FreeSegment(s)
	}
	r.compacting, r.built, r.index = false, nil, nil
}

// Close frees what an unfinished compaction allocated.
func (r *Replica) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.abortLocked()
}

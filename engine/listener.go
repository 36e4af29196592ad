package engine

import "sync/atomic"

// Listener receives a region's events: the hooks replication builds on.
// Callbacks run synchronously on the goroutine doing the work (a writer for
// log events, the compaction or GC goroutine for compaction and log-free
// events) and must not call back into the region. Byte slices are valid
// only during the call.
//
// LogAppended and LogSealed run under the region's lock and its log's
// lock: every read and write of the region waits while they run, so they
// must not block (no waiting for another process). A listener that needs
// something before a seal (replication: the backups must have freed the
// buffer half the next segment reuses) implements SealGate: the engine
// then waits for it before the seal, without locks. The other events run
// on the background goroutines without region locks; blocking there holds
// back compactions and GC only (replication's flow control).
type Listener interface {
	// LogAppended reports a record appended to the log tail at Ptr.
	LogAppended(LogAppend)
	// LogSealed reports that the tail segment filled, was persisted, and
	// that appends continue in segment Next.
	LogSealed(LogSeal)
	// LogFlushed reports that the partly filled tail was persisted up to
	// End before an L0 compaction (so every pointer of the new L1 is
	// translatable on a replica that flushes too).
	LogFlushed(LogFlush)
	// CompactionStarted reports a compaction of level Src into Dst.
	CompactionStarted(CompactionInfo)
	// SegmentBuilt reports one finished segment of the new level, in build
	// order (children before parents).
	SegmentBuilt(CompactionInfo, BuiltSegment)
	// CompactionDone reports the installed level (after the metadata commit).
	CompactionDone(CompactionInfo, LevelInfo)
	// LogFreed reports a log segment removed from the region's log (its
	// records are dead, or GC relocated the live ones). Pointers into it
	// that compactions build later are written as dead pointers (segment
	// 0): the newer data that shadows them is what reads find.
	LogFreed(LogFree)
}

// LogFree names a freed log segment by its number and the allocation
// sequence it was freed under: the number alone is reused by the log.
type LogFree struct {
	Region  uint64
	Segment uint64
	Seq     uint64 // the segment's sequence (its records' seed)
}

// LogAppend describes one appended record.
type LogAppend struct {
	Region  uint64
	Ptr     uint64
	Segment uint64
	Seq     uint64 // the segment's sequence: the seed of the record's checksum
	Offset  int64
	End     uint64 // the log position after the record (what Replicator.WaitReplicated gets)
	Record  []byte // the encoded record (nil unless the listener wants records)
	// Held: the listener's TryHoldAppend took what this LogAppended needs
	// (AppendHolder); ReleaseAppend follows it.
	Held bool
}

// LogSeal describes a filled log segment.
type LogSeal struct {
	Region  uint64
	Segment uint64
	Seq     uint64 // the sealed segment's sequence
	Index   uint64 // position of the segment in the region's log
	End     int64
	Next    uint64
	NextSeq uint64
}

// LogFlush describes a tail flush.
type LogFlush struct {
	Region  uint64
	Segment uint64
	Seq     uint64 // the segment's records' seed: with Segment, its identity
	End     int64
}

// CompactionInfo names a compaction. Src 0 is L0. Move is set when Src is
// moved to Dst without rewriting (Dst was empty).
type CompactionInfo struct {
	Region uint64
	Src    int
	Dst    int
	Move   bool
}

// BuiltSegment is one finished index segment of a level being built.
type BuiltSegment struct {
	Segment uint64
	Seq     uint64
	Data    []byte // the whole segment as written
}

// LevelInfo describes an installed level.
type LevelInfo struct {
	Level    int
	Root     uint64
	Height   int
	Pairs    int64
	KVBytes  int64
	Nodes    int64
	Segments []uint64
	// Seqs are the segments' allocation sequences (Segments[i] was
	// allocated as Seqs[i]): with Segments, they tell a level apart from
	// any other the region had, also one of the same shape in reused
	// segments.
	Seqs []uint64
}

// Replicator makes a region's writes wait for replication: a write is
// acknowledged (Put and Delete return) only once WaitReplicated(pos)
// returned nil for the log position after its record (LogAppend.End). It
// is called without region locks, from the writer's goroutine.
//
// WaitReplicated is also what reads of L0 records and L0 compactions ask
// (commit.go, compaction.go): a record enters a level only once it
// returned nil for the frozen L0's end.
type Replicator interface {
	WaitReplicated(pos uint64) error
}

// ReplicatedProbe is implemented by Replicators that can tell without
// waiting whether WaitReplicated(pos) would return nil at once: Replicated
// must be true only then, and must never block (it is asked on a server's
// polling goroutine, Region.TryGet). A Replicator that is no probe makes
// every read of an L0 key wait (Get), as one whose Replicated is false.
type ReplicatedProbe interface {
	Replicated(pos uint64) bool
}

// Waiter is implemented by Replicators that can say whether a write
// waits for them: Waits false promises that WaitReplicated (and a
// WriteGate's WaitAcknowledged) return without waiting for other
// goroutines (Region.WritesWait). A Replicator that is no Waiter waits.
type Waiter interface {
	Waits() bool
}

// TryAcknowledger is implemented by Replicators that can tell without
// waiting that a write is acknowledged: TryAcknowledged(pos) true
// promises that the wait for pos (a WriteGate's WaitAcknowledged, else
// WaitReplicated) would return nil at once; false says nothing, and the
// write is waited for as usual. It may do the replicator's own work to
// get there (post what is appended, collect completions), but must not
// block: TryPutOnce asks it on a server's polling goroutine right after
// the append, and a write it acknowledged is answered there, with no
// hand-off to the region's acknowledger.
type TryAcknowledger interface {
	TryAcknowledged(pos uint64) bool
}

// WriteGate is implemented by Replicators that acknowledge a client write
// on more than "replicated" (a minimum number of copies): AdmitWrite is
// asked before the write's record is appended (an error refuses it with
// nothing appended), and WaitAcknowledged replaces WaitReplicated after the
// append (an error refuses it with its record in the log: indeterminate).
// Reads and compactions still ask only WaitReplicated. Both are called
// without region locks, from the writer's goroutine.
type WriteGate interface {
	AdmitWrite() error
	WaitAcknowledged(pos uint64) error
}

// TryWriteGate is implemented by WriteGates whose AdmitWrite may wait for
// other goroutines (a lock they hold while they post to backups):
// TryAdmitWrite answers without waiting, told false when it cannot tell
// now, and then the writer that must not wait (TryPutOnce) declines. Told
// true, err is what AdmitWrite would have returned.
type TryWriteGate interface {
	TryAdmitWrite() (told bool, err error)
}

// AppendHolder is implemented by record listeners whose LogAppended takes
// a lock other goroutines may hold while they wait (replication's mirror:
// its waiters post to the backups under it, which over tcp waits for a
// slow one). For a writer that must not wait (TryPutOnce), the engine
// calls TryHoldAppend under the region's and the log's locks right
// before the record is encoded: false (nothing held) declines the write
// with nothing changed; true holds what LogAppended needs, and the next
// LogAppended, whose event says Held, runs without waiting for it, until
// ReleaseAppend, which follows right after that LogAppended. A record
// listener that is no AppendHolder makes TryPutOnce decline every write.
// Both must not block.
type AppendHolder interface {
	TryHoldAppend() bool
	ReleaseAppend()
}

// SealGate is implemented by Listeners whose LogSealed has a
// precondition that may take time (a replication stream's backups must
// have persisted the segment that last used the buffer half the next one
// reuses, and hold the tail being sealed). Before a write or an L0 freeze
// that may seal the log's tail, the engine asks SealReady under the
// region's lock; when it is false it releases the lock, calls WaitSeal,
// and starts the write over (asking again). SealReady must stay true once
// true until the next LogSealed (the engine relies on it while it holds
// the lock), and WaitSeal must return only once SealReady held (or the
// listener is closed, after which SealReady is true), else a writer
// spins. LogSealed may still wait when a seal was not admitted: a
// request-table checkpoint (at an L0 freeze or a merge) whose chunks
// seal the tail more than once, or a checkpoint chunk appended to the
// old tail just before the seal (its WRITEs are waited for). That is the
// listener's fallback, not the path of a write.
type SealGate interface {
	// SealReady reports, without blocking, whether LogSealed may run now
	// without waiting. Called under the region's lock.
	SealReady() bool
	// WaitSeal waits, bounded by the listener's own timeout, until
	// SealReady (or until the listener gave up: the engine goes on
	// either way). Called without region locks.
	WaitSeal()
}

// RecordListener is implemented by listeners that want LogAppend.Record.
type RecordListener interface {
	WantsRecords() bool
}

// hooks holds the region's optional Listener; set and read atomically,
// so a listener may be detached while background work runs.
type hooks struct{ p atomic.Pointer[listenerBox] }

type listenerBox struct {
	l       Listener
	records bool
}

func (h *hooks) set(l Listener) {
	if l == nil {
		h.p.Store(nil)
		return
	}
	rl, ok := l.(RecordListener)
	h.p.Store(&listenerBox{l: l, records: ok && rl.WantsRecords()})
}

func (h *hooks) get() Listener {
	if b := h.p.Load(); b != nil {
		return b.l
	}
	return nil
}

// sealGate is the listener's SealGate, or nil.
func (h *hooks) sealGate() SealGate {
	if g, ok := h.get().(SealGate); ok {
		return g
	}
	return nil
}

func (h *hooks) wantsRecords() bool {
	b := h.p.Load()
	return b != nil && b.records
}

// appendHolder is the listener's AppendHolder, or nil.
func (h *hooks) appendHolder() AppendHolder {
	if a, ok := h.get().(AppendHolder); ok {
		return a
	}
	return nil
}

func (h *hooks) LogAppended(e LogAppend) {
	if l := h.get(); l != nil {
		l.LogAppended(e)
	}
}

func (h *hooks) LogSealed(e LogSeal) {
	if l := h.get(); l != nil {
		l.LogSealed(e)
	}
}

func (h *hooks) LogFlushed(e LogFlush) {
	if l := h.get(); l != nil {
		l.LogFlushed(e)
	}
}

func (h *hooks) CompactionStarted(c CompactionInfo) {
	if l := h.get(); l != nil {
		l.CompactionStarted(c)
	}
}

func (h *hooks) SegmentBuilt(c CompactionInfo, s BuiltSegment) {
	if l := h.get(); l != nil {
		l.SegmentBuilt(c, s)
	}
}

func (h *hooks) CompactionDone(c CompactionInfo, li LevelInfo) {
	if l := h.get(); l != nil {
		l.CompactionDone(c, li)
	}
}

func (h *hooks) LogFreed(e LogFree) {
	if l := h.get(); l != nil {
		l.LogFreed(e)
	}
}

// NopListener ignores every event; embed it to implement only some.
type NopListener struct{}

func (NopListener) LogAppended(LogAppend)                     {}
func (NopListener) LogSealed(LogSeal)                         {}
func (NopListener) LogFlushed(LogFlush)                       {}
func (NopListener) CompactionStarted(CompactionInfo)          {}
func (NopListener) SegmentBuilt(CompactionInfo, BuiltSegment) {}
func (NopListener) CompactionDone(CompactionInfo, LevelInfo)  {}
func (NopListener) LogFreed(LogFree)                          {}

package replication

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/rdma"
	"go.uber.org/zap"
)

// Link carries one region's commands to one backup. Send returns once the
// backup applied the command (or failed it), with the backup's answer (its
// state, for a check). Sends are serial per link.
type Link interface {
	Send(ctx context.Context, c *Command) ([]byte, error)
}

// ShipperConfig configures the primary side of one region's replication.
type ShipperConfig struct {
	Region  *engine.Region
	Epoch   uint64
	Mode    Mode
	SegSize int64
	// Mirror copies the log tail into the backups' buffers; its backups
	// and Links pair up by Name.
	Mirror *Mirror
	Links  map[string]Link
	// Credits bounds the index segments queued for one backup (flow
	// control for Send-Index; default 4).
	Credits int
	// Timeout bounds one command (default 30 s); a backup that does not
	// answer in time is dropped.
	Timeout time.Duration
	// HungAfter, if positive and below Timeout, drops a backup whose
	// outstanding commands or mirror WRITEs complete nothing for that
	// long (ErrBackupHung; hung.go): measured on completions, per
	// channel, never on idleness. The drop is a failed command's: the
	// backup is marked dead, dropped from the mirror (reported through
	// OnDrop), and only then do the stream's waits (the next segment
	// switch) go on without it. Zero: only Timeout bounds a backup that
	// stopped answering.
	HungAfter time.Duration
	// hungTicks, if set, drives the hang watchdog instead of a ticker of
	// HungAfter/4, and hungSampled is told after each of its samples
	// (tests: injected time).
	hungTicks   <-chan time.Time
	hungSampled chan<- struct{}
	// Rebase, for a region promoted from a backup (PromotedPairs), is sent
	// to every Send-Index backup not in Preseeded before the check: their
	// log maps still name the old primary's segments (a pre-seeded one's
	// name this primary's).
	Rebase []RebasePair
	// OnDrop, if set, is called (on a goroutine of its own) for every
	// backup dropped from the stream while it is not closed.
	OnDrop func(name string, err error)
	// Strict: once a backup is dropped no write is acknowledged
	// (ErrBackupDropped) — every backup of the region's group must hold an
	// acknowledged write, so a managed cluster's master first redoes the
	// group. Flushes still reach the backups left.
	Strict bool
	// MinCopies is the fewest copies, the primary counted, that must hold
	// a write before it is acknowledged (copies.go; 0 means 1): below it
	// writes fail with ErrTooFewCopies. Joining names backups of the stream
	// that count as no copy (joining backups: never promoted); with no
	// other backup live, the primary syncs each write before its
	// acknowledgement.
	MinCopies int
	Joining   []string
	// Preseeded names the backups PreSeed copied the region to while it
	// served: they get only what changed since, then the check (a full
	// seed if either fails).
	Preseeded map[string]*Preseeded
	// LogID (Build-Index) names this primaryship's log: backups name the
	// point they applied up to by it, so it must stay the same across the
	// streams of one primaryship (re-attaches) and never be reused for
	// another (0: every backup is seeded whole).
	LogID uint64
	// Handover (Build-Index), for a region promoted from a backup
	// (Replica.Handover): the old primary's records the other backups may
	// lack are caught up from it.
	Handover *Handover
	Log      *zap.Logger
}

// Shipper is the primary side of one region's replication: it is the
// region's engine.Listener (log records into the Mirror, segment flushes,
// and for Send-Index the compactions' segments, levels and log frees as
// commands to every backup, in order) and its engine.Replicator (writes
// wait until every live backup holds their record). A backup whose command
// or WRITE fails, or that hangs (nothing it had outstanding completes for
// HungAfter: hung.go), is dropped and logged; writes fail with
// ErrNoBackups once none is left. Attach it before writes start.
type Shipper struct {
	engine.NopListener
	cfg   ShipperConfig
	shift uint
	base  uint64 // the log index of mirror generation 0

	mu        sync.Mutex
	cond      *sync.Cond
	gen       uint64 // the tail's mirror generation
	tailSeg   uint64
	tailSeq   uint64
	rpSeg     uint64 // the last L0 flush point (the next L0 compaction's recovery point)
	rpSeq     uint64
	rpOff     int64
	switching bool // LogSealed is between the mirror's switch and the sealed flush's enqueue
	// sealStalls counts LogSealed calls that had to wait (a seal the
	// engine did not admit through SealReady).
	sealStalls atomic.Uint64
	served     atomic.Bool // Serve made it the region's listener
	backups    []*sender
	sent       uint64 // command bytes sent, summed over backups
	closed     bool
	stopCtx    context.Context
	stopFunc   context.CancelFunc
	wg         sync.WaitGroup
}

// sender is one backup's ordered command queue.
type sender struct {
	name       string
	link       Link // a watchedLink: every send of the stream goes through it
	queue      []*Command
	indexQueue int    // index segments queued or in flight
	sealedDone uint64 // sealed flushes the backup completed
	shipped    uint64 // index segments the backup applied
	// dead: nothing more is queued for or sent to it (killLocked); left:
	// it is out of the mirror too, and the stream's waits go on without
	// it (leave). Never left before dead; a dead backup not yet left
	// blocks every wait (hung.go: dropping a backup).
	dead bool
	left bool
	why  error // why it is dead (killLocked)
	// The hang watchdog's view (hung.go): a Send in flight, how many
	// returned, and how to end the one in flight.
	busy   bool
	sends  uint64
	cancel context.CancelFunc
}

// NewShipper makes the primary side of cfg.Region's replication: nothing
// is sent and the region is not touched until Attach.
func NewShipper(cfg ShipperConfig) (*Shipper, error) {
	if cfg.Region == nil || cfg.Mirror == nil {
		return nil, errors.New("replication: a shipper needs a region and a mirror")
	}
	if cfg.Credits <= 0 {
		cfg.Credits = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	s := &Shipper{cfg: cfg}
	for s.shift = 0; int64(1)<<s.shift < cfg.SegSize; s.shift++ {
	}
	s.cond = sync.NewCond(&s.mu)
	s.stopCtx, s.stopFunc = context.WithCancel(context.Background())
	return s, nil
}

// Attach brings every backup in sync with the region: it seeds the mirror
// with the log tail written so far, checks every Send-Index backup against
// the region (catching up one that only lost the end of the log, seeding
// one that missed more), or starts Build-Index backups from their applied
// point, waits until every live backup holds all that, and tells them
// their copies are complete (IN_SYNC). A backup that cannot be reached or
// seeded is dropped (OnDrop). It returns an error, and the shipper is
// closed, when the stream cannot start: ctx ended (every send in flight
// ends with it) or no backup could be brought in sync in time.
//
// The region must be still from Attach until Serve: no writes,
// compactions or GC (a region server opens its volume with
// Options.HoldBackground and quiesces a serving region). Attach takes no
// lock of its caller's and may run for as long as seeds take: a region
// server runs it without its map lock.
func (s *Shipper) Attach(ctx context.Context) (err error) {
	stop := context.AfterFunc(ctx, s.stopFunc)
	defer func() {
		stop()
		if err != nil {
			s.Close()
		}
	}()
	cfg := s.cfg
	tail, err := cfg.Region.LogTail()
	if err != nil {
		return err
	}
	s.base, s.tailSeg, s.tailSeq = tail.Index, tail.Segment, tail.Seq
	id := cfg.Region.Desc().ID
	if _, err := cfg.Mirror.Append(0, replwire.Marker{Region: id, Segment: tail.Segment, Seq: tail.Seq, Index: tail.Index}.Encode()); err != nil {
		return err
	}
	if tail.Offset > engine.SegmentHeaderSize {
		if _, err := cfg.Mirror.Append(engine.SegmentHeaderSize, tail.Image[engine.SegmentHeaderSize:]); err != nil {
			return err
		}
	}
	cfg.Mirror.OnDrop(s.mirrorDropped)
	if cfg.HungAfter > 0 && cfg.HungAfter < cfg.Timeout {
		// From the first command on: a backup hung during the attach
		// (its check, seed, catch-up, the tail) is dropped as in service.
		s.wg.Add(1)
		go s.watchHung(cfg.hungTicks, cfg.HungAfter/4)
	}
	var check *Command
	if cfg.Mode == SendIndex {
		check = &Command{Kind: CmdCheck, Region: cfg.Region.Desc().ID, Epoch: cfg.Epoch, Data: primaryState(cfg.Region).Encode()}
	}
	for name, link := range cfg.Links {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("replication: attach: %w", err)
		}
		b := &sender{name: name}
		l := &watchedLink{s: s, b: b, l: link}
		b.link = l
		s.mu.Lock() // a mirror drop may look at the backups meanwhile
		s.backups = append(s.backups, b)
		s.mu.Unlock()
		if check != nil {
			// Checked before anything else, while the region is still
			// (no writes, no compaction, no GC): a backup that only lost
			// the end of the log is caught up from the primary's log
			// first; one that missed more (or a new one) is seeded; one
			// that cannot be reached or seeded is dropped.
			var catch []*Command
			var err error
			if pre := cfg.Preseeded[name]; pre != nil {
				// A pre-seeded backup holds the region as it was at its
				// snapshot, which it has moved on from unless nothing
				// happened meanwhile: it gets the delta (nothing when
				// nothing changed), then the check. Its log already names
				// this primary's segments: no promotion's rebase either.
				if err = s.seedDelta(l, check.Region, check.Epoch, pre); err == nil {
					catch, err = s.checkBackup(l, check, false)
				}
				if err != nil {
					cfg.Log.Warn("pre-seeded backup not brought up to date: seeding it whole", zap.Uint64("region", check.Region), zap.String("backup", name), zap.Error(err))
				}
			} else {
				catch, err = s.checkBackup(l, check, true)
			}
			if err != nil && ctx.Err() == nil {
				cfg.Log.Info("backup out of sync: seeding it", zap.Uint64("region", check.Region), zap.String("backup", name), zap.Error(err))
				catch = nil
				if err = s.seed(l, check.Region, check.Epoch); err == nil {
					_, err = s.checkBackup(l, check, false) // a seeded backup passes the check
				}
			}
			if err != nil {
				err = fmt.Errorf("replication: backup %s: %w", name, err)
				s.dropBackup(b, err)
				cfg.Log.Error("backup dropped from the region's replica set", zap.Uint64("region", check.Region), zap.String("backup", name), zap.Error(err))
				continue
			}
			s.mu.Lock()
			b.queue = catch
			s.mu.Unlock()
		}
		if cfg.Mode == BuildIndex {
			// Checked, then caught up or seeded, before anything else,
			// while the region is still.
			if err := s.startBuild(l, id, cfg.Epoch); err != nil {
				err = fmt.Errorf("replication: backup %s: %w", name, err)
				s.dropBackup(b, err)
				cfg.Log.Error("backup dropped from the region's replica set", zap.Uint64("region", id), zap.String("backup", name), zap.Error(err))
				continue
			}
		}
		s.wg.Add(1)
		go s.run(b)
	}
	// Before the region serves, every backup holds what was acknowledged
	// before this stream: the catch-up or seed queued by the check (a
	// promoted primary's adopted tail lives only in its own log; a sealed
	// segment whose flush the previous stream did not deliver), then the
	// tail (appended above, posted only by settle once the catch-up was
	// applied: a new backup's buffer is empty, and a re-attached one's half
	// may hold that undelivered segment).
	if err := s.settle(); err != nil {
		return err
	}
	// Every live backup holds what was acknowledged before: tell them
	// (their copies are complete: promotable), then serve.
	s.mu.Lock()
	s.enqueueLocked(&Command{Kind: CmdInSync})
	s.mu.Unlock()
	if err := s.settle(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("replication: attach: %w", err)
	}
	return nil
}

// Serve makes the attached stream the region's replicator and listener:
// writes from then on are mirrored and wait for the backups. Call it once
// Attach returned nil, the region still still.
func (s *Shipper) Serve() {
	s.served.Store(true)
	// Replicator before listener: a write the listener mirrored always
	// finds the replicator to wait on (Close swaps it for a refusing one
	// before it detaches the listener).
	s.cfg.Region.SetReplicator(s)
	s.cfg.Region.SetListener(s)
}

// settle waits until the queued commands, then the mirrored tail, reached
// every live backup (a late one is dropped); ErrNoBackups is no error.
//
// The order is a safety one. The mirror posts nothing before its first
// Wait, so the tail's first WRITE follows every backup's catch-up: a
// backup the same primary re-attaches keeps its buffer, and the half the
// new tail starts in may hold a sealed segment whose flush the old stream
// never delivered (the catch-up carries it, read from the primary's log).
// Until the backup applied that catch-up, its buffer is the only copy of
// those acknowledged writes it has, and its copy still counts as complete
// (promotable); the tail may overwrite the half only after.
func (s *Shipper) settle() error {
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
	defer cancel()
	if err := s.Idle(ctx); err != nil {
		return fmt.Errorf("replication: catching the backups up at attach: %w", err)
	}
	if err := s.cfg.Mirror.WaitStopped(s.stopCtx, s.cfg.Mirror.Tail(), s.cfg.Timeout); err != nil && !errors.Is(err, ErrNoBackups) {
		return fmt.Errorf("replication: mirroring the tail at attach: %w", err)
	}
	return nil
}

// checkBackup sends the stream's check and returns the catch-up the
// backup needs.
func (s *Shipper) checkBackup(l Link, check *Command, rebase bool) ([]*Command, error) {
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
	defer cancel()
	if rebase && len(s.cfg.Rebase) > 0 {
		rb := &Command{Kind: CmdRebase, Region: check.Region, Epoch: check.Epoch, Data: replwire.EncodeRebase(s.cfg.Rebase)}
		if _, err := l.Send(ctx, rb); err != nil {
			return nil, err
		}
	}
	reply, err := l.Send(ctx, check)
	if err != nil || len(reply) == 0 { // a Build-Index backup has no state to check
		return nil, err
	}
	return s.catchUpCommands(check, reply)
}

// mirrorDropped stops commands to a backup the mirror dropped (its WRITEs
// failed, or the stream dropped it: leave): its buffer no longer holds
// the log, so no flush may persist it. The mirror writes it nothing more,
// so the stream's waits go on without it at once. A drop once the stream
// is closed is its own teardown (the writes it had in flight fail when
// its connections close), not a failed backup: OnDrop does not hear of
// it.
func (s *Shipper) mirrorDropped(name string, err error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if s.cfg.OnDrop != nil && !closed {
		s.cfg.OnDrop(name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range s.backups {
		if b.name != name {
			continue
		}
		if !b.dead {
			s.killLocked(b, err) // a command in flight ends too
			s.logDrop(s.cfg.Region.Desc().ID, name, err)
		}
		b.left = true
		s.cond.Broadcast()
	}
}

// logDrop logs a backup dropped from the region's replica set: at ERROR,
// or at WARN when its server closed the connection itself (a deliberate
// stop).
func (s *Shipper) logDrop(region uint64, backup string, err error) {
	log := s.cfg.Log.Error
	if closedByPeer(err) {
		log = s.cfg.Log.Warn
	}
	log("backup dropped from the region's replica set", zap.Uint64("region", region), zap.String("backup", backup), zap.Error(err))
}

// closedByPeer reports whether a backup's connection ended with its
// server's goodbye (rdma.ErrPeerGone without rdma.ErrPeerLost): the
// server stopped on purpose, where a loss means it died or the link broke.
func closedByPeer(err error) bool {
	return errors.Is(err, rdma.ErrPeerGone) && !errors.Is(err, rdma.ErrPeerLost)
}

// WantsRecords: the mirror needs the records' bytes.
func (s *Shipper) WantsRecords() bool { return true }

// LogAppended copies the record into the mirror (under the log's lock).
func (s *Shipper) LogAppended(a engine.LogAppend) {
	appendRec := s.cfg.Mirror.Append
	if a.Held {
		appendRec = s.cfg.Mirror.AppendHeld
	}
	if _, err := appendRec(a.Offset, a.Record); err != nil {
		s.cfg.Log.Error("mirroring a log record failed", zap.Uint64("region", a.Region), zap.Error(err))
	}
}

// WaitReplicated waits until every live backup holds the log up to pos,
// and, with no backup but joining ones live, until the primary's log is
// durable up to pos. Strict, it fails once a backup was dropped.
func (s *Shipper) WaitReplicated(pos uint64) error {
	_, err := s.waitHeld(pos)
	return err
}

// WaitAcknowledged is WaitReplicated, then the region's MinCopies: the
// acknowledgement of a client write (engine.WriteGate).
func (s *Shipper) WaitAcknowledged(pos uint64) error {
	copies, err := s.waitHeld(pos)
	if err != nil {
		return err
	}
	_, err = ackRule(copies, s.cfg.MinCopies)
	return err
}

// AdmitWrite refuses a client write before its record is appended when it
// could not be acknowledged anyway: a strict stream that dropped a backup,
// no live backup, or fewer copies than MinCopies (engine.WriteGate).
func (s *Shipper) AdmitWrite() error {
	return s.admit(s.cfg.Mirror.Census(s.cfg.Joining))
}

// TryAdmitWrite is AdmitWrite without waiting for the mirror's lock
// (engine.TryWriteGate): told false while another goroutine holds it.
func (s *Shipper) TryAdmitWrite() (told bool, err error) {
	live, copies, dropped, told := s.cfg.Mirror.TryCensus(s.cfg.Joining)
	if !told {
		return false, nil
	}
	return true, s.admit(live, copies, dropped)
}

// TryHoldAppend takes the mirror's lock for the next LogAppended if it is
// free (engine.AppendHolder).
func (s *Shipper) TryHoldAppend() bool { return s.cfg.Mirror.TryHold() }

// ReleaseAppend lets go of what TryHoldAppend took.
func (s *Shipper) ReleaseAppend() { s.cfg.Mirror.Release() }

// admit is AdmitWrite's rule over the mirror's census.
func (s *Shipper) admit(live, copies int, dropped bool) error {
	switch {
	case s.cfg.Strict && dropped:
		return ErrBackupDropped
	case live == 0:
		return ErrNoBackups
	}
	_, err := ackRule(copies, s.cfg.MinCopies)
	return err
}

// mirrorPos is the mirror's position of log position pos; tail false: pos
// names nothing of the mirrored tail to wait for. A position at the start
// of a segment's record area (an empty tail: a scan waits for the log's
// position) names no record of that segment: what precedes it is in
// earlier ones, which the mirror's switch or the attach waited for. The
// mirror may not have appended up to the header of a tail it holds
// nothing of.
func (s *Shipper) mirrorPos(pos uint64) (p Pos, tail bool) {
	idx, off := pos>>s.shift, int64(pos&(1<<s.shift-1))
	if idx >= s.base && off > engine.SegmentHeaderSize {
		return Pos{gen: idx - s.base, end: off}, true
	}
	return Pos{}, false
}

// TryAcknowledged reports, without waiting (engine.TryAcknowledger),
// whether WaitAcknowledged(pos) would return nil at once: it posts what
// is appended and not posted yet and collects the completions, so over
// transports whose WRITEs complete as they are posted (shm, loopback) a
// write just appended is acknowledged here. False says nothing: the
// mirror's lock was held, a backup has not completed the WRITE, or the
// write is to be refused or to wait for the primary's own fdatasync
// (WaitAcknowledged tells).
func (s *Shipper) TryAcknowledged(pos uint64) bool {
	c, ok := s.tryHeld(pos)
	if !ok {
		return false
	}
	_, err := ackRule(c.outside, s.cfg.MinCopies)
	return err == nil
}

// Replicated reports, without waiting (engine.ReplicatedProbe), whether
// WaitReplicated(pos) would return nil at once: a read on a server's
// polling goroutine of a key whose record is in L0. Like TryAcknowledged
// it posts what is appended and not posted yet.
func (s *Shipper) Replicated(pos uint64) bool {
	_, ok := s.tryHeld(pos)
	return ok
}

// tryHeld is waitHeld without waiting: ok true when waitHeld(pos) would
// return at once without an error, with the census it would count.
func (s *Shipper) tryHeld(pos uint64) (census, bool) {
	p, tail := s.mirrorPos(pos)
	held, c, told := s.cfg.Mirror.TryHeld(p, tail, s.cfg.Joining)
	if !told || !held || (s.cfg.Strict && c.dropped) || c.live == 0 {
		return c, false
	}
	if sync, _ := ackRule(c.outside, 1); sync && !s.cfg.Region.Synced(pos) {
		return c, false
	}
	return c, true
}

// waitHeld waits until the stream's group holds the log up to pos and
// returns how many backups, joining ones not counted, hold it.
func (s *Shipper) waitHeld(pos uint64) (int, error) {
	if p, tail := s.mirrorPos(pos); tail {
		if !s.cfg.Mirror.Acked(p) { // else done already (a read of a settled write)
			setLabel(labelLog)
			err := s.cfg.Mirror.WaitTimeout(p, s.cfg.Timeout)
			setLabel(labelInsert) // the writer's own label (region server handlers)
			if err != nil {
				return 0, err
			}
		}
	}
	// Log sealed before the stream started (idx < base) is on every backup
	// that passed the attach's check and catch-up (or seed); the tail
	// mirrored since, on every live one. Either way the group holds it
	// only while no backup was dropped (strict: every backup of the group
	// must) and one is left. A backup dropped after the wait saw it hold
	// the record is counted lost too (drops are recorded under the
	// mirror's lock before a wait can count without it).
	live, copies, dropped := s.cfg.Mirror.Census(s.cfg.Joining)
	switch {
	case s.cfg.Strict && dropped:
		return 0, ErrBackupDropped
	case live == 0:
		return 0, ErrNoBackups
	}
	if sync, _ := ackRule(copies, 1); sync {
		if err := s.cfg.Region.SyncTo(pos); err != nil {
			return 0, err
		}
	}
	return copies, nil
}

// CPU profile labels (component=...) of replication work. pprof cannot
// read a goroutine's labels back, so code that relabels a caller's
// goroutine restores the label that caller runs under.
var (
	labelLog        = labelCtx("log-replication")
	labelIndex      = labelCtx("send-index")
	labelInsert     = labelCtx("insert")
	labelCompaction = labelCtx("compaction")
)

func labelCtx(name string) context.Context {
	return pprof.WithLabels(context.Background(), pprof.Labels("component", name))
}

func setLabel(ctx context.Context) { pprof.SetGoroutineLabels(ctx) }

// halfFreeLocked reports whether the buffer half the next segment reuses
// is free at every backup in the mirror: each persisted the segment that
// last used it, or left the mirror (a dropped backup counts until no
// WRITE can reach it: hung.go).
func (s *Shipper) halfFreeLocked() bool {
	return !s.switching && s.allLocked(func(b *sender) bool { return b.sealedDone >= s.gen })
}

// SealReady reports whether LogSealed would run without waiting
// (engine.SealGate): the next half is free and every live backup holds the
// tail being sealed, or the stream is closed.
func (s *Shipper) SealReady() bool {
	s.mu.Lock()
	closed, free := s.closed, s.halfFreeLocked()
	s.mu.Unlock()
	return closed || (free && s.cfg.Mirror.TailHeld())
}

// WaitSeal waits until SealReady (engine.SealGate), without region locks:
// replication's flow control at a segment switch. The wait for the half
// ends as LogSealed's would: when the backups behind flushed, or were
// dropped (a command's Timeout, or HungAfter), or the stream closed; the
// wait for the tail's WRITEs is bounded by Timeout, which drops a backup
// still behind.
func (s *Shipper) WaitSeal() {
	s.mu.Lock()
	for !s.closed && !s.halfFreeLocked() {
		s.cond.Wait()
	}
	closed := s.closed
	s.mu.Unlock()
	if !closed {
		_ = s.cfg.Mirror.WaitTimeout(s.cfg.Mirror.Tail(), s.cfg.Timeout) // ErrNoBackups: nothing to wait for
	}
}

// LogSealed switches the mirror to the next segment and queues the sealed
// segment's flush. The engine calls it under the region's and the log's
// locks once SealReady (it waited in WaitSeal for that, unlocked), so it
// waits for nothing; when the seal was not admitted (sealStalls counts
// those), it waits here for what SealReady checks: the next half free,
// then the tail's WRITEs complete.
func (s *Shipper) LogSealed(e engine.LogSeal) {
	held := s.cfg.Mirror.TailHeld() // the mirror's lock is never taken under s.mu
	s.mu.Lock()
	if !s.closed && (!s.halfFreeLocked() || !held) {
		s.sealStalls.Add(1)
	}
	for !s.closed && !s.halfFreeLocked() {
		s.cond.Wait()
	}
	s.switching = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
	err := s.cfg.Mirror.Switch(ctx, e.Next)
	cancel()
	if err != nil {
		s.cfg.Log.Error("switching the log mirror failed", zap.Uint64("region", e.Region), zap.Error(err))
	}
	if _, err := s.cfg.Mirror.Append(0, replwire.Marker{Region: e.Region, Segment: e.Next, Seq: e.NextSeq, Index: e.Index + 1}.Encode()); err != nil {
		s.cfg.Log.Error("marking the mirrored tail failed", zap.Uint64("region", e.Region), zap.Error(err))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueueLocked(&Command{Kind: CmdFlush, Segment: e.Segment, Seq: e.Seq, End: e.End, Half: uint8(s.gen & 1), Sealed: true})
	s.gen++
	s.tailSeg, s.tailSeq = e.Next, e.NextSeq
	s.switching = false
	s.cond.Broadcast()
}

// LogFlushed queues a partial flush of the tail before an L0 compaction,
// once the mirror's WRITEs reached it, and remembers the recovery point.
func (s *Shipper) LogFlushed(e engine.LogFlush) {
	s.mu.Lock()
	s.rpSeg, s.rpSeq, s.rpOff = e.Segment, e.Seq, e.End
	gen, cur := s.gen, e.Segment == s.tailSeg
	s.mu.Unlock()
	if !cur {
		return // sealed: its full flush is queued already
	}
	if e.End > engine.SegmentHeaderSize { // an empty tail (just switched, or recovered) has nothing to wait for
		ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
		err := s.cfg.Mirror.Wait(ctx, Pos{gen: gen, end: e.End})
		cancel()
		if err != nil {
			// No backup holds the bytes (none is left, or closing): no flush.
			s.cfg.Log.Warn("waiting for the mirror before a flush failed", zap.Uint64("region", e.Region), zap.Error(err))
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen == gen { // else sealed meanwhile: its full flush went first
		s.enqueueLocked(&Command{Kind: CmdFlush, Segment: e.Segment, Seq: s.tailSeq, End: e.End, Half: uint8(gen & 1)})
	}
}

// CompactionStarted queues the start of a compaction (Send-Index).
func (s *Shipper) CompactionStarted(c engine.CompactionInfo) {
	if s.cfg.Mode != SendIndex {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.enqueueLocked(&Command{Kind: CmdCompactionStart, Src: uint8(c.Src), Dst: uint8(c.Dst), Move: c.Move})
}

// SegmentBuilt queues a copy of a finished index segment for every live
// backup, waiting while a backup has Credits segments queued.
func (s *Shipper) SegmentBuilt(c engine.CompactionInfo, b engine.BuiltSegment) {
	if s.cfg.Mode != SendIndex {
		return
	}
	setLabel(labelIndex)
	defer setLabel(labelCompaction) // the engine's compaction goroutine
	cmd := &Command{Kind: CmdIndexSegment, Src: uint8(c.Src), Dst: uint8(c.Dst), Segment: b.Segment, Data: append([]byte(nil), b.Data...)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed && !s.allLocked(func(b *sender) bool { return b.indexQueue < s.cfg.Credits }) {
		s.cond.Wait()
	}
	s.enqueueLocked(cmd)
}

// CompactionDone queues the installed level (Send-Index).
func (s *Shipper) CompactionDone(c engine.CompactionInfo, l engine.LevelInfo) {
	if s.cfg.Mode != SendIndex {
		return
	}
	cmd := &Command{Kind: CmdCompactionDone, Src: uint8(c.Src), Dst: uint8(c.Dst), Move: c.Move,
		Root: l.Root, Height: uint32(l.Height), Pairs: l.Pairs, KVBytes: l.KVBytes, Nodes: l.Nodes, Segments: l.Segments}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.Src == 0 {
		cmd.RPSeg, cmd.Seq, cmd.RPOff = s.rpSeg, s.rpSeq, s.rpOff
	}
	s.enqueueLocked(cmd)
}

// LogFreed queues the trim of a freed log segment (Send-Index). GC frees
// a segment once it re-appended the live records: those copies sit in the
// tail, indexed only by the primary's L0, so the backups first persist the
// tail (a partial flush) and only then drop the segment: a backup's log
// never lacks a record the region still holds.
func (s *Shipper) LogFreed(f engine.LogFree) {
	if s.cfg.Mode != SendIndex {
		return
	}
	// Not in the middle of a switch: the mirror's tail and s.gen agree,
	// and a segment sealed meanwhile has its flush queued already.
	s.mu.Lock()
	for s.switching && !s.closed {
		s.cond.Wait()
	}
	s.mu.Unlock()
	tail := s.cfg.Mirror.Tail()
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
	err := s.cfg.Mirror.Wait(ctx, tail)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && tail.gen == s.gen && tail.end > engine.SegmentHeaderSize {
		s.enqueueLocked(&Command{Kind: CmdFlush, Segment: s.tailSeg, Seq: s.tailSeq, End: tail.end, Half: uint8(s.gen & 1)})
	}
	s.enqueueLocked(&Command{Kind: CmdLogFree, Segment: f.Segment, Seq: f.Seq})
}

// allLocked reports whether ok holds for every backup still in the
// mirror: a backup counts until it left (leave), and a dead one that has
// not left yet holds no condition (its drop is under way).
func (s *Shipper) allLocked(ok func(*sender) bool) bool {
	for _, b := range s.backups {
		if !b.left && (b.dead || !ok(b)) {
			return false
		}
	}
	return true
}

func (s *Shipper) enqueueLocked(c *Command) {
	c.Region, c.Epoch = s.cfg.Region.Desc().ID, s.cfg.Epoch
	for _, b := range s.backups {
		if b.dead {
			continue
		}
		b.queue = append(b.queue, c)
		if c.Kind == CmdIndexSegment {
			b.indexQueue++
		}
	}
	s.cond.Broadcast()
}

// run sends one backup's commands in order until Close or a failure.
func (s *Shipper) run(b *sender) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		for !s.closed && !b.dead && len(b.queue) == 0 {
			s.cond.Wait()
		}
		if s.closed || b.dead {
			s.mu.Unlock()
			return
		}
		c := b.queue[0]
		s.mu.Unlock()
		if s.cfg.Mirror.IsDropped(b.name) {
			err := s.cfg.Mirror.Dropped()[b.name] // the mirror's reason, as its onDrop will report it
			if err == nil {
				err = errors.New("replication: the backup's mirror connection failed")
			}
			s.mirrorDropped(b.name, err)
			return
		}
		ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
		label := labelIndex
		if c.Kind == CmdFlush || c.Kind == CmdLogFree {
			label = labelLog
		}
		setLabel(label)
		_, err := b.link.Send(ctx, c)
		cancel()
		s.mu.Lock()
		if b.dead { // dropped meanwhile (the mirror, the hang watchdog): the queue is gone, the dropper has it leave
			s.mu.Unlock()
			return
		}
		if err != nil {
			// The command did not complete: nothing it stood for is done
			// (a flush's half stays counted as unflushed) until the backup
			// left the mirror (hung.go).
			if s.closed {
				s.mu.Unlock()
				return
			}
			err = fmt.Errorf("replication: backup %s: %s: %w", b.name, c.Kind, err)
			s.killLocked(b, err)
			s.mu.Unlock()
			s.leave(b, err)
			s.logDrop(c.Region, b.name, err)
			return
		}
		b.queue = b.queue[1:]
		if c.Kind == CmdIndexSegment {
			b.indexQueue--
			b.shipped++
		}
		if c.Kind == CmdFlush && c.Sealed && len(c.Data) == 0 { // a mirrored segment (not a catch-up)
			b.sealedDone++
		}
		s.sent += uint64(c.Size())
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// catchUpCommands turns a backup's answer to the check into flushes of
// what it lacks of the sealed log (read back from the primary's log).
func (s *Shipper) catchUpCommands(check *Command, reply []byte) ([]*Command, error) {
	mine, err := replwire.DecodeState(check.Data)
	if err != nil {
		return nil, err
	}
	theirs, err := replwire.DecodeState(reply)
	if err != nil {
		return nil, fmt.Errorf("the backup's state: %w", err)
	}
	gaps, err := catchUp(mine.Logs, theirs.Logs)
	if err != nil {
		return nil, err
	}
	var out []*Command
	for _, g := range gaps {
		data, err := s.cfg.Region.ReadLog(g.Segment, g.Seq, g.From, g.End)
		if err != nil {
			return nil, fmt.Errorf("catching up log segment %d: %w", g.Segment, err)
		}
		out = append(out, &Command{Kind: CmdFlush, Region: check.Region, Epoch: check.Epoch, Segment: g.Segment, Seq: g.Seq,
			End: g.End, Sealed: true, Data: data})
	}
	if len(out) > 0 {
		s.cfg.Log.Info("catching a backup up", zap.Uint64("region", check.Region), zap.Int("segments", len(out)))
	}
	return out, nil
}

// Idle waits until every backup still in the mirror has applied every
// queued command (a dropped backup counts until it left the mirror).
func (s *Shipper) Idle(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
	defer stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.allLocked(func(b *sender) bool { return len(b.queue) == 0 }) {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.cond.Wait()
	}
	return nil
}

// Flush makes every live backup persist the log tail mirrored so far (a
// partial flush, as before an L0 compaction) and waits until they applied
// every queued command: a primary stopping cleanly leaves complete
// backups.
func (s *Shipper) Flush(ctx context.Context) error {
	tail := s.cfg.Mirror.Tail()
	if err := s.cfg.Mirror.Wait(ctx, tail); err != nil {
		return err
	}
	s.mu.Lock()
	if tail.gen == s.gen && tail.end > engine.SegmentHeaderSize {
		s.enqueueLocked(&Command{Kind: CmdFlush, Segment: s.tailSeg, Seq: s.tailSeq, End: tail.end, Half: uint8(s.gen & 1)})
	}
	s.mu.Unlock()
	return s.Idle(ctx)
}

// Retire ends the stream before its region re-attaches (a new epoch or
// group; the region is still: no write, compaction or GC runs). The
// region's replicator refuses from the call on; every command already
// queued for a live backup (the end of a compaction, a log free, a flush)
// is then handed to it, until ctx ends or the backup fails; then the
// stream closes as Close does. Close alone discards queued commands: a
// backup that missed the end of a compaction this way holds other levels
// or another recovery point than the primary, so the next stream's check
// refuses it and it is seeded whole. Retire returns ctx's error when it
// stopped early (a backup left with commands not handed to it is found
// by that check, and seeded).
func (s *Shipper) Retire(ctx context.Context) error {
	s.cfg.Region.ReplaceReplicator(s, Refuse{Err: ErrStreamClosed})
	err := s.Idle(ctx)
	s.Close()
	return err
}

// Confirm is Mirror.Confirm with the stream's timeout, failing once the
// stream closed: a managed primary confirms a read with it before it
// answers (docs/failover.md, "Read contract").
func (s *Shipper) Confirm() error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrStreamClosed
	}
	return s.cfg.Mirror.Confirm(s.cfg.Timeout)
}

// NetBytes is what replication moved to the backups so far: log bytes
// WRITten by the mirror plus command bytes.
func (s *Shipper) NetBytes() uint64 {
	s.mu.Lock()
	sent := s.sent
	s.mu.Unlock()
	return sent + s.cfg.Mirror.Written()
}

// Dropped names the backups dropped so far with why.
func (s *Shipper) Dropped() map[string]error { return s.cfg.Mirror.Dropped() }

// Close detaches from the region and stops the senders (queued commands
// are discarded). The mirror stays the caller's. Refuse first, detach
// after: the region's replicator is first swapped, atomically, for a
// Refuse (if it is still this shipper), so that no write appended from
// then on is acknowledged; writes appended before wait on this shipper,
// which fails them once its mirror closes unless their backups held them.
func (s *Shipper) Close() {
	s.cfg.Region.ReplaceReplicator(s, Refuse{Err: ErrStreamClosed})
	if s.served.Load() {
		s.cfg.Region.SetListener(nil)
	}
	s.mu.Lock()
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	s.stopFunc()
	s.wg.Wait()
}

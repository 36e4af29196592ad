package replication

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/engine"
)

// Seeding a Send-Index backup that holds nothing of the region (a new,
// joining backup) or failed the stream check: CmdReset empties its copy;
// every sealed log segment follows (and the tail up to the recovery point,
// when the recovery point is in the tail), then every level, read from
// the primary's device and shipped segment by segment as a compaction
// from L0 carrying the recovery point. All of it is read from an
// engine.Snapshot, so it may run while the region serves (PreSeed); an
// attach then ships only what changed since (seedDelta) while the region
// is still.

// Preseeded records what PreSeed shipped to a backup: the log segments
// (the primary's numbers, seeds and ends), the levels and the recovery
// point of its snapshot.
type Preseeded struct {
	Logs   []engine.LogSegment
	Levels []engine.LevelInfo
	RP     engine.LogPoint
	RPSeq  uint64 // the recovery point segment's records' seed: with RP.Segment, its identity
}

// sendFunc sends one seed command.
type sendFunc func(c *Command) error

// PreSeed copies region r (a serving primary) to a new backup over l at
// epoch, from a snapshot: the backup ends up holding the region as it was
// at the snapshot, which a later attach (ShipperConfig.Preseeded) brings
// up to date with only what changed. ctx bounds the whole copy, timeout
// each command. The region goes on serving meanwhile; the segments the
// snapshot holds are reused only once it is done.
func PreSeed(ctx context.Context, r *engine.Region, l Link, epoch uint64, timeout time.Duration, log *zap.Logger) (*Preseeded, error) {
	snap, err := r.Snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Release()
	if log == nil {
		log = zap.NewNop()
	}
	send, done := newSeedSend(ctx, timeout, l, r.Desc().ID, epoch, log)
	pre, err := seedFrom(send, snap)
	if err != nil {
		return nil, err
	}
	done("backup pre-seeded while the region serves")
	return pre, nil
}

// seedFrom sends a full seed of snap and returns what it shipped.
func seedFrom(send sendFunc, snap *engine.Snapshot) (*Preseeded, error) {
	pre := &Preseeded{Levels: snap.Levels, RP: snap.RP, RPSeq: snap.RPSeq}
	if err := send(&Command{Kind: CmdReset}); err != nil {
		return nil, err
	}
	for _, ls := range snap.Logs {
		if ls.End == 0 {
			continue // the tail (the mirror re-sends it) or a prepared segment
		}
		if err := sendLog(send, snap, ls.Segment, ls.Seq, engine.SegmentHeaderSize, ls.End); err != nil {
			return nil, err
		}
		pre.Logs = append(pre.Logs, engine.LogSegment{Segment: ls.Segment, Seq: ls.Seq, End: ls.End})
	}
	if end, err := sendTailToRP(send, snap, false); err != nil {
		return nil, err
	} else if end > 0 {
		pre.Logs = append(pre.Logs, engine.LogSegment{Segment: snap.Tail.Segment, Seq: snap.Tail.Seq, End: end})
	}
	for _, li := range snap.Levels {
		if li.Root != 0 {
			if err := sendLevel(send, snap, 0, li); err != nil {
				return nil, err
			}
		}
	}
	return pre, nil
}

// sendLog ships bytes [from, end) of a sealed log segment.
func sendLog(send sendFunc, snap *engine.Snapshot, seg, seq uint64, from, end int64) error {
	data, err := snap.ReadLog(seg, seq, from, end)
	if err != nil {
		return fmt.Errorf("seed: log segment %d: %w", seg, err)
	}
	return send(&Command{Kind: CmdFlush, Segment: seg, Seq: seq, End: end, Sealed: true, Data: data})
}

// sendTailToRP ships the tail up to the recovery point when the recovery
// point is in the tail and a level needs it (the backup installs a level
// only at a recovery point it holds); it returns the end shipped, or 0.
func sendTailToRP(send sendFunc, snap *engine.Snapshot, force bool) (int64, error) {
	if snap.TailImage == nil || !(force || slices.ContainsFunc(snap.Levels, func(l engine.LevelInfo) bool { return l.Root != 0 })) {
		return 0, nil
	}
	// Its data starts at 0 so it is never empty; only [header, End) is
	// persisted.
	end := snap.RP.Offset
	err := send(&Command{Kind: CmdFlush, Segment: snap.Tail.Segment, Seq: snap.Tail.Seq, End: end, Data: snap.TailImage[:end]})
	return end, err
}

// sendLevel ships level li of snap as a compaction from src (0: from L0,
// carrying the recovery point) into li.Level.
func sendLevel(send sendFunc, snap *engine.Snapshot, src int, li engine.LevelInfo) error {
	dst := uint8(li.Level)
	if err := send(&Command{Kind: CmdCompactionStart, Src: uint8(src), Dst: dst}); err != nil {
		return err
	}
	for _, seg := range li.Segments {
		data, err := snap.ReadIndexSegment(seg)
		if err != nil {
			return fmt.Errorf("seed: level %d segment %d: %w", li.Level, seg, err)
		}
		if err := send(&Command{Kind: CmdIndexSegment, Src: uint8(src), Dst: dst, Segment: seg, Data: data}); err != nil {
			return err
		}
	}
	done := &Command{Kind: CmdCompactionDone, Src: uint8(src), Dst: dst, Root: li.Root, Height: uint32(li.Height), Pairs: li.Pairs,
		KVBytes: li.KVBytes, Nodes: li.Nodes, Segments: li.Segments}
	if src == 0 {
		done.RPSeg, done.Seq, done.RPOff = snap.RP.Segment, snap.RPSeq, snap.RP.Offset
	}
	return send(done)
}

// seed brings backup l to the primary's state with a full seed (the
// region is still: an attach).
func (s *Shipper) seed(l Link, region, epoch uint64) error {
	send, done := s.seedSend(l, region, epoch)
	snap, err := s.cfg.Region.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	if _, err := seedFrom(send, snap); err != nil {
		return err
	}
	done("backup seeded")
	return nil
}

// seedDelta brings a backup PreSeed copied to (pre) to the primary's
// state by shipping what changed since: log segments freed since are
// freed, those sealed since (or their rest) sent, the tail up to the
// recovery point sent, and every level that is not the one pre shipped
// sent again (a level emptied since is cleared by a compaction into the
// next one). The region is still. The caller checks the backup after it
// (and falls back to a full seed if that fails).
func (s *Shipper) seedDelta(l Link, region, epoch uint64, pre *Preseeded) error {
	send, done := s.seedSend(l, region, epoch)
	snap, err := s.cfg.Region.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	type id struct{ seg, seq uint64 }
	cur := map[id]bool{}
	for _, ls := range snap.Logs {
		cur[id{ls.Segment, ls.Seq}] = true
	}
	var have []engine.LogSegment
	for _, ls := range pre.Logs {
		if cur[id{ls.Segment, ls.Seq}] {
			have = append(have, ls)
			continue
		}
		if err := send(&Command{Kind: CmdLogFree, Segment: ls.Segment, Seq: ls.Seq}); err != nil {
			return err
		}
	}
	gaps, err := catchUp(snap.Logs, have)
	if err != nil {
		return err
	}
	for _, g := range gaps {
		if err := sendLog(send, snap, g.Segment, g.Seq, g.From, g.End); err != nil {
			return err
		}
	}
	if _, err := sendTailToRP(send, snap, false); err != nil {
		return err
	}
	same := func(a, b engine.LevelInfo) bool {
		return a.Root == b.Root && slices.Equal(a.Segments, b.Segments) && slices.Equal(a.Seqs, b.Seqs)
	}
	shipped := slices.Clone(pre.Levels)
	level := func(ls []engine.LevelInfo, i int) engine.LevelInfo {
		if i-1 < len(ls) {
			return ls[i-1]
		}
		return engine.LevelInfo{Level: i}
	}
	rpMoved := snap.RP != pre.RP || snap.RPSeq != pre.RPSeq
	resent := 0
	for i := 1; i <= max(len(shipped), len(snap.Levels)); i++ {
		want := level(snap.Levels, i)
		if same(level(shipped, i), want) && !(rpMoved && want.Root != 0) {
			continue
		}
		resent++
		if want.Root != 0 {
			if err := sendLevel(send, snap, 0, want); err != nil {
				return err
			}
			rpMoved = false
			continue
		}
		// Emptied since: a compaction from it into the next level, which
		// then holds the primary's next level.
		next := level(snap.Levels, i+1)
		if err := sendLevel(send, snap, i, next); err != nil {
			return err
		}
		for len(shipped) < i+1 {
			shipped = append(shipped, engine.LevelInfo{Level: len(shipped) + 1})
		}
		shipped[i] = next
	}
	if rpMoved {
		// Every level is empty now, but the recovery point moved (the
		// backup's may be in a segment freed above): an empty compaction
		// from L0 carries it, with the tail up to it when it is there.
		if _, err := sendTailToRP(send, snap, true); err != nil {
			return err
		}
		if err := sendLevel(send, snap, 0, engine.LevelInfo{Level: 1}); err != nil {
			return err
		}
	}
	done("backup brought up to date after its pre-seed", zap.Int("levels_resent", resent), zap.Int("log_gaps", len(gaps)))
	return nil
}

// seedSend returns a sendFunc to l bounded by the shipper's timeout and a
// function logging what was sent.
func (s *Shipper) seedSend(l Link, region, epoch uint64) (sendFunc, func(msg string, fields ...zap.Field)) {
	return newSeedSend(s.stopCtx, s.cfg.Timeout, l, region, epoch, s.cfg.Log)
}

// newSeedSend returns a sendFunc to l for region at epoch, each command
// bounded by timeout within ctx, and a function logging what was sent.
func newSeedSend(ctx context.Context, timeout time.Duration, l Link, region, epoch uint64, log *zap.Logger) (sendFunc, func(msg string, fields ...zap.Field)) {
	var sent int
	var bytes int64
	send := func(c *Command) error {
		c.Region, c.Epoch = region, epoch
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if _, err := l.Send(cctx, c); err != nil {
			return fmt.Errorf("seed: %s: %w", c.Kind, err)
		}
		sent++
		bytes += int64(len(c.Data))
		return nil
	}
	done := func(msg string, fields ...zap.Field) {
		log.Info(msg, append(fields, zap.Uint64("region", region), zap.Int("commands", sent), zap.Int64("bytes", bytes))...)
	}
	return send, done
}

package replication

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/engine"
)

// seed brings a Send-Index backup that failed the stream check (a new,
// joining backup, or one that missed commands) to the primary's state:
// it empties its copy (CmdReset), adopts every sealed log segment (and
// the tail up to the recovery point, when the recovery point is in the
// tail), then installs every level, read from the primary's device and
// shipped segment by segment as a compaction from L0 carrying the
// recovery point. Like the check, it runs while the region is still; the
// mirror then re-sends the tail. A failed seed leaves the backup to be
// dropped (and seeded again at the next attach).
func (s *Shipper) seed(l Link, region, epoch uint64) error {
	r := s.cfg.Region
	var sent int
	var bytes int64
	send := func(c *Command) error {
		c.Region, c.Epoch = region, epoch
		ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
		defer cancel()
		if _, err := l.Send(ctx, c); err != nil {
			return fmt.Errorf("seed: %s: %w", c.Kind, err)
		}
		sent++
		bytes += int64(len(c.Data))
		return nil
	}
	if err := send(&Command{Kind: CmdReset}); err != nil {
		return err
	}
	tail, err := r.LogTail()
	if err != nil {
		return err
	}
	for _, ls := range r.LogSegments() {
		if ls.End == 0 {
			continue // the tail (the mirror re-sends it) or a prepared segment
		}
		data, err := r.ReadLog(ls.Segment, ls.Seq, engine.SegmentHeaderSize, ls.End)
		if err != nil {
			return fmt.Errorf("seed: log segment %d: %w", ls.Segment, err)
		}
		if err := send(&Command{Kind: CmdFlush, Segment: ls.Segment, Seq: ls.Seq, End: ls.End, Sealed: true, Data: data}); err != nil {
			return err
		}
	}
	rp, err := r.RecoveryPoint()
	if err != nil {
		return err
	}
	levels := r.Levels()
	if rp.Segment == tail.Segment && len(levels) > 0 {
		// The recovery point is in the tail: the backup needs the tail up
		// to it before it can install a level (its data starts at 0 so it
		// is never empty; only [header, End) is persisted).
		if err := send(&Command{Kind: CmdFlush, Segment: tail.Segment, Seq: tail.Seq, End: rp.Offset, Data: tail.Image[:rp.Offset]}); err != nil {
			return err
		}
	}
	for _, li := range levels {
		if li.Root == 0 {
			continue
		}
		dst := uint8(li.Level)
		if err := send(&Command{Kind: CmdCompactionStart, Src: 0, Dst: dst}); err != nil {
			return err
		}
		for _, seg := range li.Segments {
			data, err := r.ReadIndexSegment(seg)
			if err != nil {
				return fmt.Errorf("seed: level %d segment %d: %w", li.Level, seg, err)
			}
			if err := send(&Command{Kind: CmdIndexSegment, Src: 0, Dst: dst, Segment: seg, Data: data}); err != nil {
				return err
			}
		}
		if err := send(&Command{Kind: CmdCompactionDone, Src: 0, Dst: dst, Root: li.Root, Height: uint32(li.Height), Pairs: li.Pairs,
			KVBytes: li.KVBytes, Nodes: li.Nodes, Segments: li.Segments, RPSeg: rp.Segment, RPOff: rp.Offset}); err != nil {
			return err
		}
	}
	s.cfg.Log.Info("backup seeded", zap.Uint64("region", region), zap.Int("commands", sent), zap.Int64("bytes", bytes))
	return nil
}

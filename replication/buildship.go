package replication

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/internal/replwire"
)

// startBuild starts a Build-Index backup's stream (the region still): it
// asks the backup what it applied (CmdCheck), then catches it up from that
// point (planBuild) or, with no common point, seeds it whole: CmdReset,
// the region's live pairs (CmdPairs), its completion table
// (CmdRequests), CmdApplyFrom the tail's current end. The mirror then
// re-sends the tail, whose flushes continue from there.
func (s *Shipper) startBuild(l Link, region, epoch uint64) error {
	ctx, cancel := context.WithTimeout(s.stopCtx, s.cfg.Timeout)
	reply, err := l.Send(ctx, &Command{Kind: CmdCheck, Region: region, Epoch: epoch})
	cancel()
	if err != nil {
		return err
	}
	a, ok, err := replwire.DecodeApplied(reply)
	if err != nil {
		return fmt.Errorf("the backup's applied point: %w", err)
	}
	var have *replwire.Applied
	if ok {
		have = &a
	}
	tail, err := s.cfg.Region.LogTail()
	if err != nil {
		return err
	}
	send, done := s.seedSend(l, region, epoch)
	plan := planBuild(have, s.cfg.LogID, s.cfg.Region.LogSegments(), tail, s.cfg.Handover)
	if !plan.Seed {
		err := s.catchUpBuild(send, plan)
		if err == nil {
			done("build-index backup caught up", zap.Int("handover_spans", len(plan.Handover)), zap.Int("log_spans", len(plan.Own)))
			return nil
		}
		s.cfg.Log.Warn("catching a build-index backup up failed: seeding it", zap.Uint64("region", region), zap.Error(err))
	} else {
		s.cfg.Log.Info("build-index backup holds no point of this log: seeding it", zap.Uint64("region", region), zap.Bool("known", have != nil))
	}
	if err := s.seedBuild(send, Position{Log: s.cfg.LogID, Index: tail.Index, Segment: tail.Segment, Seq: tail.Seq, Off: tail.Offset}); err != nil {
		return err
	}
	done("build-index backup seeded")
	return nil
}

// catchUpBuild sends what plan lists.
func (s *Shipper) catchUpBuild(send sendFunc, plan buildPlan) error {
	flush := func(sp span, data []byte) error {
		return send(&Command{Kind: CmdFlush, Segment: sp.Segment, Seq: sp.Seq, End: sp.End, Sealed: sp.Sealed, Data: data})
	}
	if err := send(&Command{Kind: CmdApplyFrom, Data: plan.Have.Encode()}); err != nil {
		return err
	}
	for _, sp := range plan.Handover {
		if err := flush(sp, sp.Image[sp.From:sp.End]); err != nil {
			return err
		}
	}
	if plan.From != nil {
		if err := send(&Command{Kind: CmdApplyFrom, Data: replwire.Applied{Position: *plan.From}.Encode()}); err != nil {
			return err
		}
	}
	for _, sp := range plan.Own {
		var data []byte
		if sp.From < sp.End {
			var err error
			if data, err = s.cfg.Region.ReadLog(sp.Segment, sp.Seq, sp.From, sp.End); err != nil {
				return fmt.Errorf("catching up log segment %d: %w", sp.Segment, err)
			}
		}
		if err := flush(sp, data); err != nil {
			return err
		}
	}
	return nil
}

// seedBuild empties the backup's region, sends the region's live pairs
// (a consistent scan) and its completion table, and names from, the
// tail's end, as the point the backup applies on from.
func (s *Shipper) seedBuild(send sendFunc, from Position) error {
	if from.Log == 0 {
		return fmt.Errorf("replication: no log identity to seed a build-index backup with")
	}
	if err := send(&Command{Kind: CmdReset}); err != nil {
		return err
	}
	// The region is still and no stream is attached (the old one retired
	// refuses): copy what it holds, acknowledged or not, without waiting.
	it := s.cfg.Region.ScanUnreplicated(nil, nil)
	limit := int(s.cfg.SegSize / 2)
	var batch []byte
	for it.Next() {
		batch = replwire.EncodePairs(batch, it.Key(), it.Value())
		if len(batch) >= limit {
			if err := send(&Command{Kind: CmdPairs, Data: batch}); err != nil {
				it.Close()
				return err
			}
			batch = nil
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("seed: scanning the region: %w", err)
	}
	if len(batch) > 0 {
		if err := send(&Command{Kind: CmdPairs, Data: batch}); err != nil {
			return err
		}
	}
	// The completion table as of the pairs (no write in between): a
	// retry of a write they hold is a duplicate on the backup too.
	chunks, err := s.cfg.Region.RequestTableChunks(limit)
	if err != nil {
		return fmt.Errorf("seed: the completion table: %w", err)
	}
	for _, c := range chunks {
		if err := send(&Command{Kind: CmdRequests, Data: c}); err != nil {
			return err
		}
	}
	return send(&Command{Kind: CmdApplyFrom, Data: replwire.Applied{Position: from}.Encode()})
}

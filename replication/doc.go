// Package replication holds the primary and backup sides of Tebis
// replication: value-log mirroring by one-sided WRITE, Send-Index with
// pointer rewriting, and the Build-Index baseline.
//
// What exists so far:
//   - the primary's log Mirror (paper §3.2): records copied byte for byte
//     into each backup's registered buffer by one-sided WRITE, acknowledged
//     on completion, batched, with dead backups dropped (safe for
//     concurrent use; Append and Switch in log order);
//   - the primary's Shipper: the mirror plus each backup's ordered
//     commands, a backup whose outstanding commands or WRITEs complete
//     nothing for ShipperConfig.HungAfter dropped as a failed one is
//     (hung.go);
//   - the Build-Index backup's Applier: records read from the mirrored
//     image (checksums seeded with the primary segment's sequence) and
//     applied in log order to the backup's own region, from a point of
//     the primary's log (Position: log identity, index, segment, seq,
//     offset) that every stream agrees on first (planBuild: caught up
//     from the primary's log or a promoted primary's Handover, or seeded
//     whole);
//   - the backup's translation core (paper §3.3): the log map (primary log
//     segment -> backup log segment, valid while the primary stays the
//     same), the index map (primary index segment -> backup segment, valid
//     for one compaction) and the Translator that turns them into an
//     engine.PointerMap for Volume.RewriteIndexSegment. These are
//     deterministic, I/O-free values, not safe for concurrent use; the
//     backup's replication loop owns them.
package replication

// Package replication is the primary and backup sides of Tebis
// replication of one region (paper §3): the log tail mirrored by
// one-sided WRITE, and either Send-Index (the primary ships its compacted
// index segments, the backup rewrites their pointers) or Build-Index (the
// backup applies the records and builds its own index). The region server
// (package region) wires it to connections and the region map.
//
// The primary side:
//   - Mirror copies the log tail byte for byte, in log order, into every
//     backup's two-segment buffer; a write waits until every live
//     backup's WRITE of its record completed.
//   - Shipper is a region's engine.Listener and engine.Replicator: the
//     mirror plus each backup's ordered commands (Command; flushes, and
//     for Send-Index compactions and log frees) over a Link. A stream
//     starts with a check, then catches a backup up or seeds it whole
//     (seed.go; PreSeed copies a region while it serves). A backup whose
//     command or WRITE fails, or that hangs (ShipperConfig.HungAfter), is
//     dropped.
//   - Alone (no backup in a stream) and Refuse (a closed stream) are the
//     replicators of regions without one.
//
// The backup side: Replica applies a stream's commands, in order, to the
// backup's region: Send-Index through the log and index maps (SegMap,
// Translator), Build-Index through the Applier. Promote turns it into the
// primary after a failover: the buffer's halves, named by their tail
// markers, become log segments. LogPosition and Report rank backups for
// the master's choice (docs/failover.md).
//
// Contracts. Durability: a write is acknowledged only once every live
// backup of the stream holds its record and ShipperConfig.MinCopies
// copies do (ErrTooFewCopies otherwise); with no live backup left writes
// fail (ErrNoBackups), and a strict stream refuses them after any drop
// (ErrBackupDropped) until the group is redone. A closed stream leaves a
// refusing replicator behind (ErrStreamClosed): closing never turns into
// acknowledging without replication. Ordering: commands carry the
// region's epoch and a backup refuses older ones (ErrStaleEpoch); one
// sender per region, in log order. Concurrency: Mirror and Shipper are
// safe for concurrent use (Mirror's Append and Switch in log order);
// Replica.Handle is safe for concurrent use but commands must arrive in
// order; SegMap, Translator and Applier are not, their owner serializes
// them. Promote needs the buffer revoked (rdma.MR.Revoke) first.
package replication

// Package engine is one region server's storage: a volume of fixed-size
// segments holding, per region, a KV-separated LSM tree (a value log that is
// also the write-ahead log, an in-memory L0, and on-device B+tree levels
// L1..Ln whose leaves point into the log).
//
// Contracts:
//   - All file I/O goes through the vfs.FS given in Options, so tests can use
//     pebble's MemFS, CrashableMem and errorfs.
//   - A region's role is its handle's type: a primary is a *Region (writes,
//     reads, compactions), a Send-Index backup a *Backup (it applies what
//     its primary ships; no write API). A role change closes the handle and
//     returns one of the other type (Volume.PromoteBackup,
//     Volume.DemoteRegion).
//   - A Volume and its Regions and Backups are safe for concurrent use.
//     Put, Get, Delete, Scan and Sync may be called from many goroutines;
//     compaction and GC run in background goroutines owned by the Region.
//   - Durability: in SyncModeSync, Put and Delete return after the record is
//     on stable storage (concurrent writers share one fdatasync). In
//     SyncModeAsync they return once the record is in the log buffer; Sync
//     makes everything written before it durable. ApplyPut, ApplyDelete and
//     ApplyLogRecord (another copy's writes, applied in batches) never wait:
//     CommitApplied makes a batch as durable as the sync mode makes a Put.
//   - Metadata (regions, levels, log segments, recovery points, allocator
//     high-water mark) lives in a pebble store inside the volume directory
//     and changes only by atomic, synced batches. Segments replaced by a
//     level install are freed only after that batch commits and no reader
//     still uses them.
//   - Errors are sentinel values (ErrNotFound, ErrCorrupt, ErrClosed, ...)
//     wrapped with context; corruption always names the segment.
package engine

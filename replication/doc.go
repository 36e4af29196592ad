// Package replication will hold the primary and backup sides of Tebis
// replication: value-log mirroring by one-sided WRITE, Send-Index with
// pointer rewriting, and the Build-Index baseline. It has no code yet; the
// engine exposes the hooks it needs (log append pointers, segment switches,
// per-segment compaction callbacks, level installation).
package replication

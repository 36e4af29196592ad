// Package inspect renders what engine.Inspector reads from a server's data
// directory, offline and read-only, for `tebis inspect`: a summary, trees,
// nodes, segments, log records, a consistency check and a diff of two
// replicas of a region, as text or JSON.
//
// Contracts: nothing here writes to a data directory. Text output is
// stable (golden-tested) so operators can diff it; JSON carries the same
// facts in engine's types.
package inspect

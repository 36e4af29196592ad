// Package demo is `tebis demo`: a single-node walk through the engine. It
// opens (or reopens) a volume, makes sure one region covers every key,
// loads YCSB-style records, reads them back with a zipfian (Run C) mix
// while checking every value, verifies a uniform sample of records, and
// reports throughput.
//
// Contracts:
//   - Rerunning on the same directory reopens the volume and its region
//     (id 1); the load rewrites the records, so verification holds whatever
//     the earlier run wrote.
//   - A value that differs from what the load wrote is an error wrapping
//     ErrMismatch; a loaded record that reads as absent wraps ErrMissing.
//   - The demo never exits the process; the caller reports the error.
package demo

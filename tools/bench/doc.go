// Package bench runs YCSB-style workloads (package ycsb) against storage
// engines in one process and reports throughput, CPU per operation, I/O
// amplification, space, and latency percentiles side by side. It backs
// `tebis bench engine`, which compares the tebis engine with pebble, and
// `tebis bench replication` and `tebis bench curves`, which run the
// workload through region server processes (RunReplication, RunCurves).
//
// Contracts:
//   - Engines run one after the other, never concurrently, so process-wide
//     CPU time (getrusage) between two points belongs to the engine under
//     test. Each phase's CPU, device bytes and space are measured after the
//     engine went idle (background compactions done), so deferred work is
//     charged to the phase that caused it; ops/s counts only the time the
//     operations took.
//   - Device bytes are counted identically for every engine: each engine's
//     vfs.FS is wrapped in CountingFS, which adds the bytes passed through
//     File Read, ReadAt, Write and WriteAt. Engine-specific counters are
//     reported beside them as a breakdown.
//   - User bytes are the key and value bytes the workload sent (writes) or
//     received (reads, scans); I/O amplification is device bytes read plus
//     written over user bytes.
//   - Every engine sees the same operation sequence per worker (same seed,
//     same phases); the seed is part of the result.
//   - Library code never exits the process; errors are returned wrapped
//     around the package's sentinel errors.
package bench

// Package demo is `tebis demo`.
//
// Run is the single-node walk through the engine. It opens (or reopens) a
// volume, makes sure one region covers every key, loads YCSB-style
// records, reads them back with a zipfian (Run C) mix while checking every
// value, verifies a uniform sample of records, and reports throughput and
// latency percentiles; with Config.Map it does the same through the client
// against running servers.
//
// RunCluster (`tebis demo --cluster`, `make run`) is a local managed
// cluster: ZooKeeper (internal/zkserver), a master and region servers,
// each a separate process of the tebis binary, regions with 3-way
// replication created by `tebis cluster init`, then a YCSB load and run
// phase through the client over shm, with progress, throughput and
// latency percentiles, the cluster's layout and how to reach it.
//
// Contracts:
//   - Rerunning Run on the same directory reopens the volume and its region
//     (id 1); the load rewrites the records, so verification holds whatever
//     the earlier run wrote.
//   - A value that differs from what the load wrote is an error wrapping
//     ErrMismatch; a loaded record that reads as absent wraps ErrMissing.
//   - RunCluster recreates Dir/cluster (only a directory an earlier demo
//     made) and refuses a Dir another demo cluster runs in (ErrDirInUse).
//     Its children run in their own process groups and get SIGKILL if the
//     demo process dies (Pdeathsig). It always stops what it started, in
//     order: servers (SIGINT, waited for), the master, then ZooKeeper; when
//     Force closes, at once by SIGKILL. An interrupted run (ctx ended) is
//     not an error: the result says Interrupted.
//   - The demo never exits the process; the caller reports the error.
package demo

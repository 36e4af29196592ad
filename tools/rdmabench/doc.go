// Package rdmabench measures the rdma transports and the ring protocol
// between two processes: request-reply round trips (latency percentiles
// and messages/s at several payload sizes and outstanding-request counts)
// and the one-sidedness of WRITE (the CPU a peer process spends while 1 GiB
// is written into its memory, next to the writer's). It backs
// `tebis bench rdma`; the peer process is `tebis bench rdma-peer`.
//
// Contracts: the measuring process starts one peer process per transport
// and stops it (by closing the peer's stdin, then killing it) before it
// returns. Peer CPU is read from /proc/PID/task/*/schedstat (nanoseconds,
// every thread); the writer's CPU is this process's getrusage. Library code
// never exits the process.
package rdmabench

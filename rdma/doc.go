// Package rdma will hold the verbs-like one-sided WRITE abstraction, its
// shm and tcp transports and the ring message protocol. It has no code yet.
package rdma

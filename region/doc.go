// Package region is the region server: it opens an engine volume, hosts
// the regions the region map assigns to it (as primary for now; backups
// come with replication) and serves put, get, delete, scan and multi-get
// over the ring protocol on the shm and tcp transports at once.
//
// Contracts: requests are routed by the region map the server holds; a
// request whose key lies outside this server's regions, or which carries
// an older map version, gets StatusWrongRegion with the server's version.
// In sync mode a write is durable before its reply is sent. Close stops
// serving, then syncs and closes the volume: every acknowledged write is
// served again after a restart. A Server is safe for concurrent use.
package region

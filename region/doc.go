// Package region is the region server: it opens an engine volume, hosts
// the regions the region map (client/regionmap) gives it, as primary or
// as backup, and serves put, get, delete, scan and multi-get over the ring
// protocol (rdma/ring; payloads in internal/wire) on the shm and tcp
// transports at once.
//
// Modes. Standalone, the map comes from a file (Config.MapFile; Reload
// re-reads it) or is one region over all keys. Managed (Config.Zookeeper),
// the server registers in ZooKeeper and installs every map the master
// publishes there; it serves as primary only while the read lease of its
// session holds, and gives up its primaries when its disk is full or
// failing (health.go).
//
// Replication (package replication). As primary of a region with backups
// the server attaches a replication stream: the log tail mirrored into
// each backup's buffer by one-sided WRITE, and Send-Index or Build-Index
// commands. As backup it exposes that buffer and applies the commands.
// Attaching does not hold up map installs or other regions (attach.go).
// Named primary of a region it backs up (failover), it fences the old
// primary off and promotes its copy (failover.go). A primary that stops
// serving a region refuses its writes first and detaches after
// (depose.go). docs/failover.md has the whole protocol.
//
// Contracts. Requests are routed by the map the server serves: a request
// whose key lies outside its regions as primary, or which carries an
// older map version, gets StatusWrongRegion with the server's version; a
// managed primary whose lease lapsed answers StatusUnavailable; a write
// the volume cannot store gets StatusStorage. A write is acknowledged
// only once every live backup of the region's stream holds its record
// and the region's min_copies are met, and, in sync mode or with no
// backup, once it is durable on the primary; what each case survives is
// tabled in docs/failover.md. Close stops serving, then syncs and closes
// the volume: every write acknowledged before it is served again after a
// restart. A Server is safe for concurrent use.
package region

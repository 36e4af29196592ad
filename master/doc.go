// Package master will hold the ZooKeeper-backed master: election,
// membership, the region map and failover. It has no code yet.
package master

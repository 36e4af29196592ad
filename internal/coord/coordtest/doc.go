// Package coordtest is an in-memory, deterministic stand-in for the
// cluster's ZooKeeper (package coord), for tests of the master and of
// region servers in one process.
//
// A Coordinator holds the cluster's state: the live servers, their health
// reports, the join, drop and log position reports, the region map (with
// a znode version and compare-and-set) and one master election. It
// implements master.Coordinator (its watches deliver synchronously: when a
// mutating call returns, each of its watchers has been called with the
// new state) and has the test's side: registering servers by hand,
// deposing the leader, counting calls. NewSession hands out Sessions, one
// per region server, implementing what a region server uses of its
// ZooKeeper session (region.Coordinator): registrations and health
// reports are ephemeral (they go when the session is closed or expires),
// leases are renewed while the session's registration stands, and watches
// deliver asynchronously on the watching goroutine (their callbacks may
// call the Session, as with coord.Session).
//
// Everything is safe for concurrent use. Deliveries to the watchers of
// one kind of state are in the order of the changes; an asynchronous
// watcher may skip intermediate states but never sees an older state
// after a newer one.
package coordtest

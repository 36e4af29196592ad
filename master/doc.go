// Package master is the cluster's master: elected through ZooKeeper, it
// owns the region map and heals failures (paper §3.1, §3.5).
//
// Policy and mechanism are apart. Next is the whole policy: a pure,
// deterministic function from what the master observes (the current map,
// the live servers, the joins reported done, the time) to the next map.
// Run is the thin I/O loop around it: it campaigns, watches ZooKeeper,
// calls Next and publishes its result with a fenced compare-and-set, so a
// master that takes over resumes from the map alone. Region servers act on
// the map: a server named primary of a region it backed up promotes its
// copy, a primary whose group changed re-attaches its backups under the
// new epoch (seeding joining ones), and reports the joins it finished.
//
// Every master announces itself in ZooKeeper (coord.MasterInfo) and, with
// Config.HTTP, serves /healthz, /readyz and a status page of the cluster as
// it sees it (http.go, page.go), with a bounded history of the maps and
// failovers it published (board.go).
package master

// Package client is the Go client of a tebis cluster. It reads the region
// map (package client/regionmap) from a Source: a file or a static map in
// standalone mode, or ZooKeeper (DialZooKeeper), where the master
// publishes it and the client follows every new version by a watch. It
// keeps one ring connection per region server (shm or tcp) and routes
// each operation to its region's primary, refreshing the map and retrying
// when a server answers WRONG_REGION or UNAVAILABLE or a connection
// breaks. Put, Get, Delete, MultiGet and Scan block; Go runs an operation
// asynchronously.
//
// Contracts: a Client is safe for concurrent use; many goroutines share
// its connections, so many requests are in flight per connection.
// Operations in flight at the same time are not ordered with each other
// (two outstanding puts to one key may apply in either order); an
// operation that returned is ordered before every later one. A put or
// delete is applied at most once: its retries carry the same request
// identity and stop after Config.RetryWindow, well inside the time
// regions remember an outcome; an error leaves it applied or not
// (indeterminate). Returned byte slices belong to the caller. Errors wrap
// the package's sentinels (ErrNotFound, ErrUnavailable, ErrStorage, ...),
// so use errors.Is.
package client

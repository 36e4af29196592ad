// Package client is the Go client of a tebis cluster. It reads the region
// map from a Source (a file in standalone mode; ZooKeeper through the
// master later), keeps one ring connection per region server (shm or tcp),
// and routes each operation to its region's primary, refreshing the map and
// retrying when a server answers WRONG_REGION.
//
// Contracts: a Client is safe for concurrent use; many goroutines share
// its connections, so many requests are in flight per connection.
// Operations in flight at the same time are not ordered with each other
// (two outstanding puts to one key may apply in either order); an
// operation that returned is ordered before every later one. Returned
// byte slices belong to the caller. Errors wrap the package's sentinels
// (ErrNotFound, ErrTooLarge, ...), so use errors.Is.
package client

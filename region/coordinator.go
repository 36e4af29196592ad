package region

import (
	"context"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// Coordinator is what a managed server uses of its ZooKeeper session:
// *coord.Session implements it, and its documentation gives the
// contracts (ephemeral registrations and health reports that go with the
// session; watches that call back now and after every change, on the
// watching goroutine, until ctx ends or the session closes; operations
// that fail with coord.ErrNoSession once it is closed). The server calls
// it from several goroutines at once: it must be safe for concurrent use.
type Coordinator interface {
	// Register publishes the server as live (ephemeral), waiting out, bounded
	// by ctx, a registration of its name another session holds.
	Register(ctx context.Context, srv coord.ServerInfo) error
	// Deregister deletes server name's registration if this session made it.
	Deregister(ctx context.Context, name string) error
	// SetHealth publishes (nil: deletes) server name's health report.
	SetHealth(ctx context.Context, name string, h *coord.Health) error
	// Report records a join, drop or log position report (idempotent).
	Report(ctx context.Context, r coord.Report) error
	// ReadMap returns the region map now (coord.ErrNoMap: none).
	ReadMap(ctx context.Context) (*regionmap.Map, int32, error)
	// WatchMap calls fn with every valid version of the map; bad (may be
	// nil) with every invalid one.
	WatchMap(ctx context.Context, fn func(*regionmap.Map), bad func(error))
	// WatchServers calls fn with the live servers after every change.
	WatchServers(ctx context.Context, fn func(map[string]coord.ServerInfo))
	// Lease is the session's read lease, held while KeepLease runs and
	// the session is alive.
	Lease() *coord.Lease
	// KeepLease renews the lease while server name's registration is this
	// session's, until ctx ends or the session closes.
	KeepLease(ctx context.Context, name string)
	// Expired is closed at the session's next expiry (its ephemeral
	// entries are gone; it goes on as a new session); Generation counts
	// the expiries.
	Expired() <-chan struct{}
	Generation() uint64
	// Root names the cluster (for logs).
	Root() string
	// Close ends the session: its ephemeral entries go at once. A second
	// Close does nothing.
	Close()
}

var _ Coordinator = (*coord.Session)(nil)

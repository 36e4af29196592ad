package master

import (
	"context"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// Coordinator is what Run needs from ZooKeeper; ZK adapts a
// *coord.Session to it, whose documentation gives the contracts (watches
// call back now and after every change, until ctx ends; map writes are
// fenced compare-and-sets).
type Coordinator interface {
	// Campaign blocks until this candidate leads, or ctx ends.
	Campaign(ctx context.Context, name string) (Leadership, error)
	WatchServers(ctx context.Context, fn func(map[string]coord.ServerInfo))
	// WatchReports reports the join, drop and log position reports.
	WatchReports(ctx context.Context, fn func([]coord.Report))
	// WatchHealth reports the servers' health znodes (coord.Health).
	WatchHealth(ctx context.Context, fn func(map[string]coord.Health))
	WatchMap(ctx context.Context, fn func(*regionmap.Map), bad func(error))
	// ReadMap returns the map and the version WriteMap compares with;
	// coord.ErrNoMap if there is none.
	ReadMap(ctx context.Context) (*regionmap.Map, int32, error)
	ForgetReports(ctx context.Context, keep map[uint64]uint64) error
	// WatchRequests reports the operators' requests (coord.Requests).
	WatchRequests(ctx context.Context, fn func(coord.Requests))
	// FinishMove deletes a move request the master is done with.
	FinishMove(ctx context.Context, region uint64, server string) error
	// FinishRebalance deletes the rebalance request.
	FinishRebalance(ctx context.Context) error
	// Announce publishes this master (coord.MasterInfo) until ctx ends.
	Announce(ctx context.Context, info coord.MasterInfo)
	// Masters returns the announced masters by name.
	Masters(ctx context.Context) (map[string]coord.MasterInfo, error)
	// Leader returns the leading candidate's name ("" if none).
	Leader(ctx context.Context) (string, error)
	// Connected reports whether the coordination service is reachable
	// now.
	Connected() bool
}

// Leadership is a won election (coord.Term, implemented by
// *coord.Leadership).
type Leadership = coord.Term

// ZK is the Coordinator of a ZooKeeper session.
func ZK(s *coord.Session) Coordinator { return zkCoord{s} }

type zkCoord struct{ *coord.Session }

func (z zkCoord) Campaign(ctx context.Context, name string) (Leadership, error) {
	l, err := z.Session.Campaign(ctx, name)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return l, nil
}

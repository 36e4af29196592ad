package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Operators' requests to the master, under <root>/admin: persistent
// znodes whose names are the whole request (they have no data), written
// by `tebis cluster` and deleted by the master once it carried them out
// or gave them up (a drain stays until undrained). The names are a wire
// format, like the reports':
//
//	<root>/admin/move-<region>-<server>  move the region's primary role to
//	                                     server (one of its backups)
//	<root>/admin/drain-<server>          give server no role: move its
//	                                     primaries and backups away
//	<root>/admin/rebalance               spread the primaries evenly now

// Requests is what the operators asked of the master.
type Requests struct {
	// Moves are the regions whose primary role is to move, by region,
	// to the server named.
	Moves map[uint64]string
	// Drained are the servers to hold no role.
	Drained map[string]bool
	// Rebalance asks for the primaries spread evenly.
	Rebalance bool
}

// ErrBadRequest is a request the master or the operator's command refuses
// as malformed.
var ErrBadRequest = errors.New("coord: malformed request")

func moveZnode(region uint64, server string) string { return fmt.Sprintf("move-%d-%s", region, server) }

func drainZnode(server string) string { return "drain-" + server }

const rebalanceZnode = "rebalance"

// parseRequests decodes the admin znodes' names into a Requests; names
// that are not requests are ignored. Of two moves of one region, the
// later name in sorted order wins (RequestMove deletes the others).
func parseRequests(kids []string) Requests {
	rq := Requests{Moves: map[uint64]string{}, Drained: map[string]bool{}}
	for _, k := range kids {
		switch {
		case k == rebalanceZnode:
			rq.Rebalance = true
		case strings.HasPrefix(k, "drain-") && len(k) > len("drain-"):
			rq.Drained[k[len("drain-"):]] = true
		case strings.HasPrefix(k, "move-"):
			id, server, ok := strings.Cut(k[len("move-"):], "-")
			if !ok || server == "" {
				continue
			}
			n, err := strconv.ParseUint(id, 10, 64)
			if err != nil || n == 0 {
				continue
			}
			if old, ok := rq.Moves[n]; !ok || server > old {
				rq.Moves[n] = server
			}
		}
	}
	return rq
}

func validName(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return fmt.Errorf("%w: server name %q", ErrBadRequest, name)
	}
	return nil
}

// RequestMove asks the master to move region's primary role to server,
// replacing an earlier request for the region.
func (s *Session) RequestMove(ctx context.Context, region uint64, server string) error {
	if err := validName(server); err != nil {
		return err
	}
	if region == 0 {
		return fmt.Errorf("%w: region 0", ErrBadRequest)
	}
	if err := s.CancelMove(ctx, region); err != nil {
		return err
	}
	return s.createRequest(ctx, moveZnode(region, server))
}

// CancelMove deletes the requests to move region's primary (a move the
// master already started still completes).
func (s *Session) CancelMove(ctx context.Context, region uint64) error {
	rq, err := s.Requests(ctx)
	if err != nil {
		return err
	}
	if t, ok := rq.Moves[region]; ok {
		return s.FinishMove(ctx, region, t)
	}
	return nil
}

// FinishMove deletes the request to move region to server (done or given
// up); deleting one that is gone is not an error.
func (s *Session) FinishMove(ctx context.Context, region uint64, server string) error {
	return s.deleteRequest(ctx, moveZnode(region, server))
}

// Drain asks the master to give server no role (idempotent).
func (s *Session) Drain(ctx context.Context, server string) error {
	if err := validName(server); err != nil {
		return err
	}
	return s.createRequest(ctx, drainZnode(server))
}

// Undrain withdraws Drain(server) (idempotent).
func (s *Session) Undrain(ctx context.Context, server string) error {
	if err := validName(server); err != nil {
		return err
	}
	return s.deleteRequest(ctx, drainZnode(server))
}

// RequestRebalance asks the master to spread the primaries evenly.
func (s *Session) RequestRebalance(ctx context.Context) error {
	return s.createRequest(ctx, rebalanceZnode)
}

// FinishRebalance deletes the rebalance request (the primaries are
// spread as evenly as the groups allow).
func (s *Session) FinishRebalance(ctx context.Context) error {
	return s.deleteRequest(ctx, rebalanceZnode)
}

// Requests reads the operators' requests now.
func (s *Session) Requests(ctx context.Context) (Requests, error) {
	var kids []string
	err := s.retry(ctx, func() (err error) {
		kids, _, err = s.conn.Children(s.path("admin"))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return parseRequests(nil), nil
	}
	if err != nil {
		return Requests{}, err
	}
	return parseRequests(kids), nil
}

// WatchRequests calls fn with the requests now and after every change,
// until ctx ends.
func (s *Session) WatchRequests(ctx context.Context, fn func(Requests)) {
	s.WatchChildren(ctx, s.path("admin"), func(kids []string) { fn(parseRequests(kids)) })
}

func (s *Session) createRequest(ctx context.Context, name string) error {
	dir := s.path("admin")
	if err := s.ensure(ctx, dir); err != nil {
		return err
	}
	return s.retry(ctx, func() error {
		_, err := s.conn.Create(dir+"/"+name, nil, 0, s.acl)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})
}

func (s *Session) deleteRequest(ctx context.Context, name string) error {
	return s.retry(ctx, func() error {
		err := s.conn.Delete(s.path("admin", name), -1)
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	})
}

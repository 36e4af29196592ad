package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Joined is a primary's report about a backup of a region at Epoch: that
// the joining backup holds the region's data (its seeding finished), or,
// with Dropped, that the primary dropped it from its replication stream
// (it failed a WRITE or a command) and serves no write until the map
// leaves it out.
type Joined struct {
	Region, Epoch uint64
	Server        string
	Dropped       bool
}

func (j Joined) name() string {
	if j.Dropped {
		return fmt.Sprintf("drop-%d-%d-%s", j.Region, j.Epoch, j.Server)
	}
	return fmt.Sprintf("%d-%d-%s", j.Region, j.Epoch, j.Server)
}

func parseJoined(s string) (Joined, bool) {
	dropped := strings.HasPrefix(s, "drop-")
	s = strings.TrimPrefix(s, "drop-")
	parts := strings.SplitN(s, "-", 3)
	if len(parts) != 3 {
		return Joined{}, false
	}
	r, err1 := strconv.ParseUint(parts[0], 10, 64)
	e, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || parts[2] == "" {
		return Joined{}, false
	}
	return Joined{Region: r, Epoch: e, Server: parts[2], Dropped: dropped}, true
}

// ReportJoined records j (idempotent).
func (s *Session) ReportJoined(ctx context.Context, j Joined) error {
	dir := s.path("reports")
	if err := s.ensure(ctx, dir); err != nil {
		return err
	}
	return s.retry(ctx, func() error {
		_, err := s.conn.Create(dir+"/"+j.name(), nil, 0, zk.WorldACL(zk.PermAll))
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	})
}

// WatchJoined calls fn with every reported join now and after each
// change, until ctx ends. Malformed entries are ignored.
func (s *Session) WatchJoined(ctx context.Context, fn func(map[Joined]bool)) {
	s.WatchChildren(ctx, s.path("reports"), func(kids []string) {
		out := map[Joined]bool{}
		for _, k := range kids {
			if j, ok := parseJoined(k); ok {
				out[j] = true
			}
		}
		fn(out)
	})
}

// ForgetJoined deletes reports of regions' older epochs (keep gives each
// region's current epoch); the master calls it after publishing a map.
func (s *Session) ForgetJoined(ctx context.Context, keep map[uint64]uint64) error {
	var kids []string
	err := s.retry(ctx, func() (err error) {
		kids, _, err = s.conn.Children(s.path("reports"))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, k := range kids {
		if j, ok := parseJoined(k); ok && j.Epoch < keep[j.Region] {
			err := s.retry(ctx, func() error { return s.conn.Delete(s.path("reports", k), -1) })
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
	}
	return nil
}

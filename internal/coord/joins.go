package coord

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Joined is a report about a backup of a region at Epoch. From the
// region's primary: that the joining backup holds the region's data (its
// seeding finished), or, with Dropped, that the primary dropped it from
// its replication stream (it failed a WRITE or a command) and serves no
// write until the map leaves it out. From the backup itself, with Log:
// how much of the failed primary's log it holds (Pos, ordered as
// replication.Replica.LogPosition), for the master to promote the most
// complete one; with Incomplete too, that its copy of the region is not
// complete (a seed or catch-up not finished): the master never promotes it.
type Joined struct {
	Region, Epoch uint64
	Server        string
	Dropped       bool
	Log           bool
	Pos           uint64 // with Log
	Incomplete    bool   // with Log
}

func (j Joined) name() string {
	switch {
	case j.Log && j.Incomplete:
		return fmt.Sprintf("logi-%d-%d-%d-%s", j.Region, j.Epoch, j.Pos, j.Server)
	case j.Log:
		return fmt.Sprintf("log-%d-%d-%d-%s", j.Region, j.Epoch, j.Pos, j.Server)
	case j.Dropped:
		return fmt.Sprintf("drop-%d-%d-%s", j.Region, j.Epoch, j.Server)
	}
	return fmt.Sprintf("%d-%d-%s", j.Region, j.Epoch, j.Server)
}

func parseJoined(s string) (Joined, bool) {
	var j Joined
	n := 3
	switch {
	case strings.HasPrefix(s, "drop-"):
		j.Dropped, s = true, strings.TrimPrefix(s, "drop-")
	case strings.HasPrefix(s, "logi-"):
		j.Log, j.Incomplete, s, n = true, true, strings.TrimPrefix(s, "logi-"), 4
	case strings.HasPrefix(s, "log-"):
		j.Log, s, n = true, strings.TrimPrefix(s, "log-"), 4
	}
	parts := strings.SplitN(s, "-", n)
	if len(parts) != n || parts[n-1] == "" {
		return Joined{}, false
	}
	var err error
	nums := []*uint64{&j.Region, &j.Epoch, &j.Pos}
	for i := range n - 1 {
		if *nums[i], err = strconv.ParseUint(parts[i], 10, 64); err != nil {
			return Joined{}, false
		}
	}
	j.Server = parts[n-1]
	return j, true
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

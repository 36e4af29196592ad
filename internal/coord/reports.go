package coord

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// The reports under <root>/reports: region servers tell the master about
// the backups of a region's group at an epoch. A report is a persistent
// znode whose name is the whole report (it has no data), so reporting is
// idempotent and equal reports are one znode. The names (layout.go) are a
// wire format: servers and masters of different builds read each other's.

// ReportKey names the backup a report is about: Server, in the group of
// Region at Epoch.
type ReportKey struct {
	Region, Epoch uint64
	Server        string
}

// Report is a JoinReport, a DropReport, a LogReport, a LostReport or a
// ReleaseReport.
// They are comparable values (usable as map keys); no other type
// implements Report.
type Report interface {
	// Key is the backup the report is about.
	Key() ReportKey
	// znode is the report's znode name.
	znode() string
}

// JoinReport is from the region's primary: joining backup Server holds
// the region's data (its seeding finished) at Epoch; the master may move
// it from the joining backups to the backups.
type JoinReport ReportKey

// DropReport is from the region's primary: it dropped backup Server from
// its replication stream at Epoch (the backup failed a WRITE or a
// command), and the region acknowledges no write until the map leaves
// Server out of the group.
type DropReport ReportKey

// LogReport is from backup Server itself, after the region's primary at
// Epoch failed: how much of that primary's log it holds (Pos, ordered as
// replication.Replica.LogPosition), for the master to promote the most
// complete copy. Complete false (the zero value) says the backup's copy of
// the region is not complete (a seed or catch-up did not finish): the
// master never promotes it.
type LogReport struct {
	Region, Epoch uint64
	Server        string
	Pos           uint64
	Complete      bool
}

// LostReport is from backup Server itself: every connection of the
// region's primary at Epoch ended without a goodbye (the primary process
// died, or the network cut it off), and the backup fenced that primary
// off (revoked its buffer) before it reported. Its LogReport follows.
// When every live backup of a region reported so, the master fails the
// primary over without waiting for its session to expire
// (docs/failover.md, "Failure detection").
type LostReport ReportKey

// ReleaseReport is from the region's primary Server itself: the map
// moves the region away from it (regionmap.Assignment.MoveTo) and it
// released the region at Epoch: it serves and replicates it no more
// (docs/failover.md, "Moving a primary"). The master promotes a backup of
// a moving region only after its primary's release, or its failure.
type ReleaseReport ReportKey

// Key implements Report.
func (r ReleaseReport) Key() ReportKey { return ReportKey(r) }

// Key implements Report.
func (r LostReport) Key() ReportKey { return ReportKey(r) }

// Key implements Report.
func (r JoinReport) Key() ReportKey { return ReportKey(r) }

// Key implements Report.
func (r DropReport) Key() ReportKey { return ReportKey(r) }

// Key implements Report.
func (r LogReport) Key() ReportKey {
	return ReportKey{Region: r.Region, Epoch: r.Epoch, Server: r.Server}
}

func (r JoinReport) znode() string { return fmt.Sprintf("%d-%d-%s", r.Region, r.Epoch, r.Server) }

func (r DropReport) znode() string {
	return fmt.Sprintf("drop-%d-%d-%s", r.Region, r.Epoch, r.Server)
}

func (r LostReport) znode() string {
	return fmt.Sprintf("lost-%d-%d-%s", r.Region, r.Epoch, r.Server)
}

func (r ReleaseReport) znode() string {
	return fmt.Sprintf("release-%d-%d-%s", r.Region, r.Epoch, r.Server)
}

func (r LogReport) znode() string {
	prefix := "logi-"
	if r.Complete {
		prefix = "log-"
	}
	return fmt.Sprintf("%s%d-%d-%d-%s", prefix, r.Region, r.Epoch, r.Pos, r.Server)
}

// parseReport decodes a report's znode name; ok is false for a name that
// is not one.
func parseReport(name string) (_ Report, ok bool) {
	kind, rest, fields := "join", name, 3
	for _, p := range []struct {
		prefix, kind string
		fields       int
	}{{"drop-", "drop", 3}, {"release-", "release", 3}, {"lost-", "lost", 3}, {"logi-", "logi", 4}, {"log-", "log", 4}} {
		if s, found := strings.CutPrefix(name, p.prefix); found {
			kind, rest, fields = p.kind, s, p.fields
			break
		}
	}
	parts := strings.SplitN(rest, "-", fields)
	if len(parts) != fields || parts[fields-1] == "" {
		return nil, false
	}
	nums := make([]uint64, fields-1)
	for i := range nums {
		var err error
		if nums[i], err = strconv.ParseUint(parts[i], 10, 64); err != nil {
			return nil, false
		}
	}
	k := ReportKey{Region: nums[0], Epoch: nums[1], Server: parts[fields-1]}
	switch kind {
	case "drop":
		return DropReport(k), true
	case "release":
		return ReleaseReport(k), true
	case "lost":
		return LostReport(k), true
	case "log", "logi":
		return LogReport{Region: k.Region, Epoch: k.Epoch, Server: k.Server, Pos: nums[2], Complete: kind == "log"}, true
	}
	return JoinReport(k), true
}

// SortReports orders rs by their znode names (a stable order for
// comparisons and logs).
func SortReports(rs []Report) {
	slices.SortFunc(rs, func(a, b Report) int { return cmp.Compare(a.znode(), b.znode()) })
}

// Report records r (idempotent).
func (s *Session) Report(ctx context.Context, r Report) error {
	dir := s.path("reports")
	if _, ok := s.ensured.Load(dir); !ok {
		if err := s.ensure(ctx, dir); err != nil {
			return err
		}
		s.ensured.Store(dir, true)
	}
	return s.retry(ctx, func() error {
		_, err := s.conn.Create(dir+"/"+r.znode(), nil, 0, s.acl)
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		if errors.Is(err, zk.ErrNoNode) {
			s.ensured.Delete(dir) // deleted under us: ensured again next time
		}
		return err
	})
}

// WatchReports calls fn with every report now and after each change (in
// SortReports order), until ctx ends. Znodes that are not reports are
// ignored.
func (s *Session) WatchReports(ctx context.Context, fn func([]Report)) {
	s.WatchChildren(ctx, s.path("reports"), func(kids []string) {
		out := []Report{}
		for _, k := range kids {
			if r, ok := parseReport(k); ok {
				out = append(out, r)
			}
		}
		SortReports(out)
		fn(out)
	})
}

// ForgetReports deletes the reports of regions' older epochs (keep gives
// each region's current epoch; a region keep lacks keeps its reports);
// the master calls it after publishing a map.
func (s *Session) ForgetReports(ctx context.Context, keep map[uint64]uint64) error {
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
		if r, ok := parseReport(k); ok && Stale(r, keep) {
			err := s.retry(ctx, func() error { return s.conn.Delete(s.path("reports", k), -1) })
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
	}
	return nil
}

// Stale reports whether ForgetReports(keep) deletes r: r is of an epoch
// older than its region's in keep.
func Stale(r Report, keep map[uint64]uint64) bool {
	k := r.Key()
	return k.Epoch < keep[k.Region]
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// The operators' commands that move roles (docs/operations.md, "Moving
// primaries, draining servers"): each writes its request under the
// cluster's admin znode (coord.Requests), which the leading master
// carries out, and waits for the map to show it done.

// errNotDone is a request the wait gave up on: it stays, and the master
// carries it out later.
var errNotDone = errors.New("not done yet")

func adminCommands() []*cli.Command {
	wait := func(d time.Duration) cli.Flag {
		return &cli.DurationFlag{Name: "wait", Value: d, Usage: "how long to wait for the master to carry it out (0: do not wait)"}
	}
	return []*cli.Command{{
		Name:      "move-primary",
		Usage:     "move a region's primary role to one of its backups (its old primary stays in the group as a backup)",
		ArgsUsage: "REGION SERVER",
		Flags:     append(zkFlags(), wait(time.Minute)),
		Action:    withSession(clusterMovePrimary),
	}, {
		Name:      "drain",
		Usage:     "give a server no role: move its primaries and backup roles to other servers (before maintenance)",
		ArgsUsage: "SERVER",
		Flags:     append(zkFlags(), wait(5*time.Minute)),
		Action:    withSession(clusterDrain),
	}, {
		Name:      "undrain",
		Usage:     "let a drained server take roles again",
		ArgsUsage: "SERVER",
		Flags:     zkFlags(),
		Action: withSession(func(c *cli.Context, sess *coord.Session) error {
			if c.NArg() != 1 {
				return usageError(c, "want SERVER")
			}
			if err := sess.Undrain(c.Context, c.Args().First()); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "server %s undrained: it takes roles again (the balancer gives it primaries)\n", c.Args().First())
			return nil
		}),
	}, {
		Name:   "rebalance",
		Usage:  "spread the regions' primaries evenly over the servers now",
		Flags:  append(zkFlags(), wait(5*time.Minute)),
		Action: withSession(clusterRebalance),
	}}
}

func clusterMovePrimary(c *cli.Context, sess *coord.Session) error {
	if c.NArg() != 2 {
		return usageError(c, "want REGION SERVER")
	}
	id, err := strconv.ParseUint(c.Args().Get(0), 10, 64)
	if err != nil || id == 0 {
		return usageError(c, "region %q is not a region id", c.Args().Get(0))
	}
	target := c.Args().Get(1)
	m, _, err := sess.ReadMap(c.Context)
	if err != nil {
		return err
	}
	live, err := sess.Servers(c.Context)
	if err != nil {
		return err
	}
	r := m.Region(id)
	switch {
	case r == nil:
		return fmt.Errorf("no region %d in the map (version %d)", id, m.Version)
	case r.Primary == target && r.MoveTo == "":
		fmt.Fprintf(c.App.Writer, "region %d: %s is its primary already\n", id, target)
		return nil
	case !slices.Contains(r.Backups, target):
		return fmt.Errorf("region %d: %s is not one of its backups (backups %v, joining %v): a move goes to a backup in sync", id, target, r.Backups, r.Joining)
	case len(r.Backups)+len(r.Joining) < m.Copies():
		return fmt.Errorf("region %d: %d backups, min_copies %d: moving would leave fewer complete copies while its old primary is seeded again", id, len(r.Backups), m.Copies())
	}
	if _, ok := live[target]; !ok {
		return fmt.Errorf("region %d: %s is not registered (not live)", id, target)
	}
	if err := sess.RequestMove(c.Context, id, target); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "region %d: moving its primary from %s to %s (epoch %d)\n", id, r.Primary, target, r.Epoch)
	if c.Duration("wait") <= 0 {
		return nil
	}
	start := time.Now()
	got, err := waitMoved(c.Context, sess, id, target, c.Duration("wait"))
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "region %d: primary %s at epoch %d after %v\n", id, got.Primary, got.Epoch, time.Since(start).Round(time.Millisecond))
	return nil
}

// waitMoved waits (up to d) until the map has target serve region id,
// and returns the region then. The master giving the request up (it is
// deleted while another server is primary) is an error.
func waitMoved(ctx context.Context, sess *coord.Session, id uint64, target string, d time.Duration) (*regionmap.Assignment, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last *regionmap.Assignment
	for {
		m, _, err := sess.ReadMap(ctx)
		if err == nil {
			if r := m.Region(id); r != nil {
				last = r
				if r.Serving(target) {
					return r, nil
				}
			}
			rq, err := sess.Requests(ctx)
			if err == nil && rq.Moves[id] != target && (last == nil || last.MoveTo != target) {
				return nil, fmt.Errorf("region %d: the master gave the move up (its log says why): primary %s", id, primaryOf(last))
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("region %d: %w after %v: primary %s, moving to %q (the request stays: the master carries it out later)",
				id, errNotDone, d, primaryOf(last), moveOf(last))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func primaryOf(r *regionmap.Assignment) string {
	if r == nil {
		return "unknown"
	}
	return r.Primary
}

func moveOf(r *regionmap.Assignment) string {
	if r == nil {
		return ""
	}
	return r.MoveTo
}

// roles counts what m gives server name: regions it is primary of,
// backup or joining backup of.
func roles(m *regionmap.Map, name string) (primary, backup []uint64) {
	for _, r := range m.Regions {
		if r.Primary == name {
			primary = append(primary, r.ID)
		}
		if slices.Contains(r.Group(), name) {
			backup = append(backup, r.ID)
		}
	}
	return primary, backup
}

func clusterDrain(c *cli.Context, sess *coord.Session) error {
	if c.NArg() != 1 {
		return usageError(c, "want SERVER")
	}
	name := c.Args().First()
	m, _, err := sess.ReadMap(c.Context)
	if err != nil {
		return err
	}
	if _, ok := m.Server(name); !ok {
		return fmt.Errorf("no server %s in the map (version %d)", name, m.Version)
	}
	if err := sess.Drain(c.Context, name); err != nil {
		return err
	}
	p, b := roles(m, name)
	fmt.Fprintf(c.App.Writer, "draining %s: primary of %v, backup of %v\n", name, p, b)
	if c.Duration("wait") <= 0 {
		return nil
	}
	return waitDrained(c.Context, c.App.Writer, sess, name, c.Duration("wait"))
}

// waitDrained waits (up to d) until the map gives server name no role,
// printing each change of what it still holds.
func waitDrained(ctx context.Context, w io.Writer, sess *coord.Session, name string, d time.Duration) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var lastP, lastB []uint64
	var m *regionmap.Map
	for first := true; ; first = false {
		if cur, _, err := sess.ReadMap(ctx); err == nil {
			m = cur
			p, b := roles(m, name)
			if len(p)+len(b) == 0 {
				fmt.Fprintf(w, "%s drained after %v: it holds no role (map version %d)\n", name, time.Since(start).Round(time.Millisecond), m.Version)
				return nil
			}
			if !first && (!slices.Equal(p, lastP) || !slices.Equal(b, lastB)) {
				fmt.Fprintf(w, "  %s still primary of %v, backup of %v\n", name, p, b)
			}
			lastP, lastB = p, b
		}
		select {
		case <-ctx.Done():
			why := ""
			if m != nil {
				why = drainBlocked(m, name)
			}
			return fmt.Errorf("%s %w after %v: primary of %v, backup of %v%s (it stays drained: the master goes on)", name, errNotDone, d, lastP, lastB, why)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// drainBlocked says why a drain may not finish: too few other servers to
// hold every region's copies.
func drainBlocked(m *regionmap.Map, name string) string {
	others := 0
	for _, s := range m.Servers {
		if s.Name != name {
			others++
		}
	}
	if m.Replicas > others {
		return fmt.Sprintf("; %d replicas need %d servers besides %s, the map lists %d (its backup roles stay until one registers)",
			m.Replicas, m.Replicas, name, others)
	}
	return ""
}

func clusterRebalance(c *cli.Context, sess *coord.Session) error {
	m, _, err := sess.ReadMap(c.Context)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "primaries before: %s\n", spread(m))
	if err := sess.RequestRebalance(c.Context); err != nil {
		return err
	}
	if c.Duration("wait") <= 0 {
		return nil
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("wait"))
	defer cancel()
	for {
		rq, err := sess.Requests(ctx)
		if err == nil && !rq.Rebalance {
			if m, _, err = sess.ReadMap(ctx); err == nil {
				fmt.Fprintf(c.App.Writer, "primaries after %v: %s\n", time.Since(start).Round(time.Millisecond), spread(m))
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rebalance %w after %v (the request stays)", errNotDone, c.Duration("wait"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// spread renders how many primaries each server of m holds.
func spread(m *regionmap.Map) string {
	load := map[string]int{}
	for _, s := range m.Servers {
		load[s.Name] = 0
	}
	for _, r := range m.Regions {
		load[r.Primary]++
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(load)) {
		out = append(out, fmt.Sprintf("%s %d", n, load[n]))
	}
	return strings.Join(out, ", ")
}

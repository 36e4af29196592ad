package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nemesis injects the scheduled faults into a cluster and heals them.
type nemesis struct {
	c      *cluster
	start  time.Time // the run's time origin
	hit    time.Duration
	region int // the region (1-based, in key order) the last fault hit; 0: the whole cluster
}

// since is the time since the run's start.
func (n *nemesis) since() time.Duration { return time.Since(n.start) }

// mark records the fault's first disruptive action.
func (n *nemesis) mark() {
	if n.hit < 0 {
		n.hit = n.since()
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// errHeal marks a fault whose healing failed (a process that would not
// start again, a rule that would not go): the run cannot go on.
var errHeal = errors.New("torture: healing a fault failed")

// inject runs one fault: it disrupts, holds, and heals. It returns the
// fault's span start (its first disruptive action) and a note naming the
// victims. The caller then waits for the cluster to be whole.
func (n *nemesis) inject(ctx context.Context, s step) (at time.Duration, note string, err error) {
	n.hit = -1
	c := n.c
	rng := rand.New(rand.NewPCG(s.Seed, 7))
	m, err := c.load(ctx)
	if err != nil {
		return 0, "", fmt.Errorf("torture: map before a fault: %w", err)
	}
	ri := s.Region % len(m.Regions)
	r := m.Regions[ri]
	n.region = 0
	switch s.Kind {
	case killMaster, pauseMaster, killZK, cutZKMinority:
	default:
		n.region = ri + 1
	}
	primary := r.Primary
	backup := ""
	if len(r.Backups) > 0 {
		backup = r.Backups[s.Pick%len(r.Backups)]
	}
	zkHosts := c.zk.hosts()
	zi := s.Pick % len(zkHosts)
	heal := func(errs ...error) error {
		for _, e := range errs {
			if e != nil {
				return fmt.Errorf("%w: %w", errHeal, e)
			}
		}
		return nil
	}
	defer func() {
		if err != nil && !errors.Is(err, errHeal) && n.hit >= 0 {
			// Disrupted, then failed: put everything back.
			if e := c.heal(ctx); e != nil {
				err = fmt.Errorf("%w: %w (after: %w)", errHeal, e, err)
			}
		}
		if n.hit < 0 {
			n.hit = n.since()
		}
		at = n.hit
	}()
	switch s.Kind {
	case killPrimary, killBackup, killTwo:
		victims := []string{primary}
		switch s.Kind {
		case killBackup:
			victims = []string{backup}
		case killTwo:
			victims = append(victims, backup)
		}
		if slices.Contains(victims, "") {
			return 0, "", fmt.Errorf("torture: region %d has no backup to hit", r.ID)
		}
		n.mark()
		for _, v := range victims {
			if err := c.servers[v].kill(); err != nil {
				return 0, "", err
			}
		}
		sleep(ctx, s.Hold)
		var errs []error
		for _, v := range victims {
			errs = append(errs, c.servers[v].start())
		}
		return 0, fmt.Sprintf("region %d: %s down %v", r.ID, strings.Join(victims, "+"), s.Hold.Round(time.Millisecond)), heal(errs...)

	case killMaster, pauseMaster:
		leader := c.leader(ctx)
		p := c.master(leader)
		if p == nil {
			p = c.masters[s.Pick%len(c.masters)]
		}
		n.mark()
		if s.Kind == killMaster {
			if err := p.kill(); err != nil {
				return 0, "", err
			}
			sleep(ctx, s.Hold)
			return 0, fmt.Sprintf("master %s (leader %q) down %v", p.name, leader, s.Hold.Round(time.Millisecond)), heal(p.start())
		}
		if err := p.signal(syscall.SIGSTOP); err != nil {
			return 0, "", err
		}
		sleep(ctx, s.Hold)
		return 0, fmt.Sprintf("master %s (leader %q) paused %v", p.name, leader, s.Hold.Round(time.Millisecond)), heal(p.signal(syscall.SIGCONT))

	case killZK:
		n.mark()
		if err := c.zk.kill(zi); err != nil {
			return 0, "", err
		}
		sleep(ctx, s.Hold)
		return 0, fmt.Sprintf("%s down %v", zkHosts[zi], s.Hold.Round(time.Millisecond)), heal(c.zk.restart(ctx, zi))

	case pausePrimary, pauseBackup:
		v := primary
		if s.Kind == pauseBackup {
			v = backup
		}
		if v == "" {
			return 0, "", fmt.Errorf("torture: region %d has no backup to hit", r.ID)
		}
		n.mark()
		if err := c.servers[v].signal(syscall.SIGSTOP); err != nil {
			return 0, "", err
		}
		sleep(ctx, s.Hold)
		return 0, fmt.Sprintf("region %d: %s paused %v", r.ID, v, s.Hold.Round(time.Millisecond)), heal(c.servers[v].signal(syscall.SIGCONT))

	case cutPrimaryZK, cutPrimaryBackup, cutClient, cutZKMinority:
		var links []link
		switch s.Kind {
		case cutPrimaryZK:
			for _, z := range zkHosts {
				links = append(links, link{primary, z})
			}
		case cutPrimaryBackup:
			links = []link{{primary, backup}}
		case cutClient:
			links = []link{{clientHost, primary}}
		case cutZKMinority:
			for j, z := range zkHosts {
				if j != zi {
					links = append(links, link{zkHosts[zi], z})
				}
			}
		}
		n.mark()
		for _, l := range links {
			if err := c.net.cut(l.a, l.b); err != nil {
				return 0, "", err
			}
		}
		sleep(ctx, s.Hold)
		return 0, fmt.Sprintf("region %d: cut %v for %v", r.ID, links, s.Hold.Round(time.Millisecond)), heal(c.net.healAll())

	case flapLink:
		// The primary's link to a backup, or to ZooKeeper (every server
		// of the ensemble: one alone the client routes around).
		links := []link{{primary, backup}}
		if backup == "" || rng.IntN(2) == 0 {
			links = nil
			for _, z := range zkHosts {
				links = append(links, link{primary, z})
			}
		}
		n.mark()
		flips := 0
		for end := time.Now().Add(s.Hold); time.Now().Before(end) && ctx.Err() == nil && flips < 1000; flips++ {
			for _, l := range links {
				if err := c.net.cut(l.a, l.b); err != nil {
					return 0, "", err
				}
			}
			sleep(ctx, time.Duration(100+rng.IntN(900))*time.Millisecond)
			if err := c.net.healAll(); err != nil {
				return 0, "", err
			}
			sleep(ctx, time.Duration(100+rng.IntN(900))*time.Millisecond)
		}
		return 0, fmt.Sprintf("region %d: %v flapped %d times in %v", r.ID, links, flips, s.Hold.Round(time.Millisecond)), heal(c.net.healAll())

	case diskFull, diskError:
		v := primary
		if backup != "" && rng.IntN(3) == 0 {
			v = backup
		}
		n.mark()
		if s.Kind == diskFull {
			if err := fill(c.o.Dir, v); err != nil {
				return 0, "", err
			}
			sleep(ctx, s.Hold)
			return 0, fmt.Sprintf("region %d: %s's file system full for %v", r.ID, v, s.Hold.Round(time.Millisecond)), heal(unfill(c.o.Dir, v))
		}
		if err := setFault(c.o.Dir, v, "eio-segments"); err != nil {
			return 0, "", err
		}
		sleep(ctx, s.Hold)
		// The device answers again; the server, its volume failed, stays
		// failed until restarted (as an operator would).
		err := setFault(c.o.Dir, v, "off")
		if err == nil {
			err = c.servers[v].stop(10 * time.Second)
		}
		if err == nil {
			err = c.servers[v].start()
		}
		return 0, fmt.Sprintf("region %d: %s's segment file failing (EIO) for %v, then restarted", r.ID, v, s.Hold.Round(time.Millisecond)), heal(err)

	case movePrimary:
		// The operator's command, as an operator runs it, while the
		// workloads run; the balancer (on in every master) may move
		// other primaries meanwhile. Not done in time, or given up (a
		// group that changed under it), is an outcome, not a failure.
		if backup == "" {
			return 0, "", fmt.Errorf("torture: region %d has no backup to move to", r.ID)
		}
		n.mark()
		cmd := exec.CommandContext(ctx, c.o.Binary, "--log-level", "warn", "cluster", "move-primary", "--zookeeper", c.zk.connect(),
			"--wait", (3 * c.o.Session).String(), strconv.FormatUint(r.ID, 10), backup)
		out, err := cmd.CombinedOutput()
		res := strings.TrimSpace(string(out))
		if err != nil {
			res = "not done: " + res
		}
		return 0, fmt.Sprintf("region %d: primary %s moved to %s: %s", r.ID, primary, backup, res), nil

	case slowLink, lossyLink:
		n.mark()
		if err := c.net.shape(primary, s.Kind == lossyLink); err != nil {
			return 0, "", err
		}
		sleep(ctx, s.Hold)
		return 0, fmt.Sprintf("region %d: %s's link shaped %v", r.ID, primary, s.Hold.Round(time.Millisecond)), heal(c.net.healAll())
	}
	return 0, "", fmt.Errorf("torture: no nemesis %q", s.Kind)
}

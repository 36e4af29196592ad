package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/tools/torture"
	"github.com/urfave/cli/v2"
)

// errViolations: a torture run found violations (the exit status says so).
var errViolations = errors.New("torture: violations found")

func tortureCommand() *cli.Command {
	return &cli.Command{
		Name:  "torture",
		Usage: "Jepsen-style fault injection: a real cluster under kills, pauses, partitions and slow links, with checked workloads",
		Description: "Starts ZooKeeper, two masters and region servers (each in a network namespace of its own when run as root), " +
			"runs a register workload (checked for per-key linearizability) and a set workload with deletes (checked by a final scan) " +
			"while a seeded schedule of nemeses runs, then writes summary.txt, timeline.png and, on a violation, artifacts/ into --dir. " +
			"It exits non-zero on a violation.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Required: true, Usage: "directory for volumes, logs, the report and artifacts (should be empty)"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the schedule and workloads (0: the clock; printed)"},
			&cli.DurationFlag{Name: "duration", Value: time.Minute, Usage: "length of the fault phase"},
			&cli.BoolFlag{Name: "cover", Usage: "inject every nemesis kind at least once, even past --duration"},
			&cli.StringFlag{Name: "nemeses", Usage: "comma-separated nemesis kinds (empty: all this machine can inject)"},
			&cli.IntFlag{Name: "zookeepers", Value: 3, Usage: "ZooKeeper servers: 1 or 3"},
			&cli.IntFlag{Name: "servers", Value: 4, Usage: "region servers: 3 to 5"},
			&cli.IntFlag{Name: "replicas", Value: 3, Usage: "copies of each region"},
			&cli.IntFlag{Name: "min-copies", Value: 2, Usage: "copies holding a write before it is acknowledged"},
			&cli.StringFlag{Name: "replication", Value: "send-index", Usage: "send-index or build-index"},
			&cli.StringFlag{Name: "sync-mode", Value: "sync", Usage: "sync or async"},
			&cli.IntFlag{Name: "l0-pairs", Value: 98304, Usage: "the servers' L0 capacity in pairs"},
			&cli.DurationFlag{Name: "session", Value: 2 * time.Second, Usage: "ZooKeeper session timeout of servers and masters"},
			&cli.IntFlag{Name: "keys", Value: 500, Usage: "register keys"},
			&cli.IntFlag{Name: "clients", Value: 6, Usage: "register clients"},
			&cli.IntFlag{Name: "writers", Value: 8, Usage: "set writers"},
			&cli.IntFlag{Name: "set-rate", Value: 2000, Usage: "set inserts per second"},
			&cli.StringFlag{Name: "network", Value: "auto", Usage: "auto (namespaces when root), netns or loopback"},
			&cli.DurationFlag{Name: "total", Usage: "run seeds --seed, --seed+1, ... (each in --dir/seed-N) until this much time has passed, and sum them up"},
		},
		Action: func(c *cli.Context) error {
			// A closed terminal or pipe (the tee of make torture, ^C) must
			// not kill the tool before it stops the cluster and removes
			// its namespaces: SIGHUP ends the run as SIGINT does, and
			// writes to a closed pipe fail instead of killing.
			signal.Ignore(syscall.SIGPIPE)
			ctx, stop := signal.NotifyContext(c.Context, syscall.SIGHUP)
			defer stop()
			c.Context = ctx
			bin, err := os.Executable()
			if err != nil {
				return err
			}
			var nemeses []string
			if s := c.String("nemeses"); s != "" {
				for _, k := range strings.Split(s, ",") {
					nemeses = append(nemeses, strings.TrimSpace(k))
				}
			}
			o := torture.Options{
				Binary: bin, Dir: c.String("dir"), Seed: c.Uint64("seed"), Duration: c.Duration("duration"), Cover: c.Bool("cover"),
				ZooKeepers: c.Int("zookeepers"), Servers: c.Int("servers"), Replicas: c.Int("replicas"), MinCopies: c.Int("min-copies"),
				Replication: c.String("replication"), SyncMode: c.String("sync-mode"), L0Pairs: c.Int("l0-pairs"),
				Session: c.Duration("session"), Nemeses: nemeses, Keys: c.Int("keys"), Clients: c.Int("clients"),
				Writers: c.Int("writers"), SetRate: c.Int("set-rate"), Network: c.String("network"), Progress: os.Stderr,
			}
			total := c.Duration("total")
			if total <= 0 {
				res, err := torture.Run(c.Context, o)
				if err != nil {
					return err
				}
				if err := res.WriteTable(os.Stdout); err != nil {
					return err
				}
				fmt.Printf("report %s, timeline %s\n", res.Report, res.Timeline)
				if !res.Valid() {
					return errViolations
				}
				return nil
			}
			if o.Seed == 0 {
				o.Seed = uint64(time.Now().UnixNano())
			}
			var sum torture.Totals
			root := o.Dir
			for end := time.Now().Add(total); time.Now().Before(end) && c.Context.Err() == nil; o.Seed++ {
				o.Dir = filepath.Join(root, fmt.Sprintf("seed-%d", o.Seed))
				res, err := torture.Run(c.Context, o)
				if err != nil {
					return fmt.Errorf("seed %d: %w", o.Seed, err)
				}
				sum.Add(res)
				verdict := "VALID"
				if !res.Valid() {
					verdict = "INVALID: artifacts in " + res.Artifacts
				}
				fmt.Fprintf(os.Stderr, "run %d, seed %d: %s\n", sum.Runs(), o.Seed, verdict)
			}
			if err := sum.WriteTable(os.Stdout); err != nil {
				return err
			}
			if !sum.Valid() {
				return errViolations
			}
			return nil
		},
	}
}

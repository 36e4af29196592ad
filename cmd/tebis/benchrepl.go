package main

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/tebis-go/tebis/region"
	"github.com/tebis-go/tebis/tools/bench"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
)

func benchReplicationCommand() *cli.Command {
	return &cli.Command{
		Name:  "replication",
		Usage: "3 region server processes: YCSB Load A and Run A with no replication, Build-Index and Send-Index, 2- and 3-way",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "setups", Usage: "setups to run, in order (default: no-rep, build-index-2, send-index-2, build-index-3, send-index-3; also build-index-rl-2, build-index-rl-3: Build-Index with each replica's L0 at l0-pairs over the replicas, Send-Index's L0 memory)"},
			&cli.Int64Flag{Name: "recordcount", Value: 1_000_000, Usage: "records loaded by Load A"},
			&cli.IntFlag{Name: "threads", Value: 16, Usage: "client goroutines"},
			&cli.StringFlag{Name: "json", Usage: "also write the results as JSON to this file"},
			&cli.IntFlag{Name: "rounds", Value: 1, Usage: fmt.Sprintf("run the setups this many times (at most %d), every other round in reverse order; ratios are taken within a round, then their median and range", bench.MaxRounds)},
		}, replFlags()...),
		Action: benchReplication,
	}
}

// replFlags are the flags `bench replication` and `bench curves` share:
// the workload but its size and threads, and the servers.
func replFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "phases", Value: cli.NewStringSlice("load-a", "a"), Usage: "YCSB phases in order; the first must be load-a"},
		&cli.StringFlag{Name: "kv-sizes", Value: "SD", Usage: "S, M, L, SD, MD, LD, a fixed pair size in bytes (key included), or vN: N-byte values"},
		&cli.Int64Flag{Name: "operationcount", Value: 500_000, Usage: "operations per run phase"},
		&cli.StringFlag{Name: "sync-mode", Value: "async", Usage: "servers' log: async (replicas in memory make the write safe, as in the paper) or sync"},
		&cli.IntFlag{Name: "l0-pairs", Value: 96 << 10, Usage: "L0 capacity in pairs (the same on every replica; build-index-rl-N: this over N)"},
		&cli.IntFlag{Name: "growth-factor", Value: 4, Usage: "level growth factor"},
		&cli.StringFlag{Name: "segment-size", Value: "2MiB", Usage: "servers' segment size"},
		&cli.StringFlag{Name: "transport", Value: "shm", Usage: "client and server-to-server transport: shm or tcp"},
		&cli.StringFlag{Name: "dir", Usage: "parent of the scratch data directory (default: the system temp dir)"},
		&cli.BoolFlag{Name: "keep", Usage: "keep the scratch data directory"},
		&cli.Uint64Flag{Name: "seed", Usage: "workload seed (0: from the clock; printed)"},
		&cli.StringFlag{Name: "server-memory", Usage: "limit each server's memory, page cache included, in a cgroup of its own (e.g. 600MiB; needs a writable memory cgroup): the paper limits the cache to a quarter of the data set"},
		&cli.IntFlag{Name: "server-procs", DefaultText: "a quarter of this process's Ps, at least 1", Usage: "GOMAXPROCS of every server (0: not set, the servers inherit this process's environment; 3 servers and the client share this host's cores)"},
		&cli.IntFlag{Name: "client-procs", DefaultText: "a quarter of this process's Ps, at least 1", Usage: "this process's GOMAXPROCS while a setup runs (0: unchanged)"},
		&cli.StringSliceFlag{Name: "server-arg", Value: cli.NewStringSlice("--spin-time=1us"), Usage: "extra flag for every server, repeatable (default: pollers barely spin: 3 servers and the client share this host's cores)"},
		&cli.DurationFlag{Name: "client-spin-time", Usage: "the client's reply-poller spin before parking (0: the ring's default, 50us)"},
	}
}

func benchReplication(c *cli.Context) error {
	if n := c.Int("rounds"); n < 1 || n > bench.MaxRounds {
		return fmt.Errorf("--rounds %d: want 1 to %d", n, bench.MaxRounds)
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	cfg, err := replConfig(c, log)
	if err != nil {
		return err
	}
	cfg.Bench.RecordCount, cfg.Bench.Threads = c.Int64("recordcount"), c.Int("threads")
	cfg.Rounds = c.Int("rounds")
	for _, name := range c.StringSlice("setups") {
		found := false
		for _, s := range bench.ReplSetups {
			if s.Name == name {
				cfg.Setups, found = append(cfg.Setups, s), true
			}
		}
		if !found {
			var names []string
			for _, s := range bench.ReplSetups {
				names = append(names, s.Name)
			}
			return fmt.Errorf("unknown setup %q (one of %s)", name, strings.Join(names, ", "))
		}
	}
	res, err := bench.RunReplication(c.Context, cfg)
	if res != nil && len(res.Runs) > 0 {
		writeResult(c, log, res)
	}
	return err
}

// replConfig reads replFlags.
func replConfig(c *cli.Context, log *zap.Logger) (bench.ReplConfig, error) {
	sizes, sync, err := workloadFlags(c)
	if err != nil {
		return bench.ReplConfig{}, err
	}
	seed := benchSeed(c)
	exe, err := os.Executable()
	if err != nil {
		return bench.ReplConfig{}, err
	}
	cfg := bench.ReplConfig{
		Bench: bench.Config{
			Phases: c.StringSlice("phases"), Sizes: sizes, OperationCount: c.Int64("operationcount"),
			Sync: sync, Dir: c.String("dir"), Keep: c.Bool("keep"), L0Pairs: c.Int("l0-pairs"),
			GrowthFactor: c.Int("growth-factor"), Seed: seed, ServerProcs: replProcs(c, "server-procs", runtime.GOMAXPROCS(0)), ClientProcs: replProcs(c, "client-procs", runtime.GOMAXPROCS(0)), ClientSpin: c.Duration("client-spin-time"), Progress: progress.Reporter{W: os.Stderr, Bar: stderrIsTerminal()}, Logger: log,
		},
		Binary: exe, SegmentSize: c.String("segment-size"), Transport: c.String("transport"), ServerArgs: c.StringSlice("server-arg"),
	}
	if v := c.String("server-memory"); v != "" {
		n, err := region.ParseByteSize(v)
		if err != nil {
			return cfg, fmt.Errorf("--server-memory: %w", err)
		}
		cfg.ServerMemory = int64(n)
	}
	return cfg, nil
}

// replProcs is the flag's GOMAXPROCS, by default a quarter of cores
// (this process's Ps, at least 1): the 3 servers and this process share
// them.
func replProcs(c *cli.Context, flag string, cores int) int {
	if c.IsSet(flag) {
		return c.Int(flag)
	}
	return max(1, cores/4)
}

package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/tools/bench"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "benchmarks",
		Subcommands: append([]*cli.Command{{
			Name:  "engine",
			Usage: "run YCSB Load A and Run A-D against the tebis engine and pebble in one process",
			Flags: append([]cli.Flag{
				&cli.StringSliceFlag{Name: "engines", Usage: "engines to run, in order: tebis, pebble, server (default: tebis, pebble)"},
				&cli.StringFlag{Name: "server-map", Usage: "server engine: run against the servers of this region map instead of starting one"},
				&cli.StringFlag{Name: "server-transport", Value: "shm", Usage: "server engine: client transport, shm or tcp"},
				&cli.DurationFlag{Name: "client-spin-time", Usage: "server engine: the client's reply-poller spin before parking (0: the ring's default, 50us)"},
				&cli.StringSliceFlag{Name: "server-arg", Usage: "server engine: extra flag for the server it starts, repeatable (e.g. --server-arg=--cpuprofile=FILE)"},
				&cli.StringSliceFlag{Name: "phases", Value: cli.NewStringSlice(bench.DefaultPhases...), Usage: "YCSB phases in order; the first must be load-a"},
				&cli.StringFlag{Name: "kv-sizes", Value: "SD", Usage: "S, M, L, SD, MD, LD, a fixed pair size in bytes (key included), or vN: N-byte values"},
				&cli.Int64Flag{Name: "recordcount", Value: bench.DefaultRecordCount, Usage: "records loaded by Load A"},
				&cli.Int64Flag{Name: "operationcount", Value: bench.DefaultOperationCount, Usage: "operations per run phase"},
				&cli.IntFlag{Name: "threads", Value: bench.DefaultThreads, Usage: "client goroutines"},
				&cli.StringFlag{Name: "sync-mode", Value: "sync", Usage: "sync (durable on return) or async"},
				&cli.StringFlag{Name: "dir", Usage: "parent of the scratch data directory (default: the system temp dir)"},
				&cli.BoolFlag{Name: "keep", Usage: "keep the scratch data directory"},
				&cli.IntFlag{Name: "l0-pairs", Usage: "tebis L0 capacity in pairs (0: engine default)"},
				&cli.IntFlag{Name: "growth-factor", Usage: "tebis level growth factor (0: engine default)"},
				&cli.Int64Flag{Name: "segment-size", Usage: "tebis segment size in bytes, a power of two (0: engine default, 2 MiB); in-process engine only"},
				&cli.Uint64Flag{Name: "seed", Usage: "workload seed (0: from the clock; printed)"},
				&cli.Int64Flag{Name: "disk-bw-bytes", Value: bench.DefaultDiskBWBytes, Usage: "size of the sequential write test (0: skip)"},
				&cli.StringFlag{Name: "json", Usage: "also write the results as JSON to this file"},
				&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the whole run to this file"},
				&cli.IntFlag{Name: "rounds", Value: 1, Usage: fmt.Sprintf("run the engines this many times (at most %d), every other round in reverse order; with two engines, their ratios within each round, then the median and range", bench.MaxRounds)},
			}, append(procsFlags(), tlsFlags()...)...),
			Action: benchEngine,
		}}, append(benchRDMACommands(), benchYCSBCommand(), benchReplicationCommand(), benchCurvesCommand(), benchPlotCommand())...),
	}
}

func benchEngine(c *cli.Context) error {
	if n := c.Int("rounds"); n < 1 || n > bench.MaxRounds {
		return fmt.Errorf("--rounds %d: want 1 to %d", n, bench.MaxRounds)
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	sizes, sync, err := workloadFlags(c)
	if err != nil {
		return err
	}
	seed := benchSeed(c)
	stopProfile, err := startCPUProfile(c.String("cpuprofile"))
	if err != nil {
		return err
	}
	defer stopProfile()
	serverProcs, clientProcs := benchProcs(c, runtime.GOMAXPROCS(0), engineStartsServer(c))
	cfg := bench.Config{
		Engines:         c.StringSlice("engines"),
		ServerProcs:     serverProcs,
		ClientProcs:     clientProcs,
		ClientSpin:      c.Duration("client-spin-time"),
		ServerArgv:      append(serverArgv(), c.StringSlice("server-arg")...),
		ServerMap:       serverMap(c.String("server-map")),
		ServerTransport: c.String("server-transport"),
		ServerTLS:       clientTLS(c),
		Phases:          c.StringSlice("phases"),
		Sizes:           sizes,
		RecordCount:     c.Int64("recordcount"),
		OperationCount:  c.Int64("operationcount"),
		Threads:         c.Int("threads"),
		Sync:            sync,
		Dir:             c.String("dir"),
		Keep:            c.Bool("keep"),
		L0Pairs:         c.Int("l0-pairs"),
		GrowthFactor:    c.Int("growth-factor"),
		SegmentSize:     c.Int64("segment-size"),
		Seed:            seed,
		DiskBWBytes:     c.Int64("disk-bw-bytes"),
		Rounds:          c.Int("rounds"),
		Progress:        progress.Reporter{W: os.Stderr, Bar: stderrIsTerminal()},
		Logger:          log,
	}
	res, err := bench.Run(c.Context, cfg)
	if res != nil && len(res.Phases) > 0 {
		writeResult(c, log, res)
	}
	return err
}

// procsFlags are --server-procs and --client-procs of the commands whose
// server engine may start a server on this host (benchProcs).
func procsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "server-procs", DefaultText: "half this process's Ps when it starts the server", Usage: "server engine: GOMAXPROCS of the server it starts (0: not set, the server inherits this process's environment; no effect on running servers)"},
		&cli.IntFlag{Name: "client-procs", DefaultText: "the Ps --server-procs leaves when it starts the server, else 0", Usage: "server engine: this process's GOMAXPROCS while that engine runs (0: unchanged; no effect on other engines)"},
	}
}

// engineStartsServer: `bench engine`'s server engine starts a server on
// this host (no --server-map).
func engineStartsServer(c *cli.Context) bool { return c.String("server-map") == "" }

// benchProcs are --server-procs and --client-procs for a run with cores
// Ps (GOMAXPROCS(0): the cores, or the cgroup's CPU limit, or the
// user's GOMAXPROCS). Unset, when the run starts a server on this host
// they split its Ps between that server and this process (half each, at
// least one); a run against running servers (a map) starts none, so it
// sets no server procs, and leaves this process's Ps alone unless asked.
func benchProcs(c *cli.Context, cores int, startsServer bool) (server, client int) {
	if !startsServer {
		return 0, c.Int("client-procs")
	}
	server, client = c.Int("server-procs"), c.Int("client-procs")
	if !c.IsSet("server-procs") {
		server = max(1, cores/2)
	}
	if !c.IsSet("client-procs") && server > 0 {
		client = max(1, cores-server)
	}
	return server, client
}

// serverArgv starts this binary as a quiet region server.
func serverArgv() []string {
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	return []string{exe, "--log-level", "warn", "server"}
}

func serverMap(path string) regionmap.Source {
	if path == "" {
		return nil
	}
	return regionmap.File(path)
}

// benchSeed is --seed, or a seed from the clock; it is printed so that a
// run can be repeated.
func benchSeed(c *cli.Context) uint64 {
	seed := c.Uint64("seed")
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(os.Stderr, "seed %d (rerun with --seed %d)\n", seed, seed)
	return seed
}

// benchResult is what every bench command prints and may save.
type benchResult interface {
	WriteTable(io.Writer) error
	WriteJSONFile(path string) error
}

// writeResult prints the result's table and writes --json if asked;
// errors are logged (the run's own error is what the command returns).
func writeResult(c *cli.Context, log *zap.Logger, res benchResult) {
	if err := res.WriteTable(os.Stdout); err != nil {
		log.Error("write table", zap.Error(err))
	}
	if path := c.String("json"); path != "" {
		if err := res.WriteJSONFile(path); err != nil {
			log.Error("write json", zap.Error(err))
		}
	}
}

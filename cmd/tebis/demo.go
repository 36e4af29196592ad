package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/child"
	"github.com/tebis-go/tebis/tools/demo"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name: "demo",
		Usage: "--cluster: a local replicated cluster (ZooKeeper, a master, 3 region servers, each a process) under a YCSB workload; " +
			"otherwise: load YCSB-style records, read them back zipfian, verify (in-process, or through a local server)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: demo.DefaultDir, Usage: "volume directory (reopened if it exists); with --cluster the cluster lives in DIR/cluster, recreated by every run"},
			&cli.BoolFlag{Name: "cluster", Usage: "start ZooKeeper, a master and region servers as separate processes (shm), create replicated regions, run a workload, serve until Ctrl-C"},
			&cli.BoolFlag{Name: "server", Usage: "start a standalone region server process on the volume in --dir and run through the client"},
			&cli.StringFlag{Name: "map", Usage: "run through the client against the servers of this region map file"},
			&cli.StringFlag{Name: "transport", Value: "shm", Usage: "client transport with --server or --map: shm or tcp"},
			&cli.Int64Flag{Name: "records", DefaultText: fmt.Sprintf("%d; --cluster: %d", demo.DefaultRecords, demo.DefaultClusterRecords), Usage: "records to load (and, without --cluster, reads to do)"},
			&cli.IntFlag{Name: "threads", Value: demo.DefaultThreads, Usage: "client goroutines"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "workload seed"},
			&cli.StringFlag{Name: "kv-sizes", Value: "SD", Usage: "S, M, L, SD, MD, LD, a fixed pair size in bytes (key included), or vN: N-byte values"},
			&cli.StringFlag{Name: "sync-mode", Value: "sync", DefaultText: "sync; --cluster: async", Usage: "sync or async (--cluster: the servers' log; replicas hold every acknowledged write)"},
			&cli.IntFlag{Name: "l0-pairs", DefaultText: fmt.Sprintf("engine default; --cluster: %d", demo.DefaultClusterL0Pairs), Usage: "L0 capacity in pairs"},
			&cli.IntFlag{Name: "growth-factor", Usage: "level growth factor (0: engine default; not with --cluster)"},
			&cli.IntFlag{Name: "sample", Value: demo.DefaultSample, Usage: "records verified after the read phase (not with --cluster)"},
			// --cluster only.
			&cli.Int64Flag{Name: "ops", Value: demo.DefaultClusterOps, Usage: "--cluster: operations of the run phase (0: load only)"},
			&cli.StringFlag{Name: "workload", Value: demo.DefaultClusterWorkload, Usage: "--cluster: YCSB workload of the run phase, a-f"},
			&cli.IntFlag{Name: "servers", Value: demo.DefaultClusterServers, Usage: "--cluster: region server processes"},
			&cli.IntFlag{Name: "regions", Value: 3, Usage: "--cluster: regions, split evenly over the YCSB keys"},
			&cli.IntFlag{Name: "replicas", Value: 3, Usage: "--cluster: copies of each region, primary included"},
			&cli.StringFlag{Name: "replication", Value: "send-index", Usage: "--cluster: send-index or build-index"},
			&cli.IntFlag{Name: "zk-port", Usage: "--cluster: ZooKeeper's client port (0: a free one)"},
			&cli.DurationFlag{Name: "zk-session-timeout", Value: demo.DefaultSessionTimeout, Usage: "--cluster: the members' ZooKeeper session timeout (failure detection)"},
			&cli.StringSliceFlag{Name: "server-arg", Value: cli.NewStringSlice(demo.DefaultServerArgs...), Usage: "--cluster: extra flag for every server, repeatable"},
			&cli.BoolFlag{Name: "exit", Usage: "--cluster: stop the cluster once the workload is done instead of serving until Ctrl-C"},
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	if c.Bool("cluster") {
		return runClusterDemo(c)
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
	cfg := demo.Config{
		Dir:          c.String("dir"),
		Records:      c.Int64("records"),
		Threads:      c.Int("threads"),
		Seed:         c.Uint64("seed"),
		Sizes:        sizes,
		Sync:         sync,
		L0Pairs:      c.Int("l0-pairs"),
		GrowthFactor: c.Int("growth-factor"),
		Sample:       c.Int("sample"),
		Progress:     progress.Reporter{W: os.Stderr, Bar: stderrIsTerminal()},
		Out:          os.Stdout,
		Logger:       log,
		Transport:    c.String("transport"),
	}
	switch {
	case c.String("map") != "":
		cfg.Map = regionmap.File(c.String("map"))
	case c.Bool("server"):
		srv, stop, err := spawnServer(c, cfg.Dir)
		if err != nil {
			return err
		}
		defer stop()
		cfg.Map = regionmap.Static{M: regionmap.Single(srv)}
	}
	res, err := demo.Run(c.Context, cfg)
	if err != nil {
		return err
	}
	fmt.Printf("demo: ok, %d values verified\n", res.Verified)
	return nil
}

// spawnServer starts `tebis server` on dir (standalone, one region) and
// returns its map entry and a function that stops it (SIGINT, then
// SIGKILL after 30 s).
func spawnServer(c *cli.Context, dir string) (regionmap.Server, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return regionmap.Server{}, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return regionmap.Server{}, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return regionmap.Server{}, nil, err
	}
	tcp := l.Addr().String()
	l.Close()
	abs, _ := filepath.Abs(dir)
	srv := regionmap.Server{Name: "rs1", Shm: filepath.Join(abs, "server.sock"), TCP: tcp}
	p, err := child.Start(child.Spec{
		Argv: []string{exe, "--log-level", "warn", "server", "--data-dir", filepath.Join(abs, "server"),
			"--shm", srv.Shm, "--tcp", srv.TCP, "--sync-mode", c.String("sync-mode")},
		Stdout: os.Stderr, Stderr: os.Stderr,
	})
	if err != nil {
		return srv, nil, fmt.Errorf("start server: %w", err)
	}
	stop := func() { _ = p.Stop(syscall.SIGINT, 30*time.Second) }
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	if err := p.WaitTCP(ctx, tcp); err != nil {
		stop()
		return srv, nil, fmt.Errorf("server on %s: %w", tcp, err)
	}
	fmt.Fprintf(os.Stdout, "demo: started region server (pid %d) on shm %s and tcp %s\n", p.PID(), srv.Shm, srv.TCP)
	return srv, stop, nil
}

// runClusterDemo is `tebis demo --cluster`. The first SIGINT or SIGTERM
// (main cancels the context) stops the cluster in order; a second one
// kills whatever still runs.
func runClusterDemo(c *cli.Context) error {
	level := zapcore.WarnLevel // the members log to files; keep the terminal for the demo
	if c.IsSet("log-level") {
		var err error
		if level, err = zapcore.ParseLevel(c.String("log-level")); err != nil {
			return fmt.Errorf("--log-level: %w", err)
		}
	}
	lc := zap.NewDevelopmentConfig()
	lc.Level = zap.NewAtomicLevelAt(level)
	lc.DisableStacktrace = true
	log, err := lc.Build()
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	for _, name := range []string{"server", "map", "transport", "sample", "growth-factor"} {
		if c.IsSet(name) {
			return fmt.Errorf("--%s does not apply to --cluster", name)
		}
	}
	sizes, sync, err := workloadFlags(c)
	if err != nil {
		return err
	}
	mode := "async"
	if c.IsSet("sync-mode") && sync {
		mode = "sync"
	}
	ops := c.Int64("ops")
	if ops == 0 {
		ops = -1 // load only
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}

	force := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		for n := 1; ; n++ {
			select {
			case <-sigs:
			case <-finished:
				return
			}
			if n > 1 {
				fmt.Fprintln(os.Stderr, "\ndemo: killing the cluster")
				close(force)
				return
			}
			fmt.Fprintln(os.Stderr, "\ndemo: interrupted, stopping the cluster (Ctrl-C again to kill it)")
		}
	}()

	res, err := demo.RunCluster(c.Context, demo.ClusterConfig{
		Dir:            c.String("dir"),
		Binary:         exe,
		Command:        os.Args[0],
		Servers:        c.Int("servers"),
		Regions:        c.Int("regions"),
		Replicas:       c.Int("replicas"),
		Replication:    c.String("replication"),
		Records:        c.Int64("records"),
		Ops:            ops,
		Workload:       c.String("workload"),
		Threads:        c.Int("threads"),
		Seed:           c.Uint64("seed"),
		Sizes:          sizes,
		SyncMode:       mode,
		L0Pairs:        c.Int("l0-pairs"),
		ServerArgs:     append([]string{}, c.StringSlice("server-arg")...),
		ZKPort:         c.Int("zk-port"),
		SessionTimeout: c.Duration("zk-session-timeout"),
		Serve:          !c.Bool("exit"),
		Force:          force,
		Progress:       progress.Reporter{W: os.Stderr, Bar: stderrIsTerminal()},
		Out:            os.Stdout,
		Logger:         log,
	})
	select {
	case <-force:
		return errors.Join(errors.New("demo: killed on a second interrupt"), err)
	default:
	}
	if err != nil {
		return err
	}
	if res.Interrupted {
		fmt.Println("demo: interrupted; the cluster stopped cleanly")
	} else {
		fmt.Println("demo: ok")
	}
	return nil
}

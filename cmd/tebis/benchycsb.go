package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/procstat"
	"github.com/tebis-go/tebis/tools/bench"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/tebis-go/tebis/tools/ycsb"
	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot/vg"
)

func benchYCSBCommand() *cli.Command {
	return &cli.Command{
		Name:  "ycsb",
		Usage: "run a YCSB workload (load and/or run phase) against one target",
		Flags: append([]cli.Flag{
			&cli.StringSliceFlag{Name: "P", Usage: "YCSB property file (repeatable; later files win); workloada-workloadf, with no such file, are the YCSB project's, built in"},
			&cli.StringSliceFlag{Name: "p", Usage: "property override key=value (repeatable; wins over files)"},
			&cli.StringFlag{Name: "workload", Value: "a", Usage: "built-in workload a-f used when no -P is given"},
			&cli.StringFlag{Name: "phases", Value: "load,run", Usage: "load, run, or load,run"},
			&cli.StringFlag{Name: "target", Value: "tebis", Usage: "tebis (in-process engine), pebble, server (a region server this command starts) or cluster (--map)"},
			&cli.StringFlag{Name: "map", Usage: "cluster target: the region map file of running servers"},
			&cli.StringFlag{Name: "transport", Value: "shm", Usage: "server and cluster targets: shm or tcp"},
			&cli.IntSliceFlag{Name: "pids", Usage: "server process IDs whose CPU and device I/O are charged to each phase"},
			&cli.StringFlag{Name: "kv-sizes", Usage: "S, M, L, SD, MD, LD, a fixed pair size, or vN: N-byte values (overrides the property files' kvsizes)"},
			&cli.IntFlag{Name: "threads", Value: 16, Usage: "client goroutines"},
			&cli.Float64Flag{Name: "target-rate", Usage: "operations per second to pace to (0: as fast as possible)"},
			&cli.StringFlag{Name: "sync-mode", Value: "sync", Usage: "in-process targets: sync or async"},
			&cli.Uint64Flag{Name: "seed", Usage: "workload seed (0: from the clock; printed)"},
			&cli.StringFlag{Name: "dir", Usage: "parent of the scratch data directory (in-process and server targets)"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text, json or csv"},
			&cli.StringFlag{Name: "out", Usage: "write the results here instead of stdout"},
		}, append(procsFlags(), tlsFlags()...)...),
		Action: benchYCSB,
	}
}

// ycsbWorkload assembles the workload: built-in or property files, then
// -p overrides, then --kv-sizes.
func ycsbWorkload(c *cli.Context) (ycsb.Workload, error) {
	var w ycsb.Workload
	var err error
	if files := c.StringSlice("P"); len(files) > 0 {
		w = ycsb.Workload{Name: filepath.Base(files[len(files)-1])}
		for _, path := range files {
			f, err := ycsb.OpenProperties(path)
			if err != nil {
				return w, err
			}
			_, err = ycsb.ParseProperties(f, &w)
			f.Close()
			if err != nil {
				return w, fmt.Errorf("%s: %w", path, err)
			}
		}
	} else {
		if w, err = ycsb.Builtin(c.String("workload")); err != nil {
			return w, err
		}
		w.Name = "workload" + c.String("workload")
	}
	if over := c.StringSlice("p"); len(over) > 0 {
		if _, err := ycsb.ParseProperties(strings.NewReader(strings.Join(over, "\n")), &w); err != nil {
			return w, fmt.Errorf("-p: %w", err)
		}
	}
	if s := c.String("kv-sizes"); s != "" {
		if w.Sizes, err = ycsb.ParseSizeMix(s); err != nil {
			return w, fmt.Errorf("--kv-sizes: %w", err)
		}
	}
	return w, nil
}

func benchYCSB(c *cli.Context) error {
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	w, err := ycsbWorkload(c)
	if err != nil {
		return err
	}
	var workloads []ycsb.Workload
	for _, ph := range strings.Split(c.String("phases"), ",") {
		p := w
		switch strings.TrimSpace(ph) {
		case "load":
			p.Load, p.Name = true, "Load "+w.Name
		case "run":
			p.Load, p.Name = false, "Run "+w.Name
		default:
			return fmt.Errorf("--phases: %q is not load or run", ph)
		}
		workloads = append(workloads, p)
	}
	seed := benchSeed(c)
	engine, pids := c.String("target"), c.IntSlice("pids")
	var srvMap regionmap.Source
	switch engine {
	case "cluster":
		if c.String("map") == "" {
			return fmt.Errorf("--target cluster needs --map")
		}
		engine, srvMap = "server", regionmap.File(c.String("map"))
		if len(pids) == 0 {
			pids = clusterPIDs(c, srvMap)
		}
	case "tebis", "pebble", "server":
	default:
		return fmt.Errorf("--target %q: want tebis, pebble, server or cluster", engine)
	}
	serverProcs, clientProcs := benchProcs(c, runtime.GOMAXPROCS(0), ycsbStartsServer(c))
	res, err := bench.Run(c.Context, bench.Config{
		Engines:         []string{engine},
		ServerProcs:     serverProcs,
		ClientProcs:     clientProcs,
		Workloads:       workloads,
		Sizes:           w.Sizes,
		RecordCount:     w.RecordCount,
		OperationCount:  w.OperationCount,
		Threads:         c.Int("threads"),
		Sync:            c.String("sync-mode") != "async",
		Dir:             c.String("dir"),
		Seed:            seed,
		TargetRate:      c.Float64("target-rate"),
		PIDs:            pids,
		ServerArgv:      serverArgv(),
		ServerMap:       srvMap,
		ServerTransport: c.String("transport"),
		ServerTLS:       clientTLS(c),
		Progress:        progress.Reporter{W: os.Stderr, Bar: stderrIsTerminal()},
		Logger:          log,
	})
	if res == nil {
		return err
	}
	out := io.Writer(os.Stdout)
	if path := c.String("out"); path != "" {
		f, ferr := os.Create(path)
		if ferr != nil {
			return ferr
		}
		defer f.Close()
		out = f
	}
	var werr error
	switch c.String("format") {
	case "json":
		werr = res.WriteJSON(out)
	case "csv":
		werr = res.WriteCSV(out)
	default:
		werr = res.WriteYCSB(out)
	}
	if err == nil {
		err = werr
	}
	return err
}

func benchPlotCommand() *cli.Command {
	return &cli.Command{
		Name:      "plot",
		Usage:     "draw JSON results (bench engine/ycsb --json/--format json) as a PNG: throughput and CPU/op per phase and configuration",
		ArgsUsage: "RESULT.json...",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: "bench.png", Usage: "PNG file to write"},
			&cli.Float64Flag{Name: "width", Value: 8, Usage: "inches"},
			&cli.Float64Flag{Name: "height", Value: 8, Usage: "inches"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return fmt.Errorf("give one or more JSON result files")
			}
			if err := bench.Plot(c.Args().Slice(), c.String("out"), vg.Length(c.Float64("width"))*vg.Inch, vg.Length(c.Float64("height"))*vg.Inch); err != nil {
				return err
			}
			fmt.Println("wrote", c.String("out"))
			return nil
		},
	}
}

// clusterPIDs finds the local processes listening on the map's tcp
// addresses, for resource accounting; servers on other hosts are skipped.
func clusterPIDs(c *cli.Context, src regionmap.Source) []int {
	m, err := src.Load(c.Context)
	if err != nil {
		return nil
	}
	var pids []int
	for _, s := range m.Servers {
		if s.TCP == "" {
			continue
		}
		pid, err := procstat.ListenerPID(s.TCP)
		if err != nil {
			fmt.Fprintf(os.Stderr, "server %s: not accounted (%v)\n", s.Name, err)
			continue
		}
		fmt.Fprintf(os.Stderr, "server %s: accounting pid %d\n", s.Name, pid)
		pids = append(pids, pid)
	}
	return pids
}

// ycsbStartsServer: `bench ycsb` starts a server on this host (--target
// server; cluster runs against running servers).
func ycsbStartsServer(c *cli.Context) bool { return c.String("target") == "server" }

package main

import (
	"fmt"
	"os"

	"github.com/tebis-go/tebis/tools/bench"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
)

// benchCurvesCommand is `tebis bench curves`. It is a command of its own,
// not a mode of `bench replication`: it runs one setup (3-way Send-Index)
// at many points and writes a directory of plots, where `bench replication`
// compares setups at one point; both share the servers' machinery
// (bench.RunReplication) and its flags.
func benchCurvesCommand() *cli.Command {
	return &cli.Command{
		Name: "curves",
		Usage: "3-way Send-Index through 3 server processes, one parameter varied at a time (records, regions per server, client goroutines): " +
			"throughput, server CPU/op, I/O amplification and memory, as JSON and one PNG per parameter",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Required: true, Usage: "directory for curves.json and curve-records.png, curve-regions.png, curve-threads.png"},
			&cli.Int64SliceFlag{Name: "records", Value: cli.NewInt64Slice(1_000_000, 3_000_000, 10_000_000), Usage: "records loaded by Load A, one point each (the first is the base of the other curves, unless --base-records)"},
			&cli.IntSliceFlag{Name: "regions", Value: cli.NewIntSlice(3, 24, 96), Usage: "regions each server is primary of, one point each; the map has 3 times as many, evenly split, each with 2 backups (the first is the base)"},
			&cli.IntSliceFlag{Name: "threads", Value: cli.NewIntSlice(1, 2, 4, 8, 16, 32, 64), Usage: "client goroutines, one point each"},
			&cli.IntFlag{Name: "base-threads", Value: 16, Usage: "client goroutines while records or regions vary"},
			&cli.Int64Flag{Name: "base-records", Usage: "records while regions or threads vary (default: the first of --records)"},
			&cli.StringFlag{Name: "from", Usage: "run nothing: print and plot the curves.json of an earlier run into --out"},
			&cli.StringSliceFlag{Name: "curves", Value: cli.NewStringSlice("records", "regions", "threads"), Usage: "curves to draw (the others' first values still set the base point)"},
		}, replFlags()...),
		Action: benchCurves,
	}
}

func benchCurves(c *cli.Context) error {
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	if from := c.String("from"); from != "" {
		res, err := bench.LoadCurves(from)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(c.String("out"), 0o755); err != nil {
			return err
		}
		if err := res.WriteTable(os.Stdout); err != nil {
			return err
		}
		return res.PlotCurves(c.String("out"))
	}
	rc, err := replConfig(c, log)
	if err != nil {
		return err
	}
	cfg := bench.CurvesConfig{Repl: rc, Records: c.Int64Slice("records"), Regions: c.IntSlice("regions"), Threads: c.IntSlice("threads"),
		BaseThreads: c.Int("base-threads"), Out: c.String("out")}
	if len(cfg.Records) > 0 {
		cfg.BaseRecords = cfg.Records[0]
	}
	if n := c.Int64("base-records"); n > 0 {
		cfg.BaseRecords = n
	}
	if len(cfg.Regions) > 0 {
		cfg.BaseRegions = cfg.Regions[0]
	}
	draw := map[string]bool{}
	for _, name := range c.StringSlice("curves") {
		switch name {
		case "records", "regions", "threads":
			draw[name] = true
		default:
			return fmt.Errorf("--curves: unknown curve %q (records, regions, threads)", name)
		}
	}
	if !draw["records"] {
		cfg.Records = nil
	}
	if !draw["regions"] {
		cfg.Regions = nil
	}
	if !draw["threads"] {
		cfg.Threads = nil
	}
	res, err := bench.RunCurves(c.Context, cfg)
	if res != nil && len(res.Points) > 0 {
		if werr := res.WriteTable(os.Stdout); werr != nil {
			log.Error("write table", zap.Error(werr))
		}
	}
	if err != nil {
		return err
	}
	fmt.Printf("\nwrote %s/curves.json and %d plots\n", cfg.Out, len(res.Curves))
	return nil
}

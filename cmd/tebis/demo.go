package main

import (
	"fmt"
	"os"

	"github.com/tebis-go/tebis/tools/demo"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/urfave/cli/v2"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "load YCSB-style records into one engine region, read them back zipfian, verify",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: demo.DefaultDir, Usage: "volume directory (reopened if it exists)"},
			&cli.Int64Flag{Name: "records", Value: demo.DefaultRecords, Usage: "records to load and reads to do"},
			&cli.IntFlag{Name: "threads", Value: demo.DefaultThreads, Usage: "client goroutines"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "workload seed"},
			&cli.StringFlag{Name: "kv-sizes", Value: "SD", Usage: "S, M, L, SD, MD, LD, or a fixed pair size in bytes"},
			&cli.StringFlag{Name: "sync-mode", Value: "sync", Usage: "sync or async"},
			&cli.IntFlag{Name: "l0-pairs", Usage: "L0 capacity in pairs (0: engine default)"},
			&cli.IntFlag{Name: "growth-factor", Usage: "level growth factor (0: engine default)"},
			&cli.IntFlag{Name: "sample", Value: demo.DefaultSample, Usage: "records verified after the read phase"},
		},
		Action: runDemo,
	}
}

func runDemo(c *cli.Context) error {
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	sizes, sync, err := workloadFlags(c)
	if err != nil {
		return err
	}
	res, err := demo.Run(c.Context, demo.Config{
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
	})
	if err != nil {
		return err
	}
	fmt.Printf("demo: ok, %d values verified\n", res.Verified)
	return nil
}

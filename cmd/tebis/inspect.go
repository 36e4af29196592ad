package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/tools/inspect"
	"github.com/urfave/cli/v2"
)

func inspectCommand() *cli.Command {
	common := []cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print JSON"},
		&cli.BoolFlag{Name: "force-read-only", Usage: "inspect a volume a live server holds (reads may see it mid-change)"},
	}
	dirFlag := &cli.StringFlag{Name: "dir", Required: true, Usage: "the server's data directory (its data_dir)"}
	withDir := func(fs ...cli.Flag) []cli.Flag { return append(append([]cli.Flag{dirFlag}, common...), fs...) }
	return &cli.Command{
		Name:  "inspect",
		Usage: "offline, read-only inspection of a server's data directory",
		Subcommands: []*cli.Command{
			{Name: "summary", Usage: "regions, levels, value logs, segments", Flags: withDir(), Action: inspectAction(0, func(c *cli.Context, in *engine.Inspector, o inspect.Output) error {
				return inspect.Summary(in, o)
			})},
			{Name: "tree", ArgsUsage: "REGION LEVEL", Usage: "a level's B+tree shape", Flags: withDir(), Action: inspectAction(2, func(c *cli.Context, in *engine.Inspector, o inspect.Output) error {
				region, err := strconv.ParseUint(c.Args().Get(0), 10, 64)
				if err != nil {
					return fmt.Errorf("REGION: %w", err)
				}
				level, err := strconv.Atoi(c.Args().Get(1))
				if err != nil {
					return fmt.Errorf("LEVEL: %w", err)
				}
				return inspect.Tree(in, region, level, o)
			})},
			{Name: "node", ArgsUsage: "SEGMENT:OFFSET", Usage: "a decoded node", Flags: withDir(), Action: inspectAction(1, func(c *cli.Context, in *engine.Inspector, o inspect.Output) error {
				p, err := in.ParsePtr(c.Args().Get(0))
				if err != nil {
					return err
				}
				return inspect.Node(in, p, o)
			})},
			{Name: "segment", ArgsUsage: "N", Usage: "a decoded segment header", Flags: withDir(), Action: inspectAction(1, func(c *cli.Context, in *engine.Inspector, o inspect.Output) error {
				n, err := strconv.ParseUint(c.Args().Get(0), 10, 64)
				if err != nil {
					return fmt.Errorf("N: %w", err)
				}
				return inspect.Segment(in, n, o)
			})},
			{Name: "log", ArgsUsage: "REGION", Usage: "a region's log records", Flags: withDir(
				&cli.StringFlag{Name: "from", Usage: "INDEX:OFFSET to start at (default: the log's start)"},
				&cli.IntFlag{Name: "limit", Value: 100, Usage: "records to print (0: all)"},
			), Action: inspectAction(1, func(c *cli.Context, in *engine.Inspector, o inspect.Output) error {
				region, err := strconv.ParseUint(c.Args().Get(0), 10, 64)
				if err != nil {
					return fmt.Errorf("REGION: %w", err)
				}
				var from engine.LogPosition
				if s := c.String("from"); s != "" {
					if _, err := fmt.Sscanf(s, "%d:%d", &from.Index, &from.Offset); err != nil {
						return fmt.Errorf("--from %q: want INDEX:OFFSET", s)
					}
				}
				return inspect.Log(in, region, from, c.Int("limit"), o)
			})},
			{Name: "check", Usage: "verify checksums, order, pointers and segment ownership; exit 1 on problems", Flags: withDir(), Action: inspectAction(0, func(c *cli.Context, in *engine.Inspector, o inspect.Output) error {
				return inspect.Check(in, o)
			})},
			{Name: "diff", ArgsUsage: "DIR1 DIR2 REGION", Usage: "compare a region's content (and level shapes) in two data directories", Flags: common,
				Action: func(c *cli.Context) error {
					if c.NArg() != 3 {
						return fmt.Errorf("usage: tebis inspect diff DIR1 DIR2 REGION")
					}
					region, err := strconv.ParseUint(c.Args().Get(2), 10, 64)
					if err != nil {
						return fmt.Errorf("REGION: %w", err)
					}
					a, err := engine.OpenInspector(vfs.Default, c.Args().Get(0), c.Bool("force-read-only"))
					if err != nil {
						return err
					}
					defer a.Close()
					b, err := engine.OpenInspector(vfs.Default, c.Args().Get(1), c.Bool("force-read-only"))
					if err != nil {
						return err
					}
					defer b.Close()
					return inspect.Diff(a, b, region, inspect.Output{W: os.Stdout, JSON: c.Bool("json")})
				}},
		},
	}
}

func inspectAction(nargs int, fn func(*cli.Context, *engine.Inspector, inspect.Output) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		if c.NArg() != nargs {
			return fmt.Errorf("want %d arguments, got %d", nargs, c.NArg())
		}
		in, err := engine.OpenInspector(vfs.Default, c.String("dir"), c.Bool("force-read-only"))
		if err != nil {
			return err
		}
		defer in.Close()
		return fn(c, in, inspect.Output{W: os.Stdout, JSON: c.Bool("json")})
	}
}

package main

import (
	"fmt"
	"os"

	"github.com/tebis-go/tebis/tools/rdmabench"
	"github.com/urfave/cli/v2"
)

func benchRDMACommands() []*cli.Command {
	return []*cli.Command{{
		Name:  "rdma",
		Usage: "measure the rdma transports and ring protocol against a peer process",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "transports", Value: cli.NewStringSlice("shm", "tcp"), Usage: "transports to measure"},
			&cli.IntSliceFlag{Name: "payloads", Value: cli.NewIntSlice(128, 1024, 65536), Usage: "request payload sizes in bytes (echoed back)"},
			&cli.IntSliceFlag{Name: "outstanding", Value: cli.NewIntSlice(1, 16), Usage: "requests in flight"},
			&cli.DurationFlag{Name: "duration", Value: rdmabench.DefaultDuration, Usage: "measuring time per cell"},
			&cli.Int64Flag{Name: "stream-bytes", Value: 1 << 30, Usage: "bytes WRITten into a peer for the one-sidedness figure (0: skip)"},
			&cli.StringFlag{Name: "json", Usage: "also write the results as JSON to this file"},
		},
		Action: benchRDMA,
	}, {
		Name:   "rdma-peer",
		Usage:  "the peer process of `bench rdma` (started by it)",
		Hidden: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "mode", Required: true},
			&cli.StringFlag{Name: "transport", Required: true},
			&cli.StringFlag{Name: "addr", Required: true},
		},
		Action: func(c *cli.Context) error {
			return rdmabench.ServePeer(c.Context, c.String("mode"), c.String("transport"), c.String("addr"), os.Stdout, rdmabench.StdinClosed())
		},
	}}
}

func benchRDMA(c *cli.Context) error {
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find own binary for the peer process: %w", err)
	}
	res, err := rdmabench.Run(c.Context, rdmabench.Config{
		Transports:  c.StringSlice("transports"),
		Payloads:    c.IntSlice("payloads"),
		Outstanding: c.IntSlice("outstanding"),
		Duration:    c.Duration("duration"),
		StreamBytes: c.Int64("stream-bytes"),
		PeerArgv:    []string{exe, "bench", "rdma-peer"},
	})
	if res != nil {
		writeResult(c, log, res)
	}
	return err
}

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/region/regionmap"
	"github.com/tebis-go/tebis/tools/demo"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/urfave/cli/v2"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "load YCSB-style records, read them back zipfian, verify (in-process, or through a local server)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Value: demo.DefaultDir, Usage: "volume directory (reopened if it exists)"},
			&cli.BoolFlag{Name: "server", Usage: "start a standalone region server process on the volume in --dir and run through the client"},
			&cli.StringFlag{Name: "map", Usage: "run through the client against the servers of this region map file"},
			&cli.StringFlag{Name: "transport", Value: "shm", Usage: "client transport with --server or --map: shm or tcp"},
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
// returns its map entry and a function that stops it (SIGINT, wait).
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
	cmd := exec.Command(exe, "--log-level", "warn", "server", "--data-dir", filepath.Join(abs, "server"),
		"--shm", srv.Shm, "--tcp", srv.TCP, "--sync-mode", c.String("sync-mode"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the demo
	if err := cmd.Start(); err != nil {
		return srv, nil, fmt.Errorf("start server: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	for {
		if conn, err := net.DialTimeout("tcp", tcp, time.Second); err == nil {
			conn.Close()
			break
		}
		select {
		case <-ctx.Done():
			stop()
			return srv, nil, fmt.Errorf("server on %s not listening after 30s", tcp)
		case <-time.After(20 * time.Millisecond):
		}
	}
	fmt.Fprintf(os.Stdout, "demo: started region server (pid %d) on shm %s and tcp %s\n", cmd.Process.Pid, srv.Shm, srv.TCP)
	return srv, stop, nil
}

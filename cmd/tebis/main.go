package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/tebis-go/tebis/tools/ycsb"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tebis:", err)
		os.Exit(exitStatus(err))
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:  "tebis",
		Usage: "a replicated LSM key-value store (Tebis, EuroSys'22)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
		},
		Commands: []*cli.Command{benchCommand(), demoCommand(), serverCommand(), masterCommand(), clusterCommand(), configCommand(), certsCommand(), kvCommand(), inspectCommand(), tortureCommand()},
	}
}

// newLogger returns a console logger on stderr at the --log-level level.
func newLogger(c *cli.Context) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.String("log-level"))
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = zap.NewAtomicLevelAt(level)
	cfg.DisableStacktrace = true
	return cfg.Build()
}

// stderrIsTerminal decides between progress bars and plain progress lines.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

// workloadFlags reads the --kv-sizes and --sync-mode flags shared by the
// workload commands; sync is true for "sync".
func workloadFlags(c *cli.Context) (sizes ycsb.SizeMix, sync bool, err error) {
	sizes, err = ycsb.ParseSizeMix(c.String("kv-sizes"))
	if err != nil {
		return sizes, false, fmt.Errorf("--kv-sizes: %w", err)
	}
	switch c.String("sync-mode") {
	case "sync":
		return sizes, true, nil
	case "async":
		return sizes, false, nil
	}
	return sizes, false, fmt.Errorf("--sync-mode %q: want sync or async", c.String("sync-mode"))
}

// startCPUProfile starts a Go CPU profile into path ("" does nothing);
// the returned function stops it.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

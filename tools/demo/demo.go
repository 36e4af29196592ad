package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/tebis-go/tebis/tools/ycsb"
	"go.uber.org/zap"
)

// Sentinel errors.
var (
	// ErrMismatch reports a value that differs from the one loaded.
	ErrMismatch = errors.New("demo: value mismatch")
	// ErrMissing reports a loaded record that is absent.
	ErrMissing = errors.New("demo: record missing")
	// ErrBadConfig reports an inconsistent Config.
	ErrBadConfig = errors.New("demo: bad config")
)

// Defaults.
const (
	DefaultDir     = "./.run/demo"
	DefaultRecords = 200_000
	DefaultThreads = 4
	DefaultSample  = 1000
	// RegionID is the demo's one region, covering all keys.
	RegionID = 1
)

// Config configures a demo run.
type Config struct {
	Dir          string
	Records      int64
	Threads      int
	Seed         uint64
	Sizes        ycsb.SizeMix
	Sync         bool
	L0Pairs      int
	GrowthFactor int
	// Sample is how many uniformly chosen records are verified after the
	// read phase (every read of the read phase is verified too).
	Sample   int
	Progress progress.Reporter
	Out      io.Writer
	Logger   *zap.Logger
	// Map, if set, runs the demo through the client against the servers
	// it names (over Transport) instead of an in-process volume in Dir.
	Map       regionmap.Source
	Transport string
}

// PhaseStats summarizes one phase.
type PhaseStats struct {
	Ops       int64
	Seconds   float64
	UserBytes int64
	// Latency summarizes each operation kind's latencies ("insert",
	// "read", ...), retries included.
	Latency map[string]Latency
}

// OpsPerSec is the phase's throughput.
func (p PhaseStats) OpsPerSec() float64 { return float64(p.Ops) / p.Seconds }

// MBPerSec is the phase's key+value throughput in MB/s.
func (p PhaseStats) MBPerSec() float64 { return float64(p.UserBytes) / 1e6 / p.Seconds }

// Result is what a demo run measured.
type Result struct {
	Reopened bool // the region existed already
	Load     PhaseStats
	Read     PhaseStats
	Verified int64 // values compared equal (reads plus sample)
}

func (c Config) withDefaults() (Config, error) {
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.Records == 0 {
		c.Records = DefaultRecords
	}
	if c.Threads == 0 {
		c.Threads = DefaultThreads
	}
	if c.Sample == 0 {
		c.Sample = DefaultSample
	}
	if c.Sizes == (ycsb.SizeMix{}) {
		c.Sizes = ycsb.MixSD
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Records < 1 || c.Threads < 1 || c.Sample < 0 {
		return c, fmt.Errorf("%w: records %d, threads %d, sample %d", ErrBadConfig, c.Records, c.Threads, c.Sample)
	}
	return c, c.Sizes.Validate()
}

// store is the slice of the engine the demo uses (see engine.go).
type store interface {
	Put(key, value []byte) error
	// Get returns the value, or found=false for an absent key.
	Get(key []byte) (value []byte, found bool, err error)
	WaitIdle() error
	Close() error
}

// Run executes the demo, printing progress and results to cfg.Out.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var (
		s        store
		reopened bool
	)
	if cfg.Map != nil {
		s, err = openClientStore(ctx, cfg)
		cfg.Dir = "(through the client, " + cfg.Transport + ")"
	} else {
		s, reopened, err = openStore(cfg)
	}
	if err != nil {
		return nil, err
	}
	if reopened {
		fmt.Fprintf(cfg.Out, "demo: reopened volume %s, region %d exists\n", cfg.Dir, RegionID)
	}
	res, err := run(ctx, cfg, s)
	if res != nil {
		res.Reopened = reopened
	}
	if cerr := s.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("close volume: %w", cerr))
	}
	return res, err
}

func run(ctx context.Context, cfg Config, s store) (*Result, error) {
	out := cfg.Out
	fmt.Fprintf(out, "demo: %d records, kv sizes %s, seed %d, %d threads, dir %s\n",
		cfg.Records, cfg.Sizes, cfg.Seed, cfg.Threads, cfg.Dir)
	load, err := newWorkload("load-a", cfg)
	if err != nil {
		return nil, err
	}
	loadGen, err := ycsb.NewGenerator(load, cfg.Seed)
	if err != nil {
		return nil, err
	}
	res := &Result{}
	res.Load, err = runOps(ctx, cfg, loadGen, "load", func(op ycsb.Op) (int, error) {
		return len(op.Key) + len(op.Value), s.Put(op.Key, op.Value)
	})
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "load: %d records in %.2fs: %.0f ops/s, %.1f MB/s\n%s",
		res.Load.Ops, res.Load.Seconds, res.Load.OpsPerSec(), res.Load.MBPerSec(), latencyLines(res.Load.Latency))
	if err := s.WaitIdle(); err != nil {
		return res, fmt.Errorf("wait for compactions: %w", err)
	}

	readW, err := newWorkload("c", cfg)
	if err != nil {
		return nil, err
	}
	readGen, err := ycsb.NewGenerator(readW, cfg.Seed+1)
	if err != nil {
		return nil, err
	}
	var verified int64
	res.Read, err = runOps(ctx, cfg, readGen, "read (zipfian)", func(op ycsb.Op) (int, error) {
		n, err := verify(s, loadGen, op.KeyNum, op.Key)
		return len(op.Key) + n, err
	})
	if err != nil {
		return res, err
	}
	verified += res.Read.Ops
	fmt.Fprintf(out, "read: %d zipfian reads in %.2fs: %.0f ops/s, %.1f MB/s, every value verified\n%s",
		res.Read.Ops, res.Read.Seconds, res.Read.OpsPerSec(), res.Read.MBPerSec(), latencyLines(res.Read.Latency))

	n, err := verifySample(s, loadGen, cfg)
	verified += n
	res.Verified = verified
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "verify: %d uniformly sampled records match\n", n)
	return res, nil
}

func newWorkload(name string, cfg Config) (ycsb.Workload, error) {
	w, err := ycsb.Builtin(name)
	if err != nil {
		return w, err
	}
	w.RecordCount, w.OperationCount, w.Sizes = cfg.Records, cfg.Records, cfg.Sizes
	return w, nil
}

// verify reads record keynum, compares it with what gen's load wrote, and
// returns the value's length.
func verify(s store, gen *ycsb.Generator, keynum int64, key []byte) (int, error) {
	v, found, err := s.Get(key)
	if err != nil {
		return 0, fmt.Errorf("get %q: %w", key, err)
	}
	if !found {
		return 0, fmt.Errorf("%w: record %d (%q)", ErrMissing, keynum, key)
	}
	if want := gen.InsertValue(keynum, len(key)); !bytes.Equal(v, want) {
		return len(v), fmt.Errorf("%w: record %d (%q): %d bytes, want %d", ErrMismatch, keynum, key, len(v), len(want))
	}
	return len(v), nil
}

// verifySample checks cfg.Sample records spread evenly over the key space.
func verifySample(s store, gen *ycsb.Generator, cfg Config) (int64, error) {
	n := min(int64(cfg.Sample), cfg.Records)
	var key []byte
	for i := range n {
		keynum := i * cfg.Records / max(n, 1)
		key = gen.AppendKey(key[:0], keynum)
		if _, err := verify(s, gen, keynum, key); err != nil {
			return i, err
		}
	}
	return n, nil
}

// elapsedSince is time.Since in seconds, never zero.
func elapsedSince(t time.Time) float64 { return max(time.Since(t).Seconds(), 1e-9) }

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/tools/ycsb"
	"go.uber.org/zap"
)

// Result is a whole run: its configuration and every engine's phases.
type Result struct {
	Started        time.Time `json:"started"`
	Seed           uint64    `json:"seed"`
	Sizes          string    `json:"kv_sizes"`
	RecordCount    int64     `json:"recordcount"`
	OperationCount int64     `json:"operationcount"`
	Threads        int       `json:"threads"`
	SyncMode       string    `json:"sync_mode"`
	L0Pairs        int       `json:"l0_pairs"`
	GrowthFactor   int       `json:"growth_factor"`
	SegmentSize    int64     `json:"segment_size,omitempty"`
	Engines        []string  `json:"engines"`
	NumCPU         int       `json:"num_cpu"`
	// ServerProcs and ClientProcs are Config's, for runs of the server
	// engine (0: not set).
	ServerProcs int    `json:"server_procs,omitempty"`
	ClientProcs int    `json:"client_procs,omitempty"`
	GoVersion   string `json:"go_version"`
	// Rounds is how many times every engine ran (Config.Rounds).
	Rounds int `json:"rounds,omitempty"`
	// DiskWriteBps is the sequential write bandwidth of the data
	// directory's device in bytes/s (0 when not measured).
	DiskWriteBps float64 `json:"disk_seq_write_bytes_per_sec"`
	// DiskSyncedWriteBps is the same write with an fdatasync after every
	// DiskSyncChunk bytes (the tebis segment size): the log's pattern.
	DiskSyncedWriteBps float64 `json:"disk_seq_write_synced_bytes_per_sec,omitempty"`
	DiskSyncChunk      int64   `json:"disk_sync_chunk,omitempty"`
	// DiskWriteBpsAfter and DiskSyncedWriteBpsAfter are both measured
	// again after the engines ran (the fractions use the first ones).
	DiskWriteBpsAfter       float64       `json:"disk_seq_write_after_bytes_per_sec,omitempty"`
	DiskSyncedWriteBpsAfter float64       `json:"disk_seq_write_synced_after_bytes_per_sec,omitempty"`
	Phases                  []PhaseResult `json:"phases"`
}

// LoadFraction returns engine's Load A user bytes/s over the disk's
// sequential write bandwidth, or 0 when either is unknown.
func (r *Result) LoadFraction(engine string) float64 {
	return r.loadOver(engine, r.DiskWriteBps)
}

// SyncedLoadFraction is LoadFraction against DiskSyncedWriteBps.
func (r *Result) SyncedLoadFraction(engine string) float64 {
	return r.loadOver(engine, r.DiskSyncedWriteBps)
}

func (r *Result) loadOver(engine string, bps float64) float64 {
	if bps == 0 {
		return 0
	}
	for _, p := range r.Phases {
		if p.Engine == engine && p.Phase == "Load A" {
			return p.UserBytesPerSec() / bps
		}
	}
	return 0
}

// Run executes cfg: the disk bandwidth test, then every phase on every
// engine, one engine at a time. On error it returns what was measured so
// far with the error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	phases, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	mode := "async"
	if cfg.Sync {
		mode = "sync"
	}
	// Procs apply to the server engine only, and ServerProcs only to a
	// server it starts: unused, they are neither set nor recorded.
	if !slices.Contains(cfg.Engines, "server") {
		cfg.ServerProcs, cfg.ClientProcs = 0, 0
	}
	if cfg.ServerMap != nil {
		cfg.ServerProcs = 0
	}
	res := &Result{
		Started: time.Now(), Seed: cfg.Seed, Sizes: cfg.Sizes.String(),
		RecordCount: cfg.RecordCount, OperationCount: cfg.OperationCount,
		Threads: cfg.Threads, SyncMode: mode, L0Pairs: cfg.L0Pairs, GrowthFactor: cfg.GrowthFactor,
		SegmentSize: cfg.SegmentSize, Engines: cfg.Engines, NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(),
		ServerProcs: cfg.ServerProcs, ClientProcs: cfg.ClientProcs,
	}
	parent := cfg.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	work, err := os.MkdirTemp(parent, "tebis-bench-")
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if cfg.Keep {
		log.Info("keeping data directory", zap.String("dir", work))
	} else {
		defer func() { _ = os.RemoveAll(work) }()
	}
	log.Info("bench start", zap.Uint64("seed", cfg.Seed), zap.String("dir", work),
		zap.String("sizes", res.Sizes), zap.Int64("records", cfg.RecordCount),
		zap.Int64("operations", cfg.OperationCount), zap.String("sync", mode))

	if cfg.DiskBWBytes > 0 {
		bw, err := SeqWriteBandwidth(vfs.Default, work, cfg.DiskBWBytes, diskBWChunk)
		if err != nil {
			return res, err
		}
		res.DiskWriteBps = bw
		log.Info("disk sequential write", zap.Float64("MB/s", bw/1e6))
		chunk := cfg.SegmentSize
		if chunk == 0 {
			chunk = engine.DefaultSegmentSize
		}
		bw, err = SyncedSeqWriteBandwidth(vfs.Default, work, cfg.DiskBWBytes, chunk)
		if err != nil {
			return res, err
		}
		res.DiskSyncedWriteBps, res.DiskSyncChunk = bw, chunk
		log.Info("disk sequential write, synced per segment", zap.Float64("MB/s", bw/1e6), zap.Int64("chunk", chunk))
	}
	res.Rounds = max(cfg.Rounds, 1)
	for round := 1; round <= res.Rounds; round++ {
		for _, name := range roundOrder(cfg.Engines, round) {
			dir := roundDir(filepath.Join(work, name), res.Rounds, round)
			pr, err := runEngine(ctx, cfg, name, dir, phases)
			for i := range pr {
				pr[i].Round = round
			}
			res.Phases = append(res.Phases, pr...)
			if !cfg.Keep {
				_ = os.RemoveAll(dir) // free the space before the next engine
			}
			if err != nil {
				return res, err
			}
		}
	}
	if cfg.DiskBWBytes > 0 {
		// Again at the end: a shared or virtual disk's bandwidth drifts
		// during a run; the spread says how far to trust the fractions.
		bw, err := SeqWriteBandwidth(vfs.Default, work, cfg.DiskBWBytes, diskBWChunk)
		if err != nil {
			return res, err
		}
		res.DiskWriteBpsAfter = bw
		if bw, err = SyncedSeqWriteBandwidth(vfs.Default, work, cfg.DiskBWBytes, res.DiskSyncChunk); err != nil {
			return res, err
		}
		res.DiskSyncedWriteBpsAfter = bw
	}
	return res, nil
}

// runEngine opens one engine in dir and runs every phase against it.
func runEngine(ctx context.Context, cfg Config, name, dir string, phases []ycsb.Workload) (_ []PhaseResult, err error) {
	open, err := opener(name)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	fs := NewCountingFS(vfs.Default)
	t, err := open(TargetOptions{
		FS: fs, Dir: dir, Sync: cfg.Sync, L0Pairs: cfg.L0Pairs, GrowthFactor: cfg.GrowthFactor, SegmentSize: cfg.SegmentSize,
		MeanPairSize: meanPairSize(cfg.Sizes), Logger: cfg.Logger,
		ServerArgv: cfg.ServerArgv, ServerMap: cfg.ServerMap, ServerTransport: cfg.ServerTransport,
		ServerTLS: cfg.ServerTLS, ServerProcs: cfg.ServerProcs, ClientProcs: cfg.ClientProcs, ClientSpin: cfg.ClientSpin,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := t.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close %s: %w", name, cerr))
		}
	}()
	env := phaseEnv{target: t, fs: fs, dir: dir, threads: cfg.Threads, sync: cfg.Sync, progress: cfg.Progress,
		rate: cfg.TargetRate, pids: cfg.PIDs}
	var out []PhaseResult
	records := cfg.RecordCount
	for i, w := range phases {
		switch {
		case len(cfg.Workloads) > 0 && w.Load:
			// Explicit workloads keep their counts.
		case len(cfg.Workloads) > 0:
			w.RecordCount = max(records, w.RecordCount)
		case w.Load:
			w.RecordCount = cfg.RecordCount
		default:
			w.RecordCount = records
			w.OperationCount = cfg.OperationCount
		}
		gen, err := ycsb.NewGenerator(w, cfg.Seed+uint64(i))
		if err != nil {
			return out, err
		}
		r, err := runPhase(ctx, env, name, gen)
		if err != nil {
			return out, err
		}
		records = r.Records
		out = append(out, r)
		cfg.Logger.Info("phase done", zap.String("engine", name), zap.String("phase", r.Phase),
			zap.Float64("ops/s", r.OpsPerSec), zap.Float64("idle_wait_s", r.IdleWait))
	}
	return out, nil
}

package bench

import (
	"fmt"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/pki"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/tebis-go/tebis/tools/ycsb"
	"go.uber.org/zap"
)

// Defaults of `tebis bench engine`, sized so that every phase for one size
// mix and both engines takes about a minute on a 2-core machine.
const (
	DefaultRecordCount    = 200_000
	DefaultOperationCount = 100_000
	DefaultThreads        = 4
	DefaultDiskBWBytes    = 256 << 20
	diskBWChunk           = 1 << 20
)

// DefaultEngines are compared when Config.Engines is empty; "server" (the
// engine through a region server and the client) is run on request.
var DefaultEngines = []string{"tebis", "pebble"}

// DefaultPhases are YCSB Load A, then Run A to D.
var DefaultPhases = []string{"load-a", "a", "b", "c", "d"}

// Config describes one benchmark run.
type Config struct {
	// Engines to run, in order; default all registered (tebis first).
	Engines []string
	// Phases are ycsb.Builtin names, run in order against the same data;
	// the first must be a load. Default DefaultPhases.
	Phases []string
	Sizes  ycsb.SizeMix
	// RecordCount records are loaded; every run phase does OperationCount
	// operations.
	RecordCount    int64
	OperationCount int64
	Threads        int
	// Sync selects durable-on-return writes (sync mode) for every engine.
	Sync bool
	// Dir is where the run's scratch directory is made (default
	// os.TempDir()); the scratch directory is removed at the end unless
	// Keep is set.
	Dir  string
	Keep bool
	// L0Pairs and GrowthFactor configure the tebis engine (0: defaults).
	L0Pairs      int
	GrowthFactor int
	// SegmentSize is the tebis engine's segment size in bytes (0: the
	// engine's default, 2 MiB); the in-process engine only.
	SegmentSize int64
	// Seed drives the workload; the same seed gives every engine the same
	// operations.
	Seed uint64
	// DiskBWBytes is the size of the sequential write test; 0 skips it.
	DiskBWBytes int64
	// ServerArgv, ServerMap and ServerTransport configure the "server"
	// engine (see TargetOptions).
	ServerArgv      []string
	ServerMap       regionmap.Source
	ServerTransport string
	// ServerTLS are the "server" engine client's certificate files for
	// servers that require TLS on tcp (none: plaintext).
	ServerTLS pki.Files
	// ServerProcs is GOMAXPROCS of the server the "server" engine starts,
	// and ClientProcs this process's while that engine runs (0: not set;
	// the server inherits this process's environment). Two processes on the same cores
	// with a P per core each run twice as many Ps as there are cores, and
	// the threads of one's idle Ps, looking for work, take the cores the
	// other needs; split, they share the cores the in-process engine has.
	ServerProcs, ClientProcs int
	// ClientSpin is the "server" engine client's reply-poller spin
	// (client.Config.SpinTime; 0: the ring's default).
	ClientSpin time.Duration
	// Workloads, if set, replace Phases: explicit workloads (from YCSB
	// property files), run in order; each keeps its own record and
	// operation counts and sizes.
	Workloads []ycsb.Workload
	// TargetRate paces each phase to about this many operations per
	// second over all threads (0: as fast as possible).
	TargetRate float64
	// PIDs are server processes whose CPU and device I/O each phase adds
	// to its figures (resource accounting for a running cluster).
	PIDs []int
	// Rounds runs the engines this many times (0: once), each round on
	// fresh data, every other round in reverse order (so neither engine
	// always runs first on a host whose speed drifts): with two engines
	// the report gives each round's ratios, their median and range.
	Rounds   int
	Progress progress.Reporter
	Logger   *zap.Logger
}

func (c Config) withDefaults() Config {
	if len(c.Engines) == 0 {
		c.Engines = DefaultEngines
	}
	if len(c.Phases) == 0 {
		c.Phases = DefaultPhases
	}
	if c.Sizes == (ycsb.SizeMix{}) {
		c.Sizes = ycsb.MixSD
	}
	if c.Threads == 0 {
		c.Threads = DefaultThreads
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// checkProcs rejects a negative ServerProcs or ClientProcs.
func (c Config) checkProcs() error {
	if c.ServerProcs < 0 || c.ClientProcs < 0 {
		return fmt.Errorf("%w: server procs %d, client procs %d: want 0 (not set) or more", ErrBadConfig, c.ServerProcs, c.ClientProcs)
	}
	return nil
}

// validate checks a config with defaults applied and resolves its phases.
func (c Config) validate() ([]ycsb.Workload, error) {
	if err := c.checkProcs(); err != nil {
		return nil, err
	}
	if c.Rounds < 0 || c.Rounds > MaxRounds {
		return nil, fmt.Errorf("%w: %d rounds (0 to %d)", ErrBadConfig, c.Rounds, MaxRounds)
	}
	if c.RecordCount < 1 || c.OperationCount < 0 || c.Threads < 1 {
		return nil, fmt.Errorf("%w: recordcount %d, operationcount %d, threads %d", ErrBadConfig, c.RecordCount, c.OperationCount, c.Threads)
	}
	if err := c.Sizes.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	for _, e := range c.Engines {
		if _, err := opener(e); err != nil {
			return nil, err
		}
		if e == "server" && c.SegmentSize != 0 {
			return nil, fmt.Errorf("%w: a segment size applies to the in-process engine only", ErrBadConfig)
		}
	}
	if len(c.Workloads) > 0 {
		for _, w := range c.Workloads {
			if err := w.Validate(); err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
			}
		}
		return c.Workloads, nil
	}
	phases := make([]ycsb.Workload, len(c.Phases))
	for i, name := range c.Phases {
		w, err := ycsb.Builtin(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadConfig, err)
		}
		if i == 0 && !w.Load {
			return nil, fmt.Errorf("%w: first phase %q is not a load", ErrBadConfig, name)
		}
		w.Sizes = c.Sizes
		phases[i] = w
	}
	return phases, nil
}

// meanPairSize is the mean key+value size of a mix.
func meanPairSize(m ycsb.SizeMix) int {
	if m.Fixed > 0 || m.Value > 0 {
		return m.PairSize(0)
	}
	return (m.Small*ycsb.SmallPair + m.Medium*ycsb.MediumPair + m.Large*ycsb.LargePair) / 100
}

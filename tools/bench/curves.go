package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
)

// CurvesConfig configures `tebis bench curves`: 3-way Send-Index through 3
// server processes (RunReplication), one parameter varied at a time
// around a base point.
type CurvesConfig struct {
	// Repl is the servers' and workload's configuration; its setups,
	// record count, threads and regions per server are replaced by the
	// points'.
	Repl ReplConfig
	// Records, Regions (regions per server) and Threads are the values
	// of each curve, in order; an empty list draws no curve.
	Records []int64
	Regions []int
	Threads []int
	// BaseRecords, BaseRegions and BaseThreads hold the other
	// parameters while one varies (default: each list's first value;
	// 16 threads if Threads is empty).
	BaseRecords int64
	BaseRegions int
	BaseThreads int
	// Out is the directory the JSON (curves.json) and the plots
	// (curve-records.png, curve-regions.png, curve-threads.png) go to.
	Out string
}

// CurvesSetup is the configuration every point runs.
var CurvesSetup = ReplSetup{Name: "send-index-3", Mode: "send-index", Factor: 3}

// CurvePoint is one measured point.
type CurvePoint struct {
	Records          int64 `json:"records"`
	RegionsPerServer int   `json:"regions_per_server"`
	Threads          int   `json:"threads"`
	// Run is the point's replication run: its phases, CPU split and
	// every server's peak memory.
	Run ReplRun `json:"run"`
	// PeakRSSPerServer is the mean of the servers' peak RSS and
	// PeakRSSPerRegion their sum over the map's regions (each region
	// with all its replicas), in bytes; both include what a server holds
	// whatever its regions (runtime, buffers of the transport).
	PeakRSSPerServer uint64 `json:"peak_rss_per_server_bytes"`
	PeakRSSPerRegion uint64 `json:"peak_rss_per_region_bytes"`
}

// Curve is one parameter's points, in the order of its values.
type Curve struct {
	Parameter string  `json:"parameter"` // "records", "regions" (per server) or "threads"
	Values    []int64 `json:"values"`
	Points    []int   `json:"points"` // indices into CurvesResult.Points
}

// CurvesResult is a curves run's results.
type CurvesResult struct {
	Started     time.Time `json:"started"`
	Seed        uint64    `json:"seed"`
	Sizes       string    `json:"kv_sizes"`
	Ops         int64     `json:"operationcount"`
	L0Pairs     int       `json:"l0_pairs"`
	Growth      int       `json:"growth_factor"`
	Setup       ReplSetup `json:"setup"`
	BaseRecords int64     `json:"base_records"`
	BaseRegions int       `json:"base_regions_per_server"`
	BaseThreads int       `json:"base_threads"`
	// ServerProcs and ClientProcs are the replication bench's: each
	// server's GOMAXPROCS and this process's (0: not set).
	ServerProcs int          `json:"server_procs,omitempty"`
	ClientProcs int          `json:"client_procs,omitempty"`
	Points      []CurvePoint `json:"points"`
	Curves      []Curve      `json:"curves"`
}

type curveKey struct {
	records int64
	regions int
	threads int
}

// RunCurves measures every point of every curve (a point shared by
// curves, such as the base point, once), each on fresh servers, then
// writes curves.json and one PNG per curve into cfg.Out. If a point
// fails, it writes and returns the curves finished before it, with the
// error.
func RunCurves(ctx context.Context, cfg CurvesConfig) (*CurvesResult, error) {
	if cfg.Out == "" {
		return nil, fmt.Errorf("%w: curves need an output directory", ErrBadConfig)
	}
	if len(cfg.Records)+len(cfg.Regions)+len(cfg.Threads) == 0 {
		return nil, fmt.Errorf("%w: no curve to draw", ErrBadConfig)
	}
	if cfg.BaseRecords == 0 {
		cfg.BaseRecords = cfg.Repl.Bench.RecordCount
		if len(cfg.Records) > 0 {
			cfg.BaseRecords = cfg.Records[0]
		}
	}
	if cfg.BaseRegions == 0 {
		cfg.BaseRegions = 1
		if len(cfg.Regions) > 0 {
			cfg.BaseRegions = cfg.Regions[0]
		}
	}
	if cfg.BaseThreads == 0 {
		cfg.BaseThreads = DefaultThreads
		if len(cfg.Threads) > 0 {
			cfg.BaseThreads = cfg.Threads[0]
		}
	}
	for _, v := range cfg.Records {
		if v < 1 {
			return nil, fmt.Errorf("%w: records %d", ErrBadConfig, v)
		}
	}
	for _, v := range append(append([]int{cfg.BaseRegions, cfg.BaseThreads}, cfg.Regions...), cfg.Threads...) {
		if v < 1 {
			return nil, fmt.Errorf("%w: regions per server and threads must be at least 1", ErrBadConfig)
		}
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("curves output: %w", err)
	}
	b := cfg.Repl.Bench.withDefaults()
	res := &CurvesResult{Started: time.Now(), Seed: b.Seed, Sizes: b.Sizes.String(), Ops: b.OperationCount, L0Pairs: b.L0Pairs,
		Growth: b.GrowthFactor, Setup: CurvesSetup, BaseRecords: cfg.BaseRecords, BaseRegions: cfg.BaseRegions, BaseThreads: cfg.BaseThreads,
		ServerProcs: b.ServerProcs, ClientProcs: b.ClientProcs}
	base := curveKey{cfg.BaseRecords, cfg.BaseRegions, cfg.BaseThreads}
	var curves []Curve
	var keys [][]curveKey
	add := func(name string, n int, key func(i int) (int64, curveKey)) {
		if n == 0 {
			return
		}
		c := Curve{Parameter: name}
		var ks []curveKey
		for i := range n {
			v, k := key(i)
			c.Values = append(c.Values, v)
			ks = append(ks, k)
		}
		curves, keys = append(curves, c), append(keys, ks)
	}
	add("records", len(cfg.Records), func(i int) (int64, curveKey) {
		k := base
		k.records = cfg.Records[i]
		return k.records, k
	})
	add("regions", len(cfg.Regions), func(i int) (int64, curveKey) {
		k := base
		k.regions = cfg.Regions[i]
		return int64(k.regions), k
	})
	add("threads", len(cfg.Threads), func(i int) (int64, curveKey) {
		k := base
		k.threads = cfg.Threads[i]
		return int64(k.threads), k
	})
	done := map[curveKey]int{}
	for ci, ks := range keys {
		for _, k := range ks {
			idx, ok := done[k]
			if !ok {
				b.Logger.Info("curve point", zap.Int64("records", k.records), zap.Int("regions_per_server", k.regions), zap.Int("threads", k.threads))
				p, err := runCurvePoint(ctx, cfg.Repl, k)
				if err != nil {
					// The curves finished so far are written all the same.
					res.Curves = curves[:ci]
					err = fmt.Errorf("point %d records, %d regions per server, %d threads: %w", k.records, k.regions, k.threads, err)
					return res, errors.Join(err, res.write(cfg.Out))
				}
				idx = len(res.Points)
				res.Points = append(res.Points, *p)
				done[k] = idx
			}
			curves[ci].Points = append(curves[ci].Points, idx)
		}
		res.Curves = curves[:ci+1]
	}
	return res, res.write(cfg.Out)
}

// write writes curves.json and the plots into dir.
func (r *CurvesResult) write(dir string) error {
	if err := r.WriteJSONFile(filepath.Join(dir, "curves.json")); err != nil {
		return err
	}
	return r.PlotCurves(dir)
}

// PlotCurves writes curve-PARAMETER.png into dir for every curve.
func (r *CurvesResult) PlotCurves(dir string) error {
	for _, c := range r.Curves {
		if err := r.PlotCurve(c, filepath.Join(dir, "curve-"+c.Parameter+".png")); err != nil {
			return err
		}
	}
	return nil
}

func runCurvePoint(ctx context.Context, rc ReplConfig, k curveKey) (*CurvePoint, error) {
	rc.Setups = []ReplSetup{CurvesSetup}
	rc.RegionsPerServer = k.regions
	rc.Bench.RecordCount = k.records
	rc.Bench.Threads = k.threads
	r, err := RunReplication(ctx, rc)
	if err != nil {
		return nil, err
	}
	if len(r.Runs) != 1 {
		return nil, fmt.Errorf("%w: %d runs for one setup", ErrBadConfig, len(r.Runs))
	}
	run := r.Runs[0]
	p := &CurvePoint{Records: k.records, RegionsPerServer: k.regions, Threads: k.threads, Run: run}
	if n := len(run.Memory); n > 0 {
		p.PeakRSSPerServer = run.PeakRSSSum / uint64(n)
	}
	if run.Regions > 0 {
		p.PeakRSSPerRegion = run.PeakRSSSum / uint64(run.Regions)
	}
	return p, nil
}

// phase is the point's phase of that name, or nil.
func (p *CurvePoint) phase(name string) *PhaseResult {
	for i := range p.Run.Phases {
		if p.Run.Phases[i].Phase == name {
			return &p.Run.Phases[i]
		}
	}
	return nil
}

// phaseNames are the phases the points ran, in order of first appearance.
func (r *CurvesResult) phaseNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, p := range r.Points {
		for _, ph := range p.Run.Phases {
			if !seen[ph.Phase] {
				seen[ph.Phase] = true
				names = append(names, ph.Phase)
			}
		}
	}
	return names
}

// WriteTable prints every curve's points and the targets' ratios.
func (r *CurvesResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "curves: %s, %s, %d ops per run phase, L0 %d pairs, growth %d, seed %d; base point %d records, %d regions per server, %d threads; server procs %s, client procs %s\n",
		r.Setup.Name, r.Sizes, r.Ops, r.L0Pairs, r.Growth, r.Seed, r.BaseRecords, r.BaseRegions, r.BaseThreads, procs(r.ServerProcs), procs(r.ClientProcs))
	for _, c := range r.Curves {
		fmt.Fprintf(w, "\n%s:\n", c.Parameter)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "records\tregions/server\tthreads\tphase\tops/s\tserver CPU us/op\tI/O amp (device)\tI/O amp (engine)\tpeak RSS MiB per server\tper region\t")
		for _, i := range c.Points {
			p := r.Points[i]
			for _, ph := range p.Run.Phases {
				fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%.0f\t%.1f\t%.2f\t%.2f\t%.0f\t%.1f\t\n", p.Records, p.RegionsPerServer, p.Threads, ph.Phase,
					ph.OpsPerSec, serverCPUPerOp(ph), ph.IOAmp, ph.EngineIOAmp, mib(p.PeakRSSPerServer), mib(p.PeakRSSPerRegion))
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var inMemory []string
	for _, p := range r.Points {
		if ph := p.phase("Load A"); ph != nil && ph.EngineIO.Written == 0 {
			inMemory = append(inMemory, fmt.Sprintf("%d records over %d regions", p.Records, p.Run.Regions))
		}
	}
	if len(inMemory) > 0 {
		fmt.Fprintf(w, "\nLoad A wrote nothing to the servers' volumes at %s: every region's data fit in its first log segment and L0 (async log), so these points measured no I/O\n",
			strings.Join(inMemory, ", "))
	}
	fmt.Fprintln(w, "\ntargets (Load A throughput, same run):")
	for _, t := range []struct {
		param, what string
		want        float64
	}{
		{"records", "10M records over 1M", 0.7},
		{"regions", "96 regions per server over 3", 0.8},
	} {
		ratio, from, to, ok := r.loadRatio(t.param)
		if !ok {
			fmt.Fprintf(w, "  %s: not measured (no %s curve with Load A at two values)\n", t.what, t.param)
			continue
		}
		fmt.Fprintf(w, "  %s at %d over %d: %.2fx (target for %s: >= %.1fx)\n", t.param, to, from, ratio, t.what, t.want)
	}
	return nil
}

// loadRatio is the Load A throughput at the curve's last value over its
// first.
func (r *CurvesResult) loadRatio(param string) (ratio float64, from, to int64, ok bool) {
	for _, c := range r.Curves {
		if c.Parameter != param || len(c.Points) < 2 {
			continue
		}
		a, b := r.Points[c.Points[0]].phase("Load A"), r.Points[c.Points[len(c.Points)-1]].phase("Load A")
		if a == nil || b == nil || a.OpsPerSec == 0 {
			return 0, 0, 0, false
		}
		return b.OpsPerSec / a.OpsPerSec, c.Values[0], c.Values[len(c.Values)-1], true
	}
	return 0, 0, 0, false
}

// WriteJSONFile writes the result as indented JSON.
func (r *CurvesResult) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// LoadCurves reads a curves.json written by RunCurves.
func LoadCurves(path string) (*CurvesResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r CurvesResult
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, c := range r.Curves {
		if len(c.Points) != len(c.Values) {
			return nil, fmt.Errorf("%w: %s: curve %s has %d values and %d points", ErrBadConfig, path, c.Parameter, len(c.Values), len(c.Points))
		}
		for _, i := range c.Points {
			if i < 0 || i >= len(r.Points) {
				return nil, fmt.Errorf("%w: %s: curve %s names point %d of %d", ErrBadConfig, path, c.Parameter, i, len(r.Points))
			}
		}
	}
	return &r, nil
}

// shortCount writes n as 100k, 3M, 96.
func shortCount(n int64) string {
	switch {
	case n >= 1e6 && n%1e5 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e6), ".0") + "M"
	case n >= 1e3 && n%100 == 0:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/1e3), ".0") + "k"
	}
	return fmt.Sprint(n)
}

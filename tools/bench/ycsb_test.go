package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/proctest"
	"github.com/tebis-go/tebis/tools/ycsb"
	"gonum.org/v1/plot/vg"
)

// tinyYCSB is workload A from the YCSB project's file, small: a load and a
// run phase.
func tinyYCSB(t *testing.T) []ycsb.Workload {
	w, err := ycsb.Builtin("a")
	if err != nil {
		t.Fatal(err)
	}
	w.RecordCount, w.OperationCount, w.Sizes = 2000, 3000, ycsb.MixSD
	load := w
	load.Load, load.Name = true, "Load tiny"
	w.Name = "Run tiny"
	return []ycsb.Workload{load, w}
}

func runTiny(t *testing.T, cfg Config) *Result {
	t.Helper()
	ws := tinyYCSB(t)
	cfg.Workloads, cfg.Sizes, cfg.RecordCount, cfg.OperationCount = ws, ws[0].Sizes, ws[0].RecordCount, ws[0].OperationCount
	cfg.Threads, cfg.Sync, cfg.Dir, cfg.Seed = 4, true, t.TempDir(), 7
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 2 || res.Phases[0].Ops != 2000 || res.Phases[1].Ops != 3000 {
		t.Fatalf("phases %+v", res.Phases)
	}
	run := res.Phases[1]
	if run.PerOp["read"].Count+run.PerOp["update"].Count != 3000 || run.PerOp["read"].P9999 < run.PerOp["read"].P50 {
		t.Fatalf("run phase per op %+v", run.PerOp)
	}
	var buf bytes.Buffer
	if err := res.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(rows) != 1+2+3 { // header, load all+insert, run all+read+update
		t.Fatalf("csv: %d rows, %v", len(rows), err)
	}
	buf.Reset()
	if err := res.WriteYCSB(&buf); err != nil || !bytes.Contains(buf.Bytes(), []byte("p99.99")) {
		t.Fatalf("text: %v %s", err, buf.Bytes())
	}
	return res
}

func TestYCSBInProcess(t *testing.T) {
	for _, e := range []string{"tebis", "pebble"} {
		t.Run(e, func(t *testing.T) {
			// Procs are the server engine's: neither set nor recorded here.
			res := runTiny(t, Config{Engines: []string{e}, ServerProcs: 1, ClientProcs: 1})
			if res.ServerProcs != 0 || res.ClientProcs != 0 {
				t.Fatalf("procs recorded for %s: server %d, client %d", e, res.ServerProcs, res.ClientProcs)
			}
			if e == "tebis" {
				checkEngineCounters(t, res)
			}
		})
	}
}

func TestYCSBServer(t *testing.T) {
	bin := proctest.Binary(t)
	res := runTiny(t, Config{Engines: []string{"server"}, ServerArgv: []string{bin, "--log-level", "warn", "server"}})
	for _, p := range res.Phases {
		if p.ServerCPUSeconds <= 0 || p.NetBytes == 0 || p.NetAmp <= 1 || p.Device.Total() == 0 {
			t.Fatalf("%s: server cpu %v, net %d (amp %.2f), device %d", p.Phase, p.ServerCPUSeconds, p.NetBytes, p.NetAmp, p.Device.Total())
		}
	}
	checkEngineCounters(t, res)
}

// checkEngineCounters: every phase reports its engine's counters (the
// servers' summed, for the server engine), and a sync-mode load of n puts
// from k goroutines counted at least n/k fdatasyncs: one covers at most
// one put of each goroutine, whose next put is appended after it returned.
func checkEngineCounters(t *testing.T, res *Result) {
	t.Helper()
	for _, p := range res.Phases {
		if p.Breakdown["log_bytes_written"] <= 0 {
			t.Fatalf("%s: engine counters %v", p.Phase, p.Breakdown)
		}
	}
	load := res.Phases[0]
	if s := load.Breakdown["syncs"]; s < float64(load.Ops/int64(res.Threads)) {
		t.Fatalf("%s: %v syncs for %d synced puts from %d goroutines", load.Phase, s, load.Ops, res.Threads)
	}
}

// TestYCSBCluster: a running server given by its map, its PID accounted.
func TestYCSBCluster(t *testing.T) {
	dir := t.TempDir()
	tcp := proctest.FreePort(t)
	p := proctest.Start(t, "--log-level", "warn", "server", "--data-dir", filepath.Join(dir, "d"), "--tcp", tcp, "--shm", filepath.Join(dir, "s"))
	proctest.WaitTCP(t, p, tcp)
	m := regionmap.Single(regionmap.Server{Name: "rs1", TCP: tcp, Shm: filepath.Join(dir, "s")})
	procs := runtime.GOMAXPROCS(0)
	res := runTiny(t, Config{Engines: []string{"server"}, ServerMap: regionmap.Static{M: m}, ServerTransport: "tcp", PIDs: []int{p.PID()},
		ServerProcs: 3, ClientProcs: procs + 1})
	if res.Phases[0].ServerCPUSeconds <= 0 {
		t.Fatalf("cluster server CPU not accounted: %+v", res.Phases[0])
	}
	// No server started: no server procs set or recorded; this
	// process's, set while the engine ran, are back.
	if res.ServerProcs != 0 || res.ClientProcs != procs+1 || runtime.GOMAXPROCS(0) != procs {
		t.Fatalf("server procs %d, client procs %d recorded, GOMAXPROCS %d after (want 0, %d, %d)", res.ServerProcs, res.ClientProcs, runtime.GOMAXPROCS(0), procs+1, procs)
	}
}

// TestTargetRate: a paced phase takes about ops/rate.
func TestTargetRate(t *testing.T) {
	start := time.Now()
	res := runTiny(t, Config{Engines: []string{"tebis"}, TargetRate: 10000})
	// 5000 operations at 10 000/s: at least 0.5 s in all.
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Fatalf("paced run took %v", d)
	}
	if r := res.Phases[1].OpsPerSec; r > 11000 {
		t.Fatalf("run phase at %.0f ops/s, target 10000", r)
	}
}

// TestPlot: JSON results in, a PNG out.
func TestPlot(t *testing.T) {
	res := runTiny(t, Config{Engines: []string{"tebis"}})
	dir := t.TempDir()
	a, b := filepath.Join(dir, "one.json"), filepath.Join(dir, "two.json")
	if err := res.WriteJSONFile(a); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteJSONFile(b); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "fig.png")
	if err := Plot([]string{a, b}, out, 6*vg.Inch, 6*vg.Inch); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil || cfg.Width < 400 {
		t.Fatalf("png %+v %v", cfg, err)
	}
	if err := Plot([]string{filepath.Join(dir, "missing.json")}, out, vg.Inch, vg.Inch); err == nil {
		t.Fatal("plotting a missing file succeeded")
	}
}

package bench

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
)

func replPhase(name string, ops, opsPerSec, cpuSeconds float64, eng ioByKind, dev IOBytes) PhaseResult {
	return PhaseResult{Phase: name, Ops: int64(ops), OpsPerSec: opsPerSec, ServerCPUSeconds: cpuSeconds,
		EngineIOByKind: eng, EngineIO: eng.total(), Device: dev}
}

func TestCeilings(t *testing.T) {
	// Build-Index, 3 replicas: 300 log bytes written, 300 index bytes
	// written, 240 merge bytes read (80 per replica).
	b := replPhase("Load A", 1000, 50, 2e-2, ioByKind{
		"log":        {Written: 300},
		"compaction": {Read: 240, Written: 300},
	}, IOBytes{Read: 100, Written: 600})
	n := replPhase("Load A", 1000, 80, 1e-2, nil, IOBytes{})
	c := ceilings(b, &n, 3)
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s ceiling %v, want %v", what, got, want)
		}
	}
	near("cpu", c.cpu, 2.0)
	// The backups' 160 merge bytes are saved; log and index writes stay.
	near("engine", c.engine, 840.0/680)
	// At most the 100 device bytes read can be saved.
	near("device", c.device, 700.0/600)

	if c := ceilings(b, nil, 3); c.cpu != 0 || c.engine == 0 {
		t.Errorf("without No-Replication: %+v, want only the I/O ceilings", c)
	}
	// With the merge reads negligible, nothing beyond 1x is possible.
	b.EngineIOByKind = ioByKind{"log": {Written: 300}, "compaction": {Written: 300}}
	b.EngineIO = b.EngineIOByKind.total()
	if c := ceilings(b, &n, 3); c.engine != 1 || c.device != 1 {
		t.Errorf("no merge reads: %+v, want I/O ceilings of 1", c)
	}
}

func TestWriteCeilings(t *testing.T) {
	eng := ioByKind{"log": {Written: 300}, "compaction": {Read: 240, Written: 300}}
	r := &ReplResult{Runs: []ReplRun{
		{Setup: ReplSetup{Name: "no-rep", Factor: 1}, Phases: []PhaseResult{replPhase("Load A", 1000, 80, 1e-2, nil, IOBytes{})}},
		{Setup: ReplSetup{Name: "build-index-3", Mode: "build-index", Factor: 3},
			Phases: []PhaseResult{replPhase("Load A", 1000, 50, 2e-2, eng, IOBytes{Read: 100, Written: 600})}},
	}}
	var buf bytes.Buffer
	if err := r.writeCeilings(&buf); err != nil {
		t.Fatal(err)
	}
	want := "3 Load A 2.00 1.17 1.24"
	for _, line := range strings.Split(buf.String(), "\n") {
		if strings.Join(strings.Fields(line), " ") == want {
			return
		}
	}
	t.Errorf("ceilings table lacks the row %q:\n%s", want, buf.String())
}

// TestWriteCeilingsMarksGC: a Build-Index phase in which value-log GC ran
// gets its I/O ceilings marked and the GC bytes named.
func TestWriteCeilingsMarksGC(t *testing.T) {
	eng := ioByKind{"log": {Written: 300}, "compaction": {Read: 240, Written: 300}, "gc": {Read: 2e6}}
	r := &ReplResult{Runs: []ReplRun{
		{Setup: ReplSetup{Name: "build-index-2", Mode: "build-index", Factor: 2},
			Phases: []PhaseResult{replPhase("Run A", 1000, 50, 2e-2, eng, IOBytes{Read: 100, Written: 600})}},
	}}
	var buf bytes.Buffer
	if err := r.writeCeilings(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "2-way Run A: 2 MB of GC reads") || strings.Count(out, "*") != 3 {
		t.Errorf("GC not marked:\n%s", out)
	}
	if strings.Contains(out, "2-way Load A") {
		t.Errorf("a phase without GC marked:\n%s", out)
	}
}

// TestWriteTableBuildIndexRL: Send-Index is compared with Build-IndexRL
// in a table of its own, and every setup's memory is printed.
func TestWriteTableBuildIndexRL(t *testing.T) {
	eng := ioByKind{"log": {Written: 300}, "compaction": {Read: 240, Written: 300}}
	si := replPhase("Load A", 1000, 66, 1e-2, eng, IOBytes{Written: 300})
	si.ServerPeakRSS = []uint64{100 << 20, 100 << 20, 100 << 20}
	si.IOAmp, si.EngineIOAmp, si.NetAmp = 1, 2, 1
	rl := replPhase("Load A", 1000, 50, 2e-2, eng, IOBytes{Written: 900})
	rl.IOAmp, rl.EngineIOAmp, rl.NetAmp = 3, 2, 1
	r := &ReplResult{Runs: []ReplRun{
		{Setup: ReplSetup{Name: "send-index-3", Mode: "send-index", Factor: 3}, Phases: []PhaseResult{si}, L0Pairs: 96, Regions: 3,
			Memory: []ServerMemory{{Name: "rs1", PeakRSS: 100 << 20}}, PeakRSSSum: 100 << 20},
		{Setup: ReplSetup{Name: "build-index-rl-3", Mode: "build-index", Factor: 3, SharedL0: true}, Phases: []PhaseResult{rl}, L0Pairs: 32, Regions: 3,
			Memory: []ServerMemory{{Name: "rs1", PeakRSS: 150 << 20, CgroupPeak: 300 << 20}}, PeakRSSSum: 150 << 20},
	}}
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Contains(out, "Send-Index vs Build-Index (same run)") {
		t.Errorf("a Build-Index table without a Build-Index run:\n%s", out)
	}
	rows := tableRows(out)
	for _, want := range []string{
		"3 Load A 1.32 2.00 3.00 1.00 1.00 1.50", // throughput, CPU, device I/O, engine I/O, net, memory
		"build-index-rl-3 32 3 rs1 150 150 rs1 300",
		"send-index-3 96 3 rs1 100 100 -",
		"send-index-3 Load A 66 10.0 -10.0 1.00 2.00 1.00 0 0 0.0 300",
	} {
		if !rows[want] {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestReplServerSpec: every server of a setup gets the setup's L0 and,
// with ServerProcs, GOMAXPROCS of its own; No-Replication's lone
// primaries acknowledge from memory.
func TestReplServerSpec(t *testing.T) {
	cfg := ReplConfig{Binary: "tebis", SegmentSize: "2MiB", Transport: "shm", ServerArgs: []string{"--spin-time=1us"}}
	e := regionmap.Server{Name: "rs2", Shm: "s2", TCP: "127.0.0.1:2"}
	for _, procs := range []int{0, 1} {
		b := Config{L0Pairs: 96 << 10, GrowthFactor: 4, ServerProcs: procs}
		for _, setup := range []ReplSetup{{Name: "no-rep", Factor: 1}, {Name: "build-index-rl-3", Mode: "build-index", Factor: 3, SharedL0: true}} {
			spec := replServerSpec(cfg, b, setup, e, "d", "m.yaml", "p")
			args := strings.Join(spec.Argv, " ")
			wantL0 := fmt.Sprintf("--l0-pairs %d", setup.l0Pairs(b.L0Pairs))
			if !strings.Contains(args, wantL0) || !strings.HasSuffix(args, "--spin-time=1us") || strings.Contains(args, "--unsafe-lone-ack") != (setup.Factor == 1) {
				t.Errorf("%s: argv %q", setup.Name, args)
			}
			procsEnv := slices.DeleteFunc(slices.Clone(spec.Env), func(kv string) bool { return !strings.HasPrefix(kv, "GOMAXPROCS=") })
			switch {
			case procs == 0 && spec.Env != nil:
				t.Errorf("%s, procs 0: env set (%d vars), want this process's", setup.Name, len(spec.Env))
			case procs > 0 && !slices.Equal(procsEnv, []string{fmt.Sprintf("GOMAXPROCS=%d", procs)}):
				t.Errorf("%s, procs %d: GOMAXPROCS in env %q", setup.Name, procs, procsEnv)
			}
		}
	}
}

// roundPhase is a Load A of 1000 operations whose amplifications are all
// 1, at opsPerSec with the servers' cpuSeconds: the rounds tests' runs
// differ in these two only.
func roundPhase(opsPerSec, cpuSeconds float64) PhaseResult {
	eng := ioByKind{"log": {Written: 300}, "compaction": {Read: 240, Written: 300}}
	p := replPhase("Load A", 1000, opsPerSec, cpuSeconds, eng, IOBytes{Written: 300})
	p.IOAmp, p.EngineIOAmp, p.NetAmp = 1, 1, 1
	return p
}

// TestRoundOrder: odd rounds run the setups as given, even ones reversed.
func TestRoundOrder(t *testing.T) {
	setups := []ReplSetup{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	names := func(s []ReplSetup) string {
		var n []string
		for _, x := range s {
			n = append(n, x.Name)
		}
		return strings.Join(n, "")
	}
	for round, want := range map[int]string{1: "abc", 2: "cba", 3: "abc"} {
		if got := names(roundOrder(setups, round)); got != want {
			t.Errorf("round %d: %s, want %s", round, got, want)
		}
	}
	if names(setups) != "abc" {
		t.Errorf("roundOrder changed its argument: %s", names(setups))
	}
}

// TestWriteRatiosRounds: each ratio is taken within its round (round 2's
// Send-Index over round 2's Build-Index, not round 1's), the CPU gain is
// given as a share of the same round's ceiling, and the median and range
// over the rounds follow.
func TestWriteRatiosRounds(t *testing.T) {
	phase := roundPhase
	var runs []ReplRun
	// Per round: No-Replication, Build-Index, Send-Index server CPU
	// seconds for 1000 ops and throughputs. Ceiling 2x in every round;
	// Send-Index's CPU gains 1.5x (50 % of the ceiling's gain), 1.25x
	// (25 %) and 2x (100 %); throughput 1.2x, 0.8x, 1.5x.
	for i, c := range []struct{ nr, bi, si, biOps, siOps float64 }{
		{10, 20, 20.0 / 1.5, 100, 120},
		{5, 10, 8, 200, 160},
		{10, 20, 10, 100, 150},
	} {
		round := i + 1
		runs = append(runs,
			ReplRun{Round: round, Setup: ReplSetup{Name: "no-rep", Factor: 1}, Phases: []PhaseResult{phase(300, c.nr/1e3)}},
			ReplRun{Round: round, Setup: ReplSetup{Name: "build-index-3", Mode: "build-index", Factor: 3}, Phases: []PhaseResult{phase(c.biOps, c.bi/1e3)}, PeakRSSSum: 200},
			ReplRun{Round: round, Setup: ReplSetup{Name: "send-index-3", Mode: "send-index", Factor: 3}, Phases: []PhaseResult{phase(c.siOps, c.si/1e3)}, PeakRSSSum: 100})
	}
	r := &ReplResult{Rounds: 3, Runs: runs}
	var buf bytes.Buffer
	if err := r.writeRatios(&buf, "SI vs BI", false); err != nil {
		t.Fatal(err)
	}
	rows := tableRows(buf.String())
	for _, want := range []string{
		"3 Load A 1 1.20 1.50 1.00 1.00 1.00 2.00 50",
		"3 Load A 2 0.80 1.25 1.00 1.00 1.00 2.00 25",
		"3 Load A 3 1.50 2.00 1.00 1.00 1.00 2.00 100",
		"3 Load A median 1.20 1.50 1.00 1.00 1.00 2.00 50",
		"3 Load A range 0.80..1.50 1.25..2.00 1.00..1.00 1.00..1.00 1.00..1.00 2.00..2.00 25..100",
	} {
		if !rows[want] {
			t.Errorf("ratios lack %q:\n%s", want, buf.String())
		}
	}
	// Without No-Replication the share is not measured.
	r.Runs = slices.DeleteFunc(slices.Clone(runs), func(run ReplRun) bool { return run.Setup.Factor == 1 })
	buf.Reset()
	if err := r.writeRatios(&buf, "SI vs BI", false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(strings.Fields(buf.String()), " "), "3 Load A 1 1.20 1.50 1.00 1.00 1.00 2.00 - ") {
		t.Errorf("a share without No-Replication:\n%s", buf.String())
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestWriteTableRounds: with runs of two rounds every table says which
// round a row is (the runs, memory and CPU split tables first, the ratio
// tables after the phase), a round without the pair compared is left out
// of that table without renumbering the others, the Build-IndexRL table
// has no ceiling share, and a ceiling of 1x or less shows as n/a.
func TestWriteTableRounds(t *testing.T) {
	phase := roundPhase
	run := func(round int, setup ReplSetup, opsPerSec, cpuSeconds float64) ReplRun {
		return ReplRun{Round: round, Setup: setup, Phases: []PhaseResult{phase(opsPerSec, cpuSeconds)}, PeakRSSSum: 100,
			CPUSplit: map[string]float64{"insert": 1}, Memory: []ServerMemory{{Name: "rs1", PeakRSS: 100 << 20}}}
	}
	nr := ReplSetup{Name: "no-rep", Factor: 1}
	bi := ReplSetup{Name: "build-index-3", Mode: "build-index", Factor: 3}
	rl := ReplSetup{Name: "build-index-rl-3", Mode: "build-index", Factor: 3, SharedL0: true}
	si := ReplSetup{Name: "send-index-3", Mode: "send-index", Factor: 3}
	r := &ReplResult{Rounds: 3, Runs: []ReplRun{
		// Round 1: no-rep slower than Build-Index (a ceiling below 1x).
		run(1, nr, 100, 30e-3), run(1, bi, 100, 20e-3), run(1, si, 120, 10e-3), run(1, rl, 100, 40e-3),
		// Round 2: no Send-Index.
		run(2, rl, 100, 40e-3), run(2, bi, 100, 20e-3), run(2, nr, 100, 10e-3),
		run(3, nr, 100, 10e-3), run(3, bi, 100, 20e-3), run(3, si, 150, 10e-3), run(3, rl, 100, 20e-3),
	}}
	out := tableOf(t, r)
	rows := tableRows(out)
	for _, want := range []string{
		"2 build-index-rl-3 Load A 100 40.0 -40.0 1.00 1.00 1.00 0 0 0.0 0", // runs: round first
		"2 build-index-rl-3 0 0 rs1 100 0 -",                                // memory
		"3 Load A 1 1.20 2.00 1.00 1.00 1.00 1.00 n/a",                      // SI over BI, round 1: ceiling 0.67x
		"3 Load A 3 1.50 2.00 1.00 1.00 1.00 1.00 100",                      // round 3, not renumbered 2
		"3 Load A median 1.35 2.00 1.00 1.00 1.00 1.00 100",
		"3 Load A range 1.20..1.50 2.00..2.00 1.00..1.00 1.00..1.00 1.00..1.00 1.00..1.00 100..100",
		"3 Load A 1 1.20 4.00 1.00 1.00 1.00 1.00", // SI over BI-RL: no share column
		"3 Load A 3 1.50 2.00 1.00 1.00 1.00 1.00",
		"3 Load A, round 2 2.00 1.00 1.24",
	} {
		if !rows[want] {
			t.Errorf("tables lack %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, ", 3 of 3 rounds (every other one in reverse order)") {
		t.Errorf("the header does not say the rounds:\n%s", out)
	}
	if strings.Contains(out, "3 Load A 2 ") {
		t.Errorf("a ratio row for round 2, which has no Send-Index run:\n%s", out)
	}
}

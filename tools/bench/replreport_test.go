package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
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

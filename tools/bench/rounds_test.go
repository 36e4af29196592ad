package bench

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestRoundEngines: odd rounds run the engines as given, even ones
// reversed, and the argument is left alone (roundOrder, as for setups).
func TestRoundEngines(t *testing.T) {
	engines := []string{"server", "tebis"}
	for round, want := range map[int][]string{1: {"server", "tebis"}, 2: {"tebis", "server"}, 3: {"server", "tebis"}} {
		if got := roundOrder(engines, round); !slices.Equal(got, want) {
			t.Errorf("round %d: %v, want %v", round, got, want)
		}
	}
	if !slices.Equal(engines, []string{"server", "tebis"}) {
		t.Errorf("roundOrder changed its argument: %v", engines)
	}
}

// TestWriteTableEngineRounds: with phases of several rounds the table is
// printed per round, and the two engines' ratios are taken within each
// round (never across), then their median and range; a round where one
// engine did not run the phase is left out.
func TestWriteTableEngineRounds(t *testing.T) {
	ph := func(engine, phase string, round int, opsPerSec, cpu float64) PhaseResult {
		return PhaseResult{Engine: engine, Phase: phase, Round: round, OpsPerSec: opsPerSec, CPUPerOp: cpu}
	}
	r := &Result{Engines: []string{"server", "tebis"}, Rounds: 3, Phases: []PhaseResult{
		ph("server", "Load A", 1, 60, 4), ph("tebis", "Load A", 1, 100, 2),
		ph("tebis", "Load A", 2, 200, 2), ph("server", "Load A", 2, 100, 6),
		ph("server", "Load A", 3, 70, 5), ph("tebis", "Load A", 3, 100, 2),
		ph("server", "Run C", 1, 50, 8), ph("tebis", "Run C", 1, 100, 4),
		ph("tebis", "Run C", 2, 100, 4), // the server's Run C of round 2 missing
		ph("server", "Run C", 3, 40, 8), ph("tebis", "Run C", 3, 100, 4),
	}}
	out := tableOf(t, r)
	rows := tableRows(out)
	for _, want := range []string{
		"3 of 3 rounds, the engines' order reversed every other round",
		"round 1 (server first):",
		"round 2 (tebis first):",
		"Load A 1 0.60 2.00",
		"Load A 2 0.50 3.00",
		"Load A 3 0.70 2.50",
		"Load A median 0.60 2.50",
		"Load A range 0.50..0.70 2.00..3.00",
		"Run C 1 0.50 2.00",
		"Run C 3 0.40 2.00",
		"Run C median 0.45 2.00",
	} {
		if !rows[want] {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if rows["Run C 2 1.00 1.00"] || strings.Contains(out, "Run C 2 ") {
		t.Errorf("a ratio for a round without both engines' phase:\n%s", out)
	}
}

// tableRows is the set of out's lines, each with its runs of spaces as
// one space (tabwriter's alignment removed).
func tableRows(out string) map[string]bool {
	rows := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		rows[strings.Join(strings.Fields(line), " ")] = true
	}
	return rows
}

// tableOf is what r's WriteTable prints.
func tableOf(t *testing.T, r interface{ WriteTable(io.Writer) error }) string {
	t.Helper()
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

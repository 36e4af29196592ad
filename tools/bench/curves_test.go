package bench

import (
	"bytes"
	"strings"
	"testing"
)

func TestShortCount(t *testing.T) {
	for n, want := range map[int64]string{96: "96", 100_000: "100k", 1_000_000: "1M", 2_500_000: "2.5M", 10_000_000: "10M", 1234: "1234", 1500: "1.5k"} {
		if got := shortCount(n); got != want {
			t.Errorf("shortCount(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestCurvesTargets: the targets' ratios are Load A throughput at a
// curve's last value over its first; a curve not run says so.
func TestCurvesTargets(t *testing.T) {
	pt := func(records int64, regions int, ops float64) CurvePoint {
		return CurvePoint{Records: records, RegionsPerServer: regions, Threads: 16,
			Run: ReplRun{Regions: 3 * regions, Phases: []PhaseResult{{Phase: "Load A", Ops: records, OpsPerSec: ops}}}}
	}
	r := &CurvesResult{Points: []CurvePoint{pt(1e6, 3, 100), pt(3e6, 3, 90), pt(1e7, 3, 75)},
		Curves: []Curve{{Parameter: "records", Values: []int64{1e6, 3e6, 1e7}, Points: []int{0, 1, 2}}}}
	r.Points[1].Run.Phases[0].EngineIO.Written = 1 // only the others stayed in memory
	var buf bytes.Buffer
	if err := r.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"records at 10000000 over 1000000: 0.75x", "96 regions per server over 3: not measured",
		"Load A wrote nothing to the servers' volumes at 1000000 records over 9 regions, 10000000 records over 9 regions:"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

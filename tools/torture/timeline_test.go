package torture

import (
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

// syntheticHistory is a deterministic run of n operations over d with the
// given faults: operations inside a fault mostly fail slowly, the others
// succeed in about a millisecond.
func syntheticHistory(n int, d time.Duration, faults []faultSpan) []opSample {
	r := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"put", "get", "delete", "multi-get", "scan", "insert"}
	ops := make([]opSample, n)
	for i := range ops {
		at := time.Duration(int64(i) * int64(d) / int64(n))
		op := opSample{At: at, Kind: kinds[r.IntN(len(kinds))], OK: true,
			Latency: time.Duration(200e3 + r.ExpFloat64()*800e3)}
		for _, f := range faults {
			if at >= f.Start && at < f.End && r.IntN(10) < 8 {
				op.OK = false
				op.Latency = time.Duration(r.Float64() * float64(2*time.Second))
			}
		}
		ops[i] = op
	}
	return ops
}

// checkPNG decodes the PNG at path and checks its size.
func checkPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != timelineWidthPx || b.Dy() != timelineHeightPx {
		t.Errorf("image %dx%d, want %dx%d", b.Dx(), b.Dy(), timelineWidthPx, timelineHeightPx)
	}
	return img
}

func TestWriteTimeline(t *testing.T) {
	faults := []faultSpan{
		{Kind: "kill-primary", Start: sec(10), End: sec(18), Note: "region 0"},
		{Kind: "partition-primary-zk", Start: sec(30), End: sec(40)},
		{Kind: "kill-primary", Start: sec(50), End: sec(52)},
		{Kind: "pause-backup", Start: sec(55), End: sec(55)}, // instantaneous
		{Kind: "slow-network", Start: sec(57), End: 0},       // not healed
	}
	tests := []struct {
		name   string
		ops    []opSample
		faults []faultSpan
	}{
		{"downsampled history with faults", syntheticHistory(3*timelineMaxPoints/2, sec(60), faults), faults},
		{"no faults", syntheticHistory(2000, sec(20), nil), nil},
		{"few ops", []opSample{okAt(0.5), failAt(1.2), okAt(1.3)}, faults[:1]},
		{"one op of zero latency", []opSample{{At: 0, OK: true, Kind: "get"}}, nil},
		{"faults but no ops", nil, faults},
		{"empty history", nil, nil},
	}
	dir := t.TempDir()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "timeline"+string(rune('a'+i))+".png")
			if err := writeTimeline(path, tc.ops, tc.faults, "seed 42: "+tc.name); err != nil {
				t.Fatal(err)
			}
			checkPNG(t, path)
		})
	}
}

func TestWriteTimelineUnwritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing", "timeline.png")
	if err := writeTimeline(path, nil, nil, "x"); err == nil {
		t.Error("writeTimeline into a missing directory succeeded")
	}
}

func TestSampleOps(t *testing.T) {
	ops := syntheticHistory(50000, sec(60), []faultSpan{{Kind: "k", Start: sec(10), End: sec(20)}})
	slices.Reverse(ops) // call order is sampleOps' business
	failed := 0
	for _, op := range ops {
		if !op.OK {
			failed++
		}
	}
	got := sampleOps(ops, 1000)
	if len(got) != 1000 {
		t.Fatalf("sampleOps kept %d, want 1000", len(got))
	}
	if !slices.IsSortedFunc(got, func(a, b opSample) int { return int(a.At - b.At) }) {
		t.Error("sample not in call order")
	}
	gotFailed := 0
	for _, op := range got {
		if !op.OK {
			gotFailed++
		}
	}
	if want := min(failed, 500); gotFailed != want {
		t.Errorf("sample kept %d failed of %d, want %d", gotFailed, failed, want)
	}
	if again := sampleOps(ops, 1000); !slices.Equal(again, got) {
		t.Error("sampleOps is not deterministic")
	}
	if few := sampleOps(ops[:10], 1000); len(few) != 10 {
		t.Errorf("sampleOps under the limit kept %d of 10", len(few))
	}
}

func TestTicks(t *testing.T) {
	labels := func(ticks []plot.Tick) []string {
		var out []string
		for _, tk := range ticks {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	tests := []struct {
		name   string
		ticker plot.Ticker
		lo, hi float64
		want   []string
	}{
		{"decades below 1", decadeTicks{}, 0.001, 10, []string{"0.001", "0.01", "0.1", "1", "10"}},
		{"decades above 1", decadeTicks{}, 1, 10000, []string{"1", "10", "100", "1000", "10000"}},
		{"seconds", linearTicks{}, 0, 60, []string{"0", "10", "20", "30", "40", "50", "60"}},
		{"short run", linearTicks{}, 0, 1, []string{"0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9", "1.0"}},
		{"long run", linearTicks{}, 0, 1800, []string{"0", "200", "400", "600", "800", "1000", "1200", "1400", "1600", "1800"}},
		{"empty range", linearTicks{}, 1, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := labels(tc.ticker.Ticks(tc.lo, tc.hi)); !slices.Equal(got, tc.want) {
				t.Errorf("Ticks(%g, %g) labels %q, want %q", tc.lo, tc.hi, got, tc.want)
			}
		})
	}
}

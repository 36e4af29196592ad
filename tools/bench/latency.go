package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/tebis-go/tebis/tools/ycsb"
)

// Latencies are recorded in microseconds, from 1 µs to 10 minutes, with 3
// significant digits.
const (
	histMinMicros = 1
	histMaxMicros = int64(10 * time.Minute / time.Microsecond)
	histDigits    = 3
)

// LatencySummary describes one histogram, in microseconds.
type LatencySummary struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   int64   `json:"p50_us"`
	P90   int64   `json:"p90_us"`
	P99   int64   `json:"p99_us"`
	P999  int64   `json:"p999_us"`
	P9999 int64   `json:"p9999_us"`
	Max   int64   `json:"max_us"`
}

func summarize(h *hdrhistogram.Histogram) LatencySummary {
	return LatencySummary{
		Count: h.TotalCount(),
		Mean:  h.Mean(),
		P50:   h.ValueAtQuantile(50),
		P90:   h.ValueAtQuantile(90),
		P99:   h.ValueAtQuantile(99),
		P999:  h.ValueAtQuantile(99.9),
		P9999: h.ValueAtQuantile(99.99),
		Max:   h.Max(),
	}
}

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)
}

// opHists holds one worker's histograms by operation kind, created lazily.
type opHists [ycsb.NumOpKinds]*hdrhistogram.Histogram

func (h *opHists) record(k ycsb.OpKind, d time.Duration) {
	if h[k] == nil {
		h[k] = newHist()
	}
	us := min(max(d.Microseconds(), histMinMicros), histMaxMicros)
	_ = h[k].RecordValue(us) // in range by construction
}

// merge folds o into h.
func (h *opHists) merge(o *opHists) {
	for k, src := range o {
		if src == nil {
			continue
		}
		if h[k] == nil {
			h[k] = newHist()
		}
		h[k].Merge(src)
	}
}

// summaries returns the overall summary and one per kind that occurred.
func (h *opHists) summaries() (LatencySummary, map[string]LatencySummary) {
	all := newHist()
	per := map[string]LatencySummary{}
	for k, src := range h {
		if src == nil {
			continue
		}
		all.Merge(src)
		per[ycsb.OpKind(k).String()] = summarize(src)
	}
	return summarize(all), per
}

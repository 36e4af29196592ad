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

// OpHists holds one worker's latency histograms by operation kind,
// created lazily. Not safe for concurrent use: one per worker, merged.
type OpHists [ycsb.NumOpKinds]*hdrhistogram.Histogram

// Record adds one operation's latency.
func (h *OpHists) Record(k ycsb.OpKind, d time.Duration) {
	if h[k] == nil {
		h[k] = newHist()
	}
	us := min(max(d.Microseconds(), histMinMicros), histMaxMicros)
	_ = h[k].RecordValue(us) // in range by construction
}

// Merge folds o into h.
func (h *OpHists) Merge(o *OpHists) {
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

// Summaries returns the overall summary and one per kind that occurred.
func (h *OpHists) Summaries() (LatencySummary, map[string]LatencySummary) {
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

package demo

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/tebis-go/tebis/tools/ycsb"
)

// Latencies are recorded in microseconds, 1 µs to 10 minutes, 3
// significant digits (as tools/bench).
const (
	histMinMicros = 1
	histMaxMicros = int64(10 * time.Minute / time.Microsecond)
	histDigits    = 3
)

// Latency summarizes one kind of operation's latencies, in microseconds.
type Latency struct {
	Count int64
	Mean  float64
	P50   int64
	P99   int64
	P999  int64
	Max   int64
}

func (l Latency) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, p99.9 %s, max %s", micros(l.P50), micros(l.P99), micros(l.P999), micros(l.Max))
}

// micros prints a latency in µs, or ms from 10 ms up.
func micros(us int64) string {
	if us >= 10_000 {
		return fmt.Sprintf("%.1fms", float64(us)/1000)
	}
	return fmt.Sprintf("%dµs", us)
}

// opHists is one worker's latency histograms by operation kind.
type opHists [ycsb.NumOpKinds]*hdrhistogram.Histogram

func (h *opHists) record(k ycsb.OpKind, d time.Duration) {
	if h[k] == nil {
		h[k] = hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)
	}
	_ = h[k].RecordValue(min(max(d.Microseconds(), histMinMicros), histMaxMicros)) // in range
}

func (h *opHists) merge(o *opHists) {
	for k, src := range o {
		if src == nil {
			continue
		}
		if h[k] == nil {
			h[k] = hdrhistogram.New(histMinMicros, histMaxMicros, histDigits)
		}
		h[k].Merge(src)
	}
}

// latencies returns the summary of every kind that occurred.
func (h *opHists) latencies() map[string]Latency {
	out := map[string]Latency{}
	for k, src := range h {
		if src == nil || src.TotalCount() == 0 {
			continue
		}
		out[ycsb.OpKind(k).String()] = Latency{
			Count: src.TotalCount(), Mean: src.Mean(),
			P50: src.ValueAtQuantile(50), P99: src.ValueAtQuantile(99), P999: src.ValueAtQuantile(99.9), Max: src.Max(),
		}
	}
	return out
}

// latencyLines formats a phase's latencies, one line per kind.
func latencyLines(lat map[string]Latency) string {
	kinds := make([]string, 0, len(lat))
	for k := range lat {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "    %-7s %7d ops  %s\n", k, lat[k].Count, lat[k])
	}
	return b.String()
}

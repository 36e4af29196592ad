package demo

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tebis-go/tebis/tools/bench"
)

// Latency summarizes one kind of operation's latencies, in microseconds
// (tools/bench's histograms).
type Latency = bench.LatencySummary

// latencyText prints a summary's percentiles.
func latencyText(l Latency) string {
	return fmt.Sprintf("p50 %s, p99 %s, p99.9 %s, max %s", micros(l.P50), micros(l.P99), micros(l.P999), micros(l.Max))
}

// micros prints a latency in µs, or ms from 10 ms up.
func micros(us int64) string {
	if us >= 10_000 {
		return fmt.Sprintf("%.1fms", float64(us)/1000)
	}
	return fmt.Sprintf("%dµs", us)
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
		fmt.Fprintf(&b, "    %-7s %7d ops  %s\n", k, lat[k].Count, latencyText(lat[k]))
	}
	return b.String()
}

// perKind returns the summary of every kind that occurred.
func perKind(h *bench.OpHists) map[string]Latency {
	_, per := h.Summaries()
	return per
}

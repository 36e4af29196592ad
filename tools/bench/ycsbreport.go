package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"
	"text/tabwriter"
)

// WriteYCSB prints each phase as YCSB does: overall throughput and
// resource figures, then per operation kind its count and latency
// percentiles.
func (r *Result) WriteYCSB(w io.Writer) error {
	for _, p := range r.Phases {
		fmt.Fprintf(w, "[%s] %s: %d ops in %.2f s, %.0f ops/s, cpu %.1f µs/op, io amp %.2f", p.Phase, p.Engine, p.Ops, p.Seconds, p.OpsPerSec, p.CPUPerOp, p.IOAmp)
		if p.NetBytes > 0 {
			fmt.Fprintf(w, ", net amp %.2f", p.NetAmp)
		}
		if p.ServerCPUSeconds > 0 {
			fmt.Fprintf(w, ", server cpu %.2f s", p.ServerCPUSeconds)
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 2, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "op\tcount\tp50 µs\tp90 µs\tp99 µs\tp99.9 µs\tp99.99 µs\t")
		for _, name := range opNames(p) {
			l := p.PerOp[name]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, l.Count, l.P50, l.P90, l.P99, l.P999, l.P9999)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func opNames(p PhaseResult) []string {
	names := make([]string, 0, len(p.PerOp))
	for n := range p.PerOp {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WriteCSV writes one row per phase and operation kind (kind "all" for the
// phase as a whole).
func (r *Result) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"engine", "phase", "op", "count", "ops_per_sec", "p50_us", "p90_us", "p99_us", "p999_us", "p9999_us",
		"cpu_us_per_op", "io_amp", "net_amp", "user_bytes", "device_bytes", "net_bytes"})
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	for _, p := range r.Phases {
		row := func(op string, l LatencySummary, opsPerSec float64) {
			_ = cw.Write([]string{p.Engine, p.Phase, op, i(l.Count), f(opsPerSec), i(l.P50), i(l.P90), i(l.P99), i(l.P999), i(l.P9999),
				f(p.CPUPerOp), f(p.IOAmp), f(p.NetAmp), u(p.UserBytes), u(p.Device.Total()), u(p.NetBytes)})
		}
		row("all", p.Latency, p.OpsPerSec)
		for _, name := range opNames(p) {
			l := p.PerOp[name]
			row(name, l, float64(l.Count)/max(p.Seconds, 1e-9))
		}
	}
	cw.Flush()
	return cw.Error()
}

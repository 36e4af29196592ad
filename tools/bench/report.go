package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"text/tabwriter"
)

// metric is one row of the side-by-side table.
type metric struct {
	name string
	get  func(PhaseResult) float64
	fmt  string
}

var metrics = []metric{
	{"ops/s", func(r PhaseResult) float64 { return r.OpsPerSec }, "%.0f"},
	{"cpu µs/op", func(r PhaseResult) float64 { return r.CPUPerOp }, "%.1f"},
	{"io amp (dev/user B)", func(r PhaseResult) float64 { return r.IOAmp }, "%.2f"},
	{"device MB r+w", func(r PhaseResult) float64 { return float64(r.Device.Total()) / 1e6 }, "%.1f"},
	{"space MB", func(r PhaseResult) float64 { return float64(r.SpaceBytes) / 1e6 }, "%.1f"},
	{"p50 µs", func(r PhaseResult) float64 { return float64(r.Latency.P50) }, "%.0f"},
	{"p99 µs", func(r PhaseResult) float64 { return float64(r.Latency.P99) }, "%.0f"},
}

// labelFmt left-aligns the phase and metric names in one fixed-width cell
// (the tabwriter right-aligns the numbers).
const labelFmt = "%-7s  %-20s"

// WriteTable prints the run as a side-by-side table: one block per phase,
// one row per metric, one column per engine, and with exactly two engines
// a ratio column (first / second).
func (r *Result) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "seed %d  kv sizes %s  records %d  operations %d  threads %d  sync %s  L0 pairs %d  growth %d  cpus %d\n",
		r.Seed, r.Sizes, r.RecordCount, r.OperationCount, r.Threads, r.SyncMode, r.L0Pairs, r.GrowthFactor, r.NumCPU)
	if slices.Contains(r.Engines, "server") {
		fmt.Fprintf(w, "server engine: server procs %s  client procs %s\n", procs(r.ServerProcs), procs(r.ClientProcs))
	}
	if r.SegmentSize > 0 {
		fmt.Fprintf(w, "tebis segment size %d\n", r.SegmentSize)
	}
	if r.DiskWriteBps > 0 {
		fmt.Fprintf(w, "disk sequential write: %.1f MB/s", r.DiskWriteBps/1e6)
		for _, e := range r.Engines {
			if f := r.LoadFraction(e); f > 0 {
				fmt.Fprintf(w, "  %s Load A user bytes: %.1f%% of it", e, 100*f)
			}
		}
		if r.DiskWriteBpsAfter > 0 {
			fmt.Fprintf(w, "  (after the engines: %.1f MB/s)", r.DiskWriteBpsAfter/1e6)
		}
		fmt.Fprintln(w)
	}
	if r.DiskSyncedWriteBps > 0 {
		fmt.Fprintf(w, "disk sequential write, fdatasync every %d bytes: %.1f MB/s", r.DiskSyncChunk, r.DiskSyncedWriteBps/1e6)
		for _, e := range r.Engines {
			if f := r.SyncedLoadFraction(e); f > 0 {
				fmt.Fprintf(w, "  %s Load A user bytes: %.1f%% of it", e, 100*f)
			}
		}
		if r.DiskSyncedWriteBpsAfter > 0 {
			fmt.Fprintf(w, "  (after the engines: %.1f MB/s)", r.DiskSyncedWriteBpsAfter/1e6)
		}
		fmt.Fprintln(w)
	}
	rounds := r.rounds()
	if len(rounds) <= 1 {
		return r.writeBody(w)
	}
	fmt.Fprintf(w, "%d of %d rounds, the engines' order reversed every other round\n", len(rounds), max(r.Rounds, len(rounds)))
	for _, round := range rounds {
		sub := *r
		sub.Phases = slices.DeleteFunc(slices.Clone(r.Phases), func(p PhaseResult) bool { return p.Round != round })
		fmt.Fprintf(w, "\nround %d (%s first):\n", round, sub.Phases[0].Engine)
		if err := sub.writeBody(w); err != nil {
			return err
		}
	}
	return r.writeRoundRatios(w, rounds)
}

// rounds lists the rounds of the phases, in the order they first appear.
func (r *Result) rounds() []int {
	return distinct(r.Phases, func(p PhaseResult) int { return p.Round })
}

// writeRoundRatios prints, with two engines, each phase's throughput and
// CPU-per-operation ratios (first engine over second) in every round that
// ran both, then their median and range.
func (r *Result) writeRoundRatios(w io.Writer, rounds []int) error {
	if len(r.Engines) != 2 {
		return nil
	}
	a, b := r.Engines[0], r.Engines[1]
	fmt.Fprintf(w, "\n%s/%s within each round:\n", a, b)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\tround\tops/s ratio\tcpu µs/op ratio\t\n")
	for _, phase := range r.phaseNames() {
		var ops, cpu []float64
		for _, round := range rounds {
			pa, okA := r.phaseIn(round, a, phase)
			pb, okB := r.phaseIn(round, b, phase)
			if !okA || !okB || pb.OpsPerSec == 0 || pb.CPUPerOp == 0 {
				continue
			}
			ops, cpu = append(ops, pa.OpsPerSec/pb.OpsPerSec), append(cpu, pa.CPUPerOp/pb.CPUPerOp)
			fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.2f\t\n", phase, round, ops[len(ops)-1], cpu[len(cpu)-1])
		}
		if len(ops) > 1 {
			fmt.Fprintf(tw, "%s\tmedian\t%.2f\t%.2f\t\n", phase, median(ops), median(cpu))
			fmt.Fprintf(tw, "%s\trange\t%.2f..%.2f\t%.2f..%.2f\t\n", phase, slices.Min(ops), slices.Max(ops), slices.Min(cpu), slices.Max(cpu))
		}
	}
	return tw.Flush()
}

// phaseIn is the engine's phase of that name in round.
func (r *Result) phaseIn(round int, engine, phase string) (PhaseResult, bool) {
	for _, p := range r.Phases {
		if p.Round == round && p.Engine == engine && p.Phase == phase {
			return p, true
		}
	}
	return PhaseResult{}, false
}

// writeBody prints the side-by-side table, warnings and counters of the
// result's phases.
func (r *Result) writeBody(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	ratio := len(r.Engines) == 2
	fmt.Fprintf(tw, labelFmt+"\t", "phase", "metric")
	for _, e := range r.Engines {
		fmt.Fprintf(tw, "%s\t", e)
	}
	if ratio {
		fmt.Fprintf(tw, "%s/%s\t", r.Engines[0], r.Engines[1])
	}
	fmt.Fprintln(tw)
	for _, phase := range r.phaseNames() {
		for i, m := range metrics {
			label := ""
			if i == 0 {
				label = phase
			}
			fmt.Fprintf(tw, labelFmt+"\t", label, m.name)
			vals := make([]float64, len(r.Engines))
			for j, e := range r.Engines {
				p, ok := r.phase(e, phase)
				if !ok {
					fmt.Fprint(tw, "-\t")
					continue
				}
				vals[j] = m.get(p)
				fmt.Fprintf(tw, m.fmt+"\t", vals[j])
			}
			if ratio {
				if vals[1] != 0 {
					fmt.Fprintf(tw, "%.2f\t", vals[0]/vals[1])
				} else {
					fmt.Fprint(tw, "-\t")
				}
			}
			fmt.Fprintln(tw)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range r.Phases {
		if p.NotFound > 0 {
			fmt.Fprintf(w, "warning: %s %s: %d reads found no value\n", p.Engine, p.Phase, p.NotFound)
		}
	}
	r.writeBreakdown(w)
	return nil
}

// writeBreakdown prints each engine's own counters after its last phase.
func (r *Result) writeBreakdown(w io.Writer) {
	for _, e := range r.Engines {
		var last *PhaseResult
		for i := range r.Phases {
			if r.Phases[i].Engine == e {
				last = &r.Phases[i]
			}
		}
		if last == nil || len(last.Breakdown) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s counters after %s:", e, last.Phase)
		for _, k := range slices.Sorted(maps.Keys(last.Breakdown)) {
			if v := last.Breakdown[k]; v == float64(int64(v)) {
				fmt.Fprintf(w, " %s=%d", k, int64(v))
			} else {
				fmt.Fprintf(w, " %s=%.3f", k, v)
			}
		}
		fmt.Fprintln(w)
	}
}

func (r *Result) phaseNames() []string {
	return distinct(r.Phases, func(p PhaseResult) string { return p.Phase })
}

func (r *Result) phase(engine, phase string) (PhaseResult, bool) {
	for _, p := range r.Phases {
		if p.Engine == engine && p.Phase == phase {
			return p, true
		}
	}
	return PhaseResult{}, false
}

// WriteJSONFile writes the result, indented, to path.
func (r *Result) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// procs prints a GOMAXPROCS setting (0: not set, so the process has
// Go's default or its environment's GOMAXPROCS).
func procs(n int) string {
	if n == 0 {
		return "not set"
	}
	return strconv.Itoa(n)
}

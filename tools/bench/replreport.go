package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// splitOrder is the CPU split's column order (the paper's table 3 plus
// what this implementation adds); other labels follow.
var splitOrder = []string{"insert", "log-write", "log-replication", "compaction", "send-index", "rewrite-index", "ring-reply", "ring-poll", "transport", "gc", "other"}

// WriteTable prints the runs' figures, the CPU split and the Send-Index /
// Build-Index ratios.
func (r *ReplResult) WriteTable(w io.Writer) error {
	fmt.Fprintf(w, "replication: %s, %d records, %d ops, %d threads, L0 %d pairs, growth %d, seed %d, server procs %s, client procs %s",
		r.Sizes, r.Records, r.Ops, r.Threads, r.L0Pairs, r.Growth, r.Seed, procs(r.ServerProcs), procs(r.ClientProcs))
	n := len(r.rounds())
	if n > 1 || r.Rounds > 1 {
		fmt.Fprintf(w, ", %d of %d rounds (every other one in reverse order)", n, max(r.Rounds, n))
	}
	fmt.Fprint(w, "\n\n")
	multi := n > 1
	// roundCol is a run's first column when the setups ran in rounds.
	roundCol := func(run ReplRun) string {
		if !multi {
			return ""
		}
		return fmt.Sprintf("%d\t", run.Round)
	}
	roundHead := ""
	if multi {
		roundHead = "round\t"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, roundHead+"setup\tphase\tops/s\tserver CPU us/op\tclient CPU us/op\tI/O amp (device)\tI/O amp (engine)\tnet amp\tput p50 us\tput p99 us\tL0 stall s\tservers' peak RSS MiB\t")
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			put := putLatency(p)
			var rss uint64
			for _, v := range p.ServerPeakRSS {
				rss += v
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%.1f\t%.0f\t\n", roundCol(run), run.Setup.Name, p.Phase, p.OpsPerSec,
				serverCPUPerOp(p), p.CPUPerOp-serverCPUPerOp(p), p.IOAmp, p.EngineIOAmp, p.NetAmp, put.P50, put.P99, p.StallSeconds, mib(rss))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeMemory(w); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nserver CPU by component (whole run, % of the servers' profiled CPU):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	cols := r.splitColumns()
	fmt.Fprintf(tw, "%ssetup\t%s\ttotal s\t\n", roundHead, strings.Join(cols, "\t"))
	for _, run := range r.Runs {
		var total float64
		for _, v := range run.CPUSplit {
			total += v
		}
		fmt.Fprintf(tw, "%s%s", roundCol(run), run.Setup.Name)
		for _, c := range cols {
			fmt.Fprintf(tw, "\t%.1f", 100*run.CPUSplit[c]/max(total, 1e-9))
		}
		fmt.Fprintf(tw, "\t%.1f\t\n", total)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeRatios(w, "Send-Index vs Build-Index (same run):", false); err != nil {
		return err
	}
	if err := r.writeRatios(w, "Send-Index vs Build-IndexRL, Build-Index with Send-Index's L0 memory, each replica's L0 the budget over the replicas (same run):", true); err != nil {
		return err
	}
	return r.writeCeilings(w)
}

// writeRatios prints Send-Index's gains over the Build-Index setups of
// the run (with shared: the Build-IndexRL ones), for the replica counts
// where both ran, each ratio within one round; with several rounds, their
// median and range follow. Over Build-Index it adds how much of the CPU
// ceiling (No-Replication of the same round) the CPU gain is: (gain - 1)
// / (ceiling - 1). Nothing is printed when no round has both setups.
func (r *ReplResult) writeRatios(w io.Writer, title string, shared bool) error {
	rounds := r.rounds()
	multi := len(rounds) > 1
	type key struct {
		f     int
		phase string
	}
	var keys []key
	vals := map[key][][]float64{} // per key, per round: the columns
	of := map[key][]int{}         // per key: the round of each row
	for _, f := range []int{2, 3} {
		for _, round := range rounds {
			si, bi := r.runIn(round, "send-index", f, false), r.runIn(round, "build-index", f, shared)
			if si == nil || bi == nil {
				continue
			}
			nr := r.runIn(round, "", 1, false)
			for i := range si.Phases {
				if i >= len(bi.Phases) {
					break
				}
				s, b := si.Phases[i], bi.Phases[i]
				cpu := serverCPUPerOp(b) / serverCPUPerOp(s)
				row := []float64{s.OpsPerSec / b.OpsPerSec, cpu, b.IOAmp / s.IOAmp, b.EngineIOAmp / s.EngineIOAmp, b.NetAmp / s.NetAmp,
					float64(bi.PeakRSSSum) / float64(max(si.PeakRSSSum, 1))}
				if !shared {
					share := math.NaN() // not measured: no No-Replication run
					if nr != nil && i < len(nr.Phases) {
						share = math.Inf(1) // no gain possible: a ceiling of 1x or less
						if c := ceilings(b, &nr.Phases[i], f).cpu; c > 1 {
							share = 100 * (cpu - 1) / (c - 1)
						}
					}
					row = append(row, share)
				}
				k := key{f, s.Phase}
				if _, ok := vals[k]; !ok {
					keys = append(keys, k)
				}
				vals[k] = append(vals[k], row)
				of[k] = append(of[k], round)
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	head := "replicas\tphase\t"
	if multi {
		head += "round\t"
	}
	head += "throughput x\tCPU/op lower x\tI/O amp (device) lower x\tI/O amp (engine) lower x\tnet amp lower x\tpeak RSS lower x\t"
	if !shared {
		head += "of CPU ceiling %\t"
	}
	fmt.Fprintln(tw, head)
	cells := func(row []float64, format func(i int, v float64) string) string {
		var b strings.Builder
		for i, v := range row {
			b.WriteString(format(i, v))
			b.WriteByte('\t')
		}
		return b.String()
	}
	plain := func(i int, v float64) string {
		switch {
		case math.IsNaN(v):
			return "-"
		case math.IsInf(v, 1):
			return "n/a"
		case !shared && i == 6:
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.2f", v)
	}
	for _, k := range keys {
		rows := vals[k]
		for j, row := range rows {
			lead := fmt.Sprintf("%d\t%s\t", k.f, k.phase)
			if multi {
				lead += fmt.Sprintf("%d\t", of[k][j])
			}
			fmt.Fprintf(tw, "%s%s\n", lead, cells(row, plain))
		}
		if len(rows) < 2 {
			continue
		}
		med, lo, hi := columnStats(rows)
		fmt.Fprintf(tw, "%d\t%s\tmedian\t%s\n", k.f, k.phase, cells(med, plain))
		fmt.Fprintf(tw, "%d\t%s\trange\t%s\n", k.f, k.phase, cells(lo, func(i int, v float64) string {
			if math.IsNaN(v) || math.IsInf(v, 1) {
				return plain(i, v)
			}
			return plain(i, v) + ".." + plain(i, hi[i])
		}))
	}
	return tw.Flush()
}

// columnStats is the median, least and greatest of every column of rows
// (NaN, not measured, and +Inf, nothing to measure, left out; NaN when a
// column has no value left).
func columnStats(rows [][]float64) (med, lo, hi []float64) {
	n := len(rows[0])
	med, lo, hi = make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		var col []float64
		for _, row := range rows {
			if !math.IsNaN(row[i]) && !math.IsInf(row[i], 1) {
				col = append(col, row[i])
			}
		}
		if len(col) == 0 {
			med[i], lo[i], hi[i] = math.NaN(), math.NaN(), math.NaN()
			continue
		}
		med[i], lo[i], hi[i] = median(col), slices.Min(col), slices.Max(col)
	}
	return med, lo, hi
}

// writeMemory prints every setup's L0 per replica and its servers' peak
// memory over the whole run.
func (r *ReplResult) writeMemory(w io.Writer) error {
	fmt.Fprintln(w, "\nserver memory (whole run, MiB: peak RSS, VmHWM; cgroup peak, page cache included, with --server-memory):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	multi := len(r.rounds()) > 1
	head := "setup\tL0 pairs per replica\tregions\tpeak RSS per server\tsum\tcgroup peak per server\t"
	if multi {
		head = "round\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, run := range r.Runs {
		if multi {
			fmt.Fprintf(tw, "%d\t", run.Round)
		}
		var rss, cg []string
		for _, m := range run.Memory {
			rss = append(rss, fmt.Sprintf("%s %.0f", m.Name, mib(m.PeakRSS)))
			if m.CgroupPeak > 0 {
				cg = append(cg, fmt.Sprintf("%s %.0f", m.Name, mib(m.CgroupPeak)))
			}
		}
		cgs := "-"
		if len(cg) > 0 {
			cgs = strings.Join(cg, ", ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.0f\t%s\t\n", run.Setup.Name, run.L0Pairs, run.Regions, strings.Join(rss, ", "), mib(run.PeakRSSSum), cgs)
	}
	return tw.Flush()
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// writeCeilings prints, from the same run, the most any index-shipping
// scheme could gain over Build-Index (see ceilings).
func (r *ReplResult) writeCeilings(w io.Writer) error {
	fmt.Fprintln(w, "\nceilings: the most Send-Index could gain over Build-Index in this run (CPU: No-Replication over Build-Index; I/O: Build-Index without its backups' merge reads):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "replicas\tphase\tCPU/op lower x\tI/O amp (device) lower x\tI/O amp (engine) lower x\t")
	var gcNotes []string
	rounds := r.rounds()
	for _, f := range []int{2, 3} {
		for _, round := range rounds {
			bi := r.runIn(round, "build-index", f, false)
			if bi == nil {
				continue
			}
			nr := r.runIn(round, "", 1, false)
			for i, b := range bi.Phases {
				var n *PhaseResult
				if nr != nil && i < len(nr.Phases) {
					n = &nr.Phases[i]
				}
				c := ceilings(b, n, f)
				mark := ""
				if gc := b.EngineIOByKind["gc"].Total(); gc > 0 {
					mark = "*"
				}
				label := b.Phase
				if len(rounds) > 1 {
					label = fmt.Sprintf("%s, round %d", b.Phase, round)
				}
				if mark != "" {
					gcNotes = append(gcNotes, fmt.Sprintf("%d-way %s: %.0f MB", f, label, float64(b.EngineIOByKind["gc"].Total())/1e6))
				}
				fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f%s\t%.2f%s\t\n", f, label, optRatio(c.cpu), c.device, mark, c.engine, mark)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(gcNotes) > 0 {
		// GC passes run on a timer per region and fall inside a phase or
		// after it by chance: a bound on merges says nothing of them.
		fmt.Fprintf(w, "* Build-Index's value-log GC ran in the phase (%s of GC reads; Send-Index's backups never GC): the I/O ceiling counts merges only\n", strings.Join(gcNotes, ", "))
	}
	return nil
}

// ceiling is what a scheme that builds no index at the backups could gain
// at most; 0 when not measured.
type ceiling struct{ cpu, device, engine float64 }

// ceilings bounds Send-Index's gains over a Build-Index phase b with f
// replicas. Its servers do all that No-Replication servers do (phase n,
// nil if not run) and more, so n's server CPU per op bounds theirs. (Not
// its throughput: on a host the client shares, the client's CPU per op
// varies from setup to setup with the latencies it sees.) Its backups still write the log and the shipped index, as
// Build-Index backups write their log and their merges' output; what they
// save is reading the merged levels: (f-1)/f of Build-Index's compaction
// reads, every replica merging the same levels. The device bound counts
// at most that many of Build-Index's device reads as saved.
func ceilings(b PhaseResult, n *PhaseResult, f int) ceiling {
	var c ceiling
	if n != nil && serverCPUPerOp(*n) > 0 {
		c.cpu = serverCPUPerOp(b) / serverCPUPerOp(*n)
	}
	saved := float64(b.EngineIOByKind["compaction"].Read) * float64(f-1) / float64(f)
	if t := float64(b.EngineIO.Total()); t > 0 {
		c.engine = t / (t - saved)
	}
	if t := float64(b.Device.Total()); t > 0 {
		c.device = t / (t - min(saved, float64(b.Device.Read)))
	}
	return c
}

func optRatio(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// rounds lists the rounds of the runs, in the order they first appear.
func (r *ReplResult) rounds() []int {
	return distinct(r.Runs, func(run ReplRun) int { return run.Round })
}

// runIn is the first run of round of the setup of that mode, replica
// count and L0 sharing, or nil.
func (r *ReplResult) runIn(round int, mode string, factor int, sharedL0 bool) *ReplRun {
	for i := range r.Runs {
		if s := r.Runs[i].Setup; r.Runs[i].Round == round && s.Mode == mode && s.Factor == factor && s.SharedL0 == sharedL0 {
			return &r.Runs[i]
		}
	}
	return nil
}

func (r *ReplResult) splitColumns() []string {
	seen := map[string]bool{}
	for _, run := range r.Runs {
		for k := range run.CPUSplit {
			seen[k] = true
		}
	}
	var cols []string
	for _, c := range splitOrder {
		if seen[c] {
			cols = append(cols, c)
			delete(seen, c)
		}
	}
	var rest []string
	for c := range seen {
		rest = append(rest, c)
	}
	sort.Strings(rest)
	return append(cols, rest...)
}

func serverCPUPerOp(p PhaseResult) float64 {
	return p.ServerCPUSeconds / float64(max(p.Ops, 1)) * 1e6
}

// putLatency is the latency of the phase's writes (inserts or updates).
func putLatency(p PhaseResult) LatencySummary {
	for _, k := range []string{"insert", "update"} {
		if l, ok := p.PerOp[k]; ok && l.Count > 0 {
			return l
		}
	}
	return LatencySummary{}
}

// WriteJSONFile writes the result as indented JSON.
func (r *ReplResult) WriteJSONFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

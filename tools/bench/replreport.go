package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
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
	fmt.Fprintf(w, "replication: %s, %d records, %d ops, %d threads, L0 %d pairs, growth %d, seed %d, server procs %s, client procs %s\n\n",
		r.Sizes, r.Records, r.Ops, r.Threads, r.L0Pairs, r.Growth, r.Seed, procs(r.ServerProcs), procs(r.ClientProcs))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tphase\tops/s\tserver CPU us/op\tclient CPU us/op\tI/O amp (device)\tI/O amp (engine)\tnet amp\tput p50 us\tput p99 us\tL0 stall s\tservers' peak RSS MiB\t")
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			put := putLatency(p)
			var rss uint64
			for _, v := range p.ServerPeakRSS {
				rss += v
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%.1f\t%.0f\t\n", run.Setup.Name, p.Phase, p.OpsPerSec,
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
	fmt.Fprintf(tw, "setup\t%s\ttotal s\t\n", strings.Join(cols, "\t"))
	for _, run := range r.Runs {
		var total float64
		for _, v := range run.CPUSplit {
			total += v
		}
		fmt.Fprintf(tw, "%s", run.Setup.Name)
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
// where both ran; nothing when none did.
func (r *ReplResult) writeRatios(w io.Writer, title string, shared bool) error {
	var rows []string
	for _, f := range []int{2, 3} {
		si, bi := r.run("send-index", f, false), r.run("build-index", f, shared)
		if si == nil || bi == nil {
			continue
		}
		for i := range si.Phases {
			if i >= len(bi.Phases) {
				break
			}
			s, b := si.Phases[i], bi.Phases[i]
			rows = append(rows, fmt.Sprintf("%d\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", f, s.Phase, s.OpsPerSec/b.OpsPerSec,
				serverCPUPerOp(b)/serverCPUPerOp(s), b.IOAmp/s.IOAmp, b.EngineIOAmp/s.EngineIOAmp, b.NetAmp/s.NetAmp,
				float64(bi.PeakRSSSum)/float64(max(si.PeakRSSSum, 1))))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n%s\n", title)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "replicas\tphase\tthroughput x\tCPU/op lower x\tI/O amp (device) lower x\tI/O amp (engine) lower x\tnet amp lower x\tpeak RSS lower x\t")
	for _, row := range rows {
		fmt.Fprint(tw, row)
	}
	return tw.Flush()
}

// writeMemory prints every setup's L0 per replica and its servers' peak
// memory over the whole run.
func (r *ReplResult) writeMemory(w io.Writer) error {
	fmt.Fprintln(w, "\nserver memory (whole run, MiB: peak RSS, VmHWM; cgroup peak, page cache included, with --server-memory):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tL0 pairs per replica\tregions\tpeak RSS per server\tsum\tcgroup peak per server\t")
	for _, run := range r.Runs {
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
	for _, f := range []int{2, 3} {
		bi := r.run("build-index", f, false)
		if bi == nil {
			continue
		}
		nr := r.run("", 1, false)
		for i, b := range bi.Phases {
			var n *PhaseResult
			if nr != nil && i < len(nr.Phases) {
				n = &nr.Phases[i]
			}
			c := ceilings(b, n, f)
			mark := ""
			if gc := b.EngineIOByKind["gc"].Total(); gc > 0 {
				mark = "*"
				gcNotes = append(gcNotes, fmt.Sprintf("%d-way %s: %.0f MB", f, b.Phase, float64(gc)/1e6))
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.2f%s\t%.2f%s\t\n", f, b.Phase, optRatio(c.cpu), c.device, mark, c.engine, mark)
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

// run is the first run of the setup of that mode, replica count and L0
// sharing, or nil.
func (r *ReplResult) run(mode string, factor int, sharedL0 bool) *ReplRun {
	for i := range r.Runs {
		if s := r.Runs[i].Setup; s.Mode == mode && s.Factor == factor && s.SharedL0 == sharedL0 {
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

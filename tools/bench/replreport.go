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
	fmt.Fprintf(w, "replication: %s, %d records, %d ops, %d threads, L0 %d pairs, growth %d, seed %d\n\n",
		r.Sizes, r.Records, r.Ops, r.Threads, r.L0Pairs, r.Growth, r.Seed)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "setup\tphase\tops/s\tserver CPU us/op\tclient CPU us/op\tI/O amp (device)\tI/O amp (engine)\tnet amp\tput p50 us\tput p99 us\tL0 stall s\t")
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			put := putLatency(p)
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%d\t%d\t%.1f\t\n", run.Setup.Name, p.Phase, p.OpsPerSec,
				serverCPUPerOp(p), p.CPUPerOp-serverCPUPerOp(p), p.IOAmp, p.EngineIOAmp, p.NetAmp, put.P50, put.P99, p.StallSeconds)
		}
	}
	if err := tw.Flush(); err != nil {
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
	fmt.Fprintln(w, "\nSend-Index vs Build-Index (same run):")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "replicas\tphase\tthroughput x\tCPU/op lower x\tI/O amp (device) lower x\tI/O amp (engine) lower x\tnet amp lower x\t")
	for _, f := range []int{2, 3} {
		si, bi := r.run("send-index", f), r.run("build-index", f)
		if si == nil || bi == nil {
			continue
		}
		for i := range si.Phases {
			if i >= len(bi.Phases) {
				break
			}
			s, b := si.Phases[i], bi.Phases[i]
			fmt.Fprintf(tw, "%d\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", f, s.Phase, s.OpsPerSec/b.OpsPerSec,
				serverCPUPerOp(b)/serverCPUPerOp(s), b.IOAmp/s.IOAmp, b.EngineIOAmp/s.EngineIOAmp, b.NetAmp/s.NetAmp)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeCeilings(w)
}

// writeCeilings prints, from the same run, the most any index-shipping
// scheme could gain over Build-Index (see ceilings).
func (r *ReplResult) writeCeilings(w io.Writer) error {
	fmt.Fprintln(w, "\nceilings: the most Send-Index could gain over Build-Index in this run (CPU: No-Replication over Build-Index; I/O: Build-Index without its backups' merge reads):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "replicas\tphase\tCPU/op lower x\tI/O amp (device) lower x\tI/O amp (engine) lower x\t")
	var gcNotes []string
	for _, f := range []int{2, 3} {
		bi := r.run("build-index", f)
		if bi == nil {
			continue
		}
		nr := r.run("", 1)
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

func (r *ReplResult) run(mode string, factor int) *ReplRun {
	for i := range r.Runs {
		if r.Runs[i].Setup.Mode == mode && r.Runs[i].Setup.Factor == factor {
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

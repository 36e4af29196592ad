package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Options configure a run. Zero fields take the defaults in brackets.
type Options struct {
	Binary      string        // the tebis binary the cluster's processes run (required)
	Dir         string        // volumes, logs, report, plot and artifacts (required)
	Seed        uint64        // the schedule's and workloads' seed [the clock]
	Duration    time.Duration // the fault phase [1m]
	Cover       bool          // inject every nemesis kind at least once, even past Duration
	ZooKeepers  int           // 1 or 3 [3]
	Servers     int           // region servers, 3 to 5 [4]
	Replicas    int           // copies of each region [3]
	MinCopies   int           // copies holding a write before its acknowledgement [2]
	Replication string        // send-index or build-index [send-index]
	SyncMode    string        // sync or async [sync]
	L0Pairs     int           // L0 capacity in pairs [98304, the servers' default]
	Session     time.Duration // ZooKeeper session timeout of servers and masters [2s]
	Nemeses     []string      // the kinds to inject [every kind this machine can]
	Keys        int           // register keys [500]
	Clients     int           // register clients [6]
	Writers     int           // set writers [8]
	SetRate     int           // set inserts per second [2000]
	Network     string        // auto, netns or loopback [auto: netns when root]
	Progress    io.Writer     // progress lines [discarded]
}

func (o *Options) defaults() error {
	if o.Binary == "" || o.Dir == "" {
		return fmt.Errorf("torture: options need Binary and Dir")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.ZooKeepers, 3)
	def(&o.Servers, 4)
	def(&o.Replicas, 3)
	def(&o.MinCopies, 2)
	def(&o.L0Pairs, 98304)
	def(&o.Keys, 500)
	def(&o.Clients, 6)
	def(&o.Writers, 8)
	def(&o.SetRate, 2000)
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Duration == 0 {
		o.Duration = time.Minute
	}
	if o.Session == 0 {
		o.Session = 2 * time.Second
	}
	if o.Replication == "" {
		o.Replication = "send-index"
	}
	if o.SyncMode == "" {
		o.SyncMode = "sync"
	}
	if o.Network == "" {
		o.Network = "auto"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	switch {
	case o.ZooKeepers != 1 && o.ZooKeepers != 3:
		return fmt.Errorf("torture: %d ZooKeeper servers: want 1 or 3", o.ZooKeepers)
	case o.Servers < 3 || o.Servers > 5:
		return fmt.Errorf("torture: %d region servers: want 3 to 5", o.Servers)
	case o.Replicas < 2 || o.Replicas > o.Servers:
		return fmt.Errorf("torture: %d replicas with %d servers", o.Replicas, o.Servers)
	case o.MinCopies < 1 || o.MinCopies > o.Replicas:
		return fmt.Errorf("torture: min copies %d of %d replicas", o.MinCopies, o.Replicas)
	}
	return nil
}

// Result is what a run found.
type Result struct {
	summary
	Report   string // the summary table's file
	Timeline string // the timeline plot's file
}

// Valid reports whether the run found no violation.
func (r *Result) Valid() bool { return r.valid() }

// WriteTable writes the summary table.
func (r *Result) WriteTable(w io.Writer) error { return r.writeTable(w) }

// errLiveness: the cluster did not get whole again after a fault.
var errLiveness = errors.New("torture: cluster not whole after a fault")

// wholeWait bounds how long the cluster may take to be whole again after
// a fault is healed (a failover, seeds of restarted servers).
const wholeWait = 2 * time.Minute

// Run starts a cluster, runs the workloads under the nemeses for
// o.Duration, heals everything, checks, and writes the report into o.Dir.
// An error means the run could not be carried out; violations are in the
// result.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	// A run replayed into the same directory replaces the earlier one
	// (and its tmpfs mounts, if a killed run left them).
	if err := unmountUnder(filepath.Join(o.Dir, "volumes")); err != nil {
		return nil, err
	}
	for _, d := range []string{"zookeeper", "volumes", "logs", "artifacts", "summary.txt", "timeline.png"} {
		if err := os.RemoveAll(filepath.Join(o.Dir, d)); err != nil {
			return nil, fmt.Errorf("torture: %w", err)
		}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("torture: %w", err)
	}
	progress := func(format string, args ...any) { fmt.Fprintf(o.Progress, format+"\n", args...) }
	rng := rand.New(rand.NewPCG(o.Seed, 1))
	var n network = loopback{}
	switch o.Network {
	case "netns", "auto":
		if canNetns() {
			// The subnet's pick depends on the machine: a stream of its own.
			nn, err := newNetns(rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2)))
			if err != nil {
				return nil, err
			}
			n = nn
		} else if o.Network == "netns" {
			return nil, fmt.Errorf("torture: network namespaces need root, ip and tc")
		}
	case "loopback":
	default:
		return nil, fmt.Errorf("torture: network %q: want auto, netns or loopback", o.Network)
	}
	defer n.close()
	kinds, left, err := kindsFor(o.Nemeses, n.partitions(), os.Geteuid() == 0, o.ZooKeepers)
	if err != nil {
		return nil, err
	}
	progress("seed %d (replay with --seed %d); nemeses %v", o.Seed, o.Seed, kinds)
	for k, why := range left {
		progress("left out: %s: %s", k, why)
	}
	start := time.Now()
	c, err := startCluster(ctx, o, n, slices.Contains(kinds, diskFull))
	if err != nil {
		return nil, err
	}
	defer c.close()
	if err := c.waitWhole(ctx, wholeWait); err != nil {
		return nil, fmt.Errorf("torture: the new cluster: %w", err)
	}
	progress("cluster ready in %v: %d ZooKeeper, 2 masters, %d region servers; %s", time.Since(start).Round(time.Millisecond),
		o.ZooKeepers, o.Servers, n.describe())

	// The workloads, on clients of their own.
	start = time.Now()
	rec := newRecorder(start)
	reg := &registerLoad{rec: rec, keys: registerKeys(o.Keys)}
	set := &setLoad{rec: rec, rate: o.SetRate, deleteEvery: 10, elems: map[string]setState{}}
	regCl, err := c.newClient(ctx)
	if err != nil {
		return nil, err
	}
	defer regCl.Close()
	setCl, err := c.newClient(ctx)
	if err != nil {
		return nil, err
	}
	defer setCl.Close()
	wctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	for i := range o.Clients {
		wg.Add(1)
		go func() { defer wg.Done(); reg.run(wctx, i, regCl, o.Seed) }()
	}
	for i := range o.Writers {
		wg.Add(1)
		go func() { defer wg.Done(); set.run(wctx, i, o.Writers, setCl, o.Seed) }()
	}

	// The fault phase.
	sum := summary{Seed: o.Seed, Network: n.describe(), Faults: map[string]int{}, Checked: map[string]int{}, Violations: map[string]int{}}
	var spans []faultSpan
	nem := &nemesis{c: c, start: start}
	sched := newScheduler(o.Seed, kinds, o.Session, o.Cover)
	sleep(ctx, 3*time.Second) // a quiet start for the timeline
	for i := 0; ctx.Err() == nil && (rec.now() < o.Duration || len(sched.first) > 0); i++ {
		s := sched.next()
		// Every fault starts with the cluster whole: within its budget.
		if err := c.waitWhole(ctx, wholeWait); err != nil {
			if ctx.Err() == nil {
				sum.Violations["liveness"]++
				progress("LIVENESS: before fault %d: %v", i+1, err)
			}
			break
		}
		sleep(ctx, time.Duration(1000+rng.IntN(2000))*time.Millisecond)
		at, note, err := nem.inject(ctx, s)
		if errors.Is(err, errHeal) {
			sum.Violations["heal failed"]++
			progress("HEAL FAILED: fault %d %s: %v", i+1, s, err)
			break
		}
		if err != nil {
			progress("fault %d %s: not injected: %v", i+1, s.Kind, err)
			continue
		}
		sum.Faults[s.Kind]++
		healed := rec.now()
		// A session of a killed or cut-off process outlives the fault by
		// up to a session timeout: the master acts on it only then.
		sleep(ctx, o.Session+time.Second)
		werr := c.waitWhole(ctx, wholeWait)
		end := rec.now()
		spans = append(spans, faultSpan{Kind: s.Kind, Start: at, End: end, Note: note, Region: nem.region})
		progress("fault %d %s: %s; healed at %.1fs, whole %.1fs later", i+1, s.Kind, note, healed.Seconds(), (end - healed).Seconds())
		if werr != nil && ctx.Err() == nil {
			sum.Violations["liveness"]++
			progress("LIVENESS: after fault %d %s: %v", i+1, s.Kind, werr)
			break
		}
	}
	sleep(ctx, 3*time.Second) // a quiet end
	stopLoad()
	wg.Wait()
	sum.Duration = rec.now()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("torture: interrupted: %w", err)
	}

	// The checks.
	if err := c.heal(ctx); err != nil && sum.Violations["heal failed"] == 0 {
		sum.Violations["heal failed"]++
		progress("HEAL FAILED: at the end: %v", err)
	}
	if err := c.waitWhole(ctx, wholeWait); err != nil && sum.Violations["liveness"] == 0 {
		sum.Violations["liveness"]++
		progress("LIVENESS: at the end: %v", err)
	}
	artifacts := filepath.Join(o.Dir, "artifacts")
	sres, err := set.check(ctx, setCl, time.Minute)
	if err != nil {
		sum.Violations["final scan failed"]++
		progress("FINAL SCAN FAILED: %v", err)
	}
	sum.Checked["set"] = sres.inserted
	sum.Checked["deletes"] = sres.deleted
	sum.Violations["set lost"] = len(sres.lost)
	sum.Violations["set unexpected"] = len(sres.unexpected)
	sum.Violations["deletes resurrected"] = len(sres.resurrected)
	progress("set: %d acknowledged inserts, %d acknowledged deletes, %d scanned: lost %d, unexpected %d, resurrected %d",
		sres.inserted, sres.deleted, sres.scanned, len(sres.lost), len(sres.unexpected), len(sres.resurrected))
	rres, err := reg.check(artifacts, time.Minute)
	if err != nil {
		return nil, err
	}
	sum.Checked["register"] = rres.checked
	sum.Violations["register"] = len(rres.bad)
	if rres.unknown {
		progress("register: the check of keys %v timed out (1 minute each): linearizability neither proved nor refuted (their histories: artifacts/register-undecided.txt)", rres.undecided)
		sum.Violations["register check timed out"] = 1
	}
	progress("register: %d operations, keys not linearizable: %v", rres.checked, rres.bad)

	rec.mu.Lock()
	sum.Ops, sum.Failed = rec.ops, rec.failed
	samples := rec.samples
	for _, f := range rec.firsts {
		progress("unexpected error: %s", f)
	}
	rec.mu.Unlock()
	sum.Unavail = unavailabilityByKind(samples, spans)
	res := &Result{summary: sum, Report: filepath.Join(o.Dir, "summary.txt"), Timeline: filepath.Join(o.Dir, "timeline.png")}
	if !res.valid() {
		res.Artifacts = artifacts
		if err := writeEvidence(artifacts, c.logFiles(), sres, rres, spans); err != nil {
			return nil, err
		}
	}
	if err := writeTimeline(res.Timeline, samples, spans, fmt.Sprintf("tebis torture, seed %d", o.Seed)); err != nil {
		return nil, err
	}
	var b strings.Builder
	if err := res.writeTable(&b); err != nil {
		return nil, err
	}
	if err := os.WriteFile(res.Report, []byte(b.String()), 0o644); err != nil {
		return nil, fmt.Errorf("torture: %w", err)
	}
	return res, nil
}

// writeEvidence puts a violation's evidence in dir: every process's log,
// the set check's findings and the faults.
func writeEvidence(dir string, logs []string, s setResult, r registerResult, spans []faultSpan) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("torture: %w", err)
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue // a process that never started
		}
		name := filepath.Base(l)
		if name == "zk.log" {
			name = filepath.Base(filepath.Dir(l)) + ".log"
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("torture: %w", err)
		}
	}
	var b strings.Builder
	for _, f := range spans {
		fmt.Fprintf(&b, "fault %s [%.3fs, %.3fs]: %s\n", f.Kind, f.Start.Seconds(), f.End.Seconds(), f.Note)
	}
	fmt.Fprintf(&b, "register: keys not linearizable: %v\n", r.bad)
	for _, l := range []struct {
		name string
		keys []string
	}{{"lost", s.lost}, {"unexpected", s.unexpected}, {"resurrected", s.resurrected}} {
		fmt.Fprintf(&b, "set %s (%d):\n", l.name, len(l.keys))
		for _, k := range l.keys {
			fmt.Fprintf(&b, "  %s\n", k)
		}
	}
	return os.WriteFile(filepath.Join(dir, "findings.txt"), []byte(b.String()), 0o644)
}

package region_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/testseed"
)

// linResult is what one configuration's run found.
type linResult struct {
	config     string
	ops        int            // operations in the checked history
	byKind     map[string]int // client operations that returned, by kind
	indeterm   int            // writes with an unknown outcome
	bgPuts     int            // acknowledged background puts
	faults     map[faultKind]int
	unavail    map[faultKind]time.Duration // longest, per kind
	violations []string
	liveness   []string
	counters   engineCounters // region 1's last primary's, at the end
	artifacts  string
}

// TestE2ELinearizable: real clusters (ZooKeeper, two masters, 3 server
// processes) in configurations of the matrix (sync/async, Send-Index/
// Build-Index, shm/tcp, 2-/3-way; linPlan says which and how long), at
// engine sizes where log segments fill without partial flushes
// (linEngineArgs). In each, checked clients put, delete, get, multi-get and
// scan 12 keys of region 1, two of them lagging the map (lagSource), while
// background writers fill L0 with other keys and faults chosen by the seed
// hit region 1's group (faultKind). The history (a failed or timed-out
// write open to its end) is checked per key with porcupine, and every
// background key must read as its last acknowledged value afterwards.
func TestE2ELinearizable(t *testing.T) {
	seed := testseed.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 17))
	plan := linPlanFromEnv(t, rng)
	var names []string
	for _, c := range plan.configs {
		names = append(names, c.Name())
	}
	t.Logf("configurations %v, %v of checked history each, L0 %d pairs; TEBIS_LIN_CONFIGS=all runs every one", names, plan.duration, plan.l0)
	began := time.Now()
	var results []linResult
	for round := 0; ; round++ {
		for _, cfg := range plan.configs {
			if round > 0 && time.Since(began) > plan.total {
				break
			}
			// A go test timeout would kill the test with its cleanups
			// undone (servers and ZooKeeper left running).
			if d, ok := t.Deadline(); ok && time.Until(d) < plan.duration+8*time.Minute {
				msg := fmt.Sprintf("%s and the rest not run: the test's deadline (-timeout) is %v away", cfg.Name(), time.Until(d).Round(time.Second))
				if round == 0 {
					t.Errorf("%s (a configuration needs its duration and up to 8 minutes more)", msg)
				} else {
					t.Log(msg)
				}
				break
			}
			faults, left := plan.faultsFor(cfg)
			for _, k := range slices.Sorted(maps.Keys(left)) {
				t.Logf("%s: fault %s left out: known unsafe (issue 17 %s; TEBIS_LIN_UNSAFE=1 injects it)", cfg.Name(), k, left[k])
			}
			if len(faults) == 0 {
				t.Logf("%s: every fault is known unsafe: not run", cfg.Name())
				continue
			}
			// Each configuration its own schedule; the same configuration
			// and seed+round replay it.
			runSeed := linRunSeed(seed+uint64(round), cfg)
			t.Run(fmt.Sprintf("%s#%d", cfg.Name(), round), func(t *testing.T) {
				res := runLinearizable(t, plan, cfg, faults, seed+uint64(round), runSeed)
				results = append(results, res)
			})
		}
		if plan.total == 0 || time.Since(began) > plan.total {
			break
		}
	}
	summarizeLin(t, results)
}

// linRunSeed is the seed of configuration cfg's run under test seed seed.
func linRunSeed(seed uint64, cfg linConfig) uint64 {
	h := fnv.New64a()
	h.Write([]byte(cfg.Name()))
	return seed ^ h.Sum64()
}

// linHealWait bounds the wait for the groups to be whole again after a
// fault (a restarted server re-seeded, a joining backup attached).
const linHealWait = 30 * time.Second

// runLinearizable runs configuration cfg for plan.duration of checked
// history, injecting faults of the given kinds.
func runLinearizable(t *testing.T, plan linPlan, cfg linConfig, faults []faultKind, replay, seed uint64) linResult {
	t.Logf("%s: run seed %d (replay this run alone: TEBIS_LIN_CONFIGS=%s TEBIS_SEED=%d TEBIS_LIN_UNSAFE=%s); faults %v",
		cfg.Name(), seed, cfg.Name(), replay, map[bool]string{true: "1"}[plan.unsafe], faults)
	rng := rand.New(rand.NewPCG(seed, 1))
	res := linResult{config: cfg.Name(), faults: map[faultKind]int{}, unavail: map[faultKind]time.Duration{}}
	began := time.Now()
	c := startLinCluster(t, cfg, plan.l0)
	t.Logf("cluster ready in %v: %d servers, %d-way %s, %s", time.Since(began), cfg.servers, cfg.Replicas, cfg.replication, cfg.Transport)
	for _, k := range linKeys() {
		if c.cl.Map().Lookup([]byte(k)).ID != 1 {
			t.Fatalf("key %s is not in region 1", k)
		}
	}
	session, err := time.ParseDuration(zkSession())
	if err != nil {
		t.Fatal(err)
	}

	h := newLinHistory()
	stop := make(chan struct{})
	done := make(chan struct{})
	const nChecked, nLagging = 6, 2
	var lag []*lagSource
	nDone := 0
	for id := nChecked - nLagging; id < nChecked; id++ {
		h.lagging[id] = true // before any client records
	}
	for id := range nChecked {
		var src regionmap.Source = c.zs
		if id >= nChecked-nLagging {
			ls := &lagSource{zs: c.zs}
			lag = append(lag, ls)
			src = ls
		}
		cl := open(t, src, cfg.Transport)
		nDone++
		go func() {
			defer func() { done <- struct{}{} }()
			runCheckedClient(h, id, cl, seed, stop)
		}()
	}
	bgCl := open(t, c.zs, cfg.Transport)
	bg := startBgWriters(bgCl, 8, 3*plan.l0/8, seed, stop)
	stopped := false
	stopClients := func() {
		if stopped {
			return
		}
		stopped = true
		close(stop)
		for range nDone {
			<-done
		}
		bg.wg.Wait()
	}
	defer stopClients()

	// Faults until the end of the history; each starts with the groups
	// whole and region 1 serving.
	in := &injector{t: t, c: c, h: h, rng: rng, lag: lag, session: session}
	var events []faultEvent
	deadline := time.Now().Add(plan.duration)
	if !c.copiesComplete(t, linHealWait) {
		t.Fatalf("region 1's backups not all complete %v after the cluster was ready", linHealWait)
	}
	time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
	for time.Now().Before(deadline) {
		k := faults[rng.IntN(len(faults))]
		note, err := in.inject(k)
		at := in.hit
		if at < 0 {
			at = h.now()
		}
		ev := faultEvent{kind: k, at: at, note: note}
		res.faults[k]++
		if err != nil {
			res.liveness = append(res.liveness, fmt.Sprintf("%s (%s): %v", k, note, err))
			t.Logf("fault %s: %s: %v", k, note, err)
			events = append(events, ev)
			break
		}
		if _, ok := c.waitMapFor(t, linHealWait, healed); !ok {
			res.liveness = append(res.liveness, fmt.Sprintf("%s (%s): groups not whole %v after", k, note, linHealWait))
		}
		if !probeRegion1(t, c, linHealWait) {
			res.liveness = append(res.liveness, fmt.Sprintf("%s (%s): region 1 not serving %v after", k, note, linHealWait))
		}
		// Whole in the map is not yet whole: a backup that joined holds a
		// complete copy only from its stream's IN_SYNC. The next fault
		// starts within the group's budget (a double failover needs the
		// third copy complete).
		if !c.copiesComplete(t, linHealWait) {
			res.liveness = append(res.liveness, fmt.Sprintf("%s (%s): region 1's backups not all complete %v after", k, note, linHealWait))
		}
		ev.end = h.now()
		events = append(events, ev)
		t.Logf("fault %d %s at %v: %s; whole again after %v", len(events), k, time.Duration(at), note, time.Duration(ev.end-at))
		if len(res.liveness) > 0 {
			break
		}
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
	}
	stopClients()

	// Final reads, in the history too, by a client that never saw a fault.
	rd := open(t, c.zs, cfg.Transport)
	for _, k := range linKeys() {
		for try := 0; ; try++ {
			fc, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			call := h.now()
			v, err := rd.Get(fc, []byte(k))
			ret := h.now()
			cancel()
			if err == nil || errors.Is(err, client.ErrNotFound) {
				h.record(nChecked, "get", nil, map[string]linOutput{k: {Value: string(v), Found: err == nil}}, call, ret, nil)
				break
			}
			if try == 20 {
				res.liveness = append(res.liveness, fmt.Sprintf("final read of %s: %v", k, err))
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	res.violations = append(res.violations, bg.verify(t, rd)...)
	res.bgPuts = bg.puts
	if cur := c.load(t); cur != nil {
		if e, err := countersVia(t, c, primaryOf(cur, 1)); err == nil {
			res.counters = e
		}
	}

	// The checked history: failed writes open to its end.
	end := h.now() + 1
	history := slices.Clone(h.ops)
	for _, op := range h.unknown {
		op.Return = end
		history = append(history, op)
	}
	res.ops, res.indeterm, res.byKind = len(history), len(h.unknown), h.byKind

	// Longest unavailability per fault kind.
	for _, ev := range events {
		e := ev.end
		if e == 0 {
			e = end
		}
		res.unavail[ev.kind] = max(res.unavail[ev.kind], longestOutage(h.ops, ev.at, e, end))
	}

	start := time.Now()
	result := porcupine.CheckOperationsTimeout(linModel, history, 120*time.Second)
	var info porcupine.LinearizationInfo
	verbose := porcupine.Unknown
	if result == porcupine.Illegal { // again, for the partial linearizations
		verbose, info = porcupine.CheckOperationsVerbose(linModel, history, 120*time.Second)
	}
	t.Logf("porcupine: %s on %d operations in %v", result, len(history), time.Since(start))
	switch result {
	case porcupine.Unknown:
		res.liveness = append(res.liveness, fmt.Sprintf("porcupine could not decide within 120 s whether the %d operations are linearizable", len(history)))
	case porcupine.Illegal:
		var keys []string
		if verbose == porcupine.Illegal {
			keys = describeIllegal(t, history, info)
		}
		for _, k := range keys {
			res.violations = append(res.violations, fmt.Sprintf("key %s: history not linearizable", k))
		}
		if len(keys) == 0 {
			res.violations = append(res.violations, "history not linearizable (the keys were not identified within 120 s)")
		}
		var notes []porcupine.Annotation
		for i, ev := range events {
			e := ev.end
			if e == 0 {
				e = end
			}
			notes = append(notes, porcupine.Annotation{Tag: "fault", Start: ev.at, End: e,
				Description: fmt.Sprintf("%d: %s", i+1, ev.kind), Details: ev.note})
		}
		info.AddAnnotations(notes)
	}
	logLinResult(t, res, h)
	if len(res.violations) > 0 || len(res.liveness) > 0 || os.Getenv("TEBIS_LIN_KEEP") == "1" {
		res.artifacts = saveLinArtifacts(t, c, cfg, replay, result, info, res)
		for _, v := range res.violations {
			t.Errorf("%s: violation: %s", cfg.Name(), v)
		}
		for _, l := range res.liveness {
			t.Errorf("%s: liveness: %s", cfg.Name(), l)
		}
		if len(res.violations) > 0 || len(res.liveness) > 0 {
			t.Errorf("%s: artifacts (history visualization, process logs) in %s", cfg.Name(), res.artifacts)
		} else {
			t.Logf("%s: artifacts (process logs) in %s", cfg.Name(), res.artifacts)
		}
	}
	return res
}

// longestOutage returns the longest time, from a moment t in [from, to],
// until an operation called at or after t returned a result (ops hold only
// operations that did); none returning counts until end.
func longestOutage(ops []porcupine.Operation, from, to, end int64) time.Duration {
	ok := slices.Clone(ops)
	sort.Slice(ok, func(i, j int) bool { return ok[i].Call < ok[j].Call })
	// firstRet[i]: the earliest return among ok[i:].
	firstRet := make([]int64, len(ok)+1)
	firstRet[len(ok)] = end
	for i := len(ok) - 1; i >= 0; i-- {
		firstRet[i] = min(ok[i].Return, firstRet[i+1])
	}
	gap := func(t int64) int64 {
		i := sort.Search(len(ok), func(i int) bool { return ok[i].Call >= t })
		return max(firstRet[i]-t, 0)
	}
	// The gap only grows right after a call leaves the candidates.
	worst := gap(from)
	for _, op := range ok {
		if op.Call >= from && op.Call < to {
			worst = max(worst, gap(op.Call+1))
		}
	}
	return time.Duration(worst)
}

// countersVia asks server name for its engine counters.
func countersVia(t *testing.T, c *linCluster, name string) (engineCounters, error) {
	cl, err := client.Open(ctx(t), client.Config{Map: c.zs, Transport: c.cfg.Transport})
	if err != nil {
		return engineCounters{}, err
	}
	defer cl.Close()
	return counters(cl, name)
}

// probeRegion1 waits up to d for a put to region 1 (outside the checked
// keys) to succeed.
func probeRegion1(t *testing.T, c *linCluster, d time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		pc, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.cl.Put(pc, []byte("k000000.probe"), []byte("p"))
		cancel()
		if err == nil {
			return true
		}
	}
	return false
}

func logLinResult(t *testing.T, res linResult, h *linHistory) {
	t.Helper()
	var unav []string
	for _, k := range slices.Sorted(maps.Keys(res.unavail)) {
		unav = append(unav, fmt.Sprintf("%s %v", k, res.unavail[k].Round(time.Millisecond)))
	}
	t.Logf("%s: %d operations checked (%d writes indeterminate; returned by kind %v), %d acknowledged background puts; faults %v; longest unavailability %s; violations %d; client errors %v; region 1 primary's engine at the end: %+v",
		res.config, res.ops, res.indeterm, res.byKind, res.bgPuts, res.faults, strings.Join(unav, ", "), len(res.violations), h.errs, res.counters)
	for _, s := range h.samples {
		t.Logf("unexpected client error: %s", s)
	}
}

// saveLinArtifacts writes the porcupine visualization and every process's
// log into a new directory (under TEBIS_LIN_ARTIFACTS, or a temporary one
// that outlives the test) and returns it.
func saveLinArtifacts(t *testing.T, c *linCluster, cfg linConfig, seed uint64, result porcupine.CheckResult, info porcupine.LinearizationInfo, res linResult) string {
	t.Helper()
	parent := os.Getenv("TEBIS_LIN_ARTIFACTS")
	if parent != "" {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			t.Errorf("artifacts: %v", err)
		}
	}
	dir, err := os.MkdirTemp(parent, "tebis-lin-"+cfg.Name()+"-*")
	if err != nil {
		t.Errorf("artifacts: %v", err)
		return ""
	}
	if result == porcupine.Illegal && len(info.PartialLinearizations()) > 0 {
		if err := porcupine.VisualizePath(linModel, info, filepath.Join(dir, "history.html")); err != nil {
			t.Errorf("visualization: %v", err)
		}
	}
	c.saveLogs(t, dir)
	summary := fmt.Sprintf("configuration %s\nreplay: TEBIS_LIN_CONFIGS=%[1]s TEBIS_SEED=%d\nclients 4 and 5 lag the map; client 6 made the final reads\nviolations:\n  %s\nliveness:\n  %s\n", cfg.Name(), seed,
		strings.Join(res.violations, "\n  "), strings.Join(res.liveness, "\n  "))
	if err := os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(summary), 0o644); err != nil {
		t.Errorf("artifacts: %v", err)
	}
	return dir
}

// summarizeLin logs the totals over every configuration run.
func summarizeLin(t *testing.T, results []linResult) {
	t.Helper()
	var ops, viol, live int
	faults := map[faultKind]int{}
	unavail := map[faultKind]time.Duration{}
	var lines []string
	for _, r := range results {
		ops += r.ops
		viol += len(r.violations)
		live += len(r.liveness)
		for k, n := range r.faults {
			faults[k] += n
		}
		for k, d := range r.unavail {
			unavail[k] = max(unavail[k], d)
		}
		lines = append(lines, fmt.Sprintf("%s: %d ops, faults %v, %d violations, %d liveness failures %s", r.config, r.ops, r.faults, len(r.violations), len(r.liveness), r.artifacts))
	}
	sort.Strings(lines)
	var unav []string
	for _, k := range slices.Sorted(maps.Keys(unavail)) {
		unav = append(unav, fmt.Sprintf("%s %v", k, unavail[k].Round(time.Millisecond)))
	}
	t.Logf("summary: %d runs, %d operations checked, faults %v, %d violations, %d liveness failures; longest unavailability %s\n  %s",
		len(results), ops, faults, viol, live, strings.Join(unav, ", "), strings.Join(lines, "\n  "))
}

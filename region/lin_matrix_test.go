package region_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// linConfig is one cell of the configuration matrix the linearizability
// fault test runs.
type linConfig struct {
	Sync        bool   // sync (durable before the reply) or async mode
	SendIndex   bool   // Send-Index, or Build-Index
	Transport   string // shm or tcp: clients and replication
	Replicas    int    // 2 or 3 copies, primary included
	servers     int    // always 3: a spare to heal 2-way groups onto
	replication string
}

// Name is how the configuration is asked for (TEBIS_LIN_CONFIGS):
// sync-send-shm-3, async-build-tcp-2, ...
func (c linConfig) Name() string {
	mode, repl := "async", "build"
	if c.Sync {
		mode = "sync"
	}
	if c.SendIndex {
		repl = "send"
	}
	return fmt.Sprintf("%s-%s-%s-%d", mode, repl, c.Transport, c.Replicas)
}

// linMatrix is every configuration: sync/async x Send-Index/Build-Index x
// shm/tcp x 2-/3-way.
func linMatrix() []linConfig {
	var out []linConfig
	for _, sync := range []bool{true, false} {
		for _, send := range []bool{true, false} {
			for _, tr := range []string{"shm", "tcp"} {
				for _, n := range []int{3, 2} {
					c := linConfig{Sync: sync, SendIndex: send, Transport: tr, Replicas: n, servers: 3, replication: "build-index"}
					if send {
						c.replication = "send-index"
					}
					out = append(out, c)
				}
			}
		}
	}
	return out
}

// knownUnsafe lists the configurations (path.Match patterns over
// linConfig.Name) and fault kinds under which this build is known to
// violate linearizability (issue 17's finding in Finding). Runs leave
// them out and say so, unless TEBIS_LIN_UNSAFE=1 (make torture sets it).
// Each entry is removed by the fix of its finding: once they are all fixed
// this list is empty.
var knownUnsafe = []struct {
	Configs string
	Faults  []faultKind // nil: every fault
	Finding string
}{}

// unsafeFaults returns the fault kinds known unsafe in c, with the findings.
func unsafeFaults(c linConfig) map[faultKind]string {
	out := map[faultKind]string{}
	for _, u := range knownUnsafe {
		if ok, _ := path.Match(u.Configs, c.Name()); !ok {
			continue
		}
		kinds := u.Faults
		if kinds == nil {
			kinds = allFaults
		}
		for _, k := range kinds {
			if out[k] != "" {
				out[k] += ", "
			}
			out[k] += u.Finding
		}
	}
	return out
}

// linPlan is what one run of TestE2ELinearizable does, from the
// environment:
//
//	TEBIS_LIN_CONFIGS  "" (a seeded pick of TEBIS_LIN_PICK, default 2),
//	                   "all", or names (comma-separated; patterns allowed)
//	TEBIS_LIN_DURATION the checked history of each configuration (default 20s)
//	TEBIS_LIN_TOTAL    keep running picked configurations until this much
//	                   time has passed (make torture); default: one pass
//	TEBIS_LIN_L0       L0 capacity in pairs (default 4096, see linEngineArgs)
//	TEBIS_LIN_UNSAFE   1: do not leave out knownUnsafe faults
//	TEBIS_LIN_FAULTS   inject only these fault kinds (comma-separated)
//	TEBIS_LIN_ARTIFACTS directory for the artifacts of a violation
//	                   (default: a new temporary directory)
//	TEBIS_LIN_KEEP     1: write the artifacts of every run, not only of
//	                   a violation or liveness failure
type linPlan struct {
	configs  []linConfig
	duration time.Duration
	total    time.Duration
	l0       int
	unsafe   bool
	only     []faultKind // TEBIS_LIN_FAULTS: inject only these kinds
}

func linPlanFromEnv(t *testing.T, rng *rand.Rand) linPlan {
	t.Helper()
	p := linPlan{duration: 20 * time.Second, l0: 4096}
	dur := func(name string, d *time.Duration) {
		if v := os.Getenv(name); v != "" {
			var err error
			if *d, err = time.ParseDuration(v); err != nil || *d <= 0 {
				t.Fatalf("%s=%q: want a positive duration", name, v)
			}
		}
	}
	dur("TEBIS_LIN_DURATION", &p.duration)
	dur("TEBIS_LIN_TOTAL", &p.total)
	if v := os.Getenv("TEBIS_LIN_L0"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 64 {
			t.Fatalf("TEBIS_LIN_L0=%q: want a pair count >= 64", v)
		}
		p.l0 = n
	}
	p.unsafe = os.Getenv("TEBIS_LIN_UNSAFE") == "1"
	if v := os.Getenv("TEBIS_LIN_FAULTS"); v != "" {
		for _, f := range strings.Split(v, ",") {
			k := faultKind(strings.TrimSpace(f))
			if !slices.Contains(allFaults, k) {
				t.Fatalf("TEBIS_LIN_FAULTS: no fault %q (faults: %v)", k, allFaults)
			}
			p.only = append(p.only, k)
		}
	}
	all := linMatrix()
	switch v := os.Getenv("TEBIS_LIN_CONFIGS"); v {
	case "":
		pick := 2
		if s := os.Getenv("TEBIS_LIN_PICK"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("TEBIS_LIN_PICK=%q", s)
			}
			pick = n
		}
		// From the configurations with a fault left to inject.
		var can []linConfig
		for _, c := range all {
			if f, _ := p.faultsFor(c); len(f) > 0 {
				can = append(can, c)
			}
		}
		for _, i := range rng.Perm(len(can))[:min(pick, len(can))] {
			p.configs = append(p.configs, can[i])
		}
	case "all":
		p.configs = all
	default:
		for _, pat := range strings.Split(v, ",") {
			n := len(p.configs)
			for _, c := range all {
				if ok, _ := path.Match(strings.TrimSpace(pat), c.Name()); ok && !slices.Contains(p.configs, c) {
					p.configs = append(p.configs, c)
				}
			}
			if len(p.configs) == n {
				t.Fatalf("TEBIS_LIN_CONFIGS: %q names no configuration (names look like %s)", pat, all[0].Name())
			}
		}
	}
	return p
}

// faultsFor returns the fault kinds a run of c may inject: every kind that
// c can survive (a double failover needs 3 copies), less the knownUnsafe
// ones unless asked for (those are in left, with their findings).
func (p linPlan) faultsFor(c linConfig) (faults []faultKind, left map[faultKind]string) {
	unsafe := unsafeFaults(c)
	left = map[faultKind]string{}
	for _, k := range allFaults {
		if k == faultDoubleFailover && c.Replicas < 3 {
			continue // two copies survive one failure, not two
		}
		if p.only != nil && !slices.Contains(p.only, k) {
			continue
		}
		if f := unsafe[k]; f != "" && !p.unsafe {
			left[k] = f
			continue
		}
		faults = append(faults, k)
	}
	return faults, left
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/google/pprof/profile"
	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/child"
	"github.com/tebis-go/tebis/internal/procstat"
	"github.com/tebis-go/tebis/tools/ycsb"
	"go.uber.org/zap"
)

// ReplSetup is one configuration of `tebis bench replication`.
type ReplSetup struct {
	Name   string `json:"name"`
	Mode   string `json:"mode"`   // "", "send-index" or "build-index"
	Factor int    `json:"factor"` // replicas per region (1: no replication)
	// SharedL0 gives every replica (primaries and Build-Index backups,
	// whose L0 is their own engine's) an L0 of L0Pairs/Factor pairs: the
	// replicas of a region share one L0 budget, the memory Send-Index
	// needs (the paper's Build-IndexRL).
	SharedL0 bool `json:"shared_l0,omitempty"`
}

// l0Pairs is the L0 capacity of each of the setup's replicas.
func (s ReplSetup) l0Pairs(l0 int) int {
	if s.SharedL0 {
		return l0 / s.Factor
	}
	return l0
}

// DefaultReplSetups are the paper's configurations: no replication, then
// Build-Index and Send-Index with 2 and 3 replicas.
var DefaultReplSetups = []ReplSetup{
	{Name: "no-rep", Factor: 1},
	{Name: "build-index-2", Mode: "build-index", Factor: 2},
	{Name: "send-index-2", Mode: "send-index", Factor: 2},
	{Name: "build-index-3", Mode: "build-index", Factor: 3},
	{Name: "send-index-3", Mode: "send-index", Factor: 3},
}

// ReplSetups are the setups `tebis bench replication --setups` may
// name: DefaultReplSetups and the memory-equal Build-Index ones
// (build-index-rl-N: the paper's Build-IndexRL, section 5.5).
var ReplSetups = append(append([]ReplSetup(nil), DefaultReplSetups...),
	ReplSetup{Name: "build-index-rl-2", Mode: "build-index", Factor: 2, SharedL0: true},
	ReplSetup{Name: "build-index-rl-3", Mode: "build-index", Factor: 3, SharedL0: true},
)

// ReplConfig configures a replication benchmark: 3 region server
// processes on this host, 3 regions (one primary per server), the workload
// through the client.
type ReplConfig struct {
	Bench       Config      // workload, threads, sync mode, L0, growth factor, seed, Dir, Keep
	Setups      []ReplSetup // default DefaultReplSetups
	Binary      string      // the tebis binary
	SegmentSize string      // servers' segment size (default 2MiB)
	Transport   string      // client and server-to-server transport (default shm)
	// ServerArgs are extra flags for every server (e.g. --spin-time 0).
	ServerArgs []string
	// ServerMemory, if set, limits each server process's memory, page
	// cache included, in a cgroup of its own (the paper limits the buffer
	// cache to a quarter of the data set): device I/O then shows what a
	// data set larger than memory costs.
	ServerMemory int64
	// RegionsPerServer is how many regions each server is primary of
	// (default 1): the map has 3 times as many regions, split evenly over
	// the loaded keys, each with its backups on the next servers round
	// the ring.
	RegionsPerServer int
	// Rounds runs the setups this many times (0: once), each round on
	// fresh servers, every other round in reverse order (roundOrder): on
	// a host whose speed drifts, each ratio is then taken within a round
	// and the report gives their median and range.
	Rounds int
}

// ServerMemory is one server process's peak memory over a setup's run.
type ServerMemory struct {
	Name string `json:"name"`
	// PeakRSS is the process's peak resident memory (VmHWM), in bytes.
	PeakRSS uint64 `json:"peak_rss_bytes"`
	// CgroupPeak is its memory cgroup's peak charge, page cache included,
	// in bytes (only with ReplConfig.ServerMemory; 0 if the kernel does
	// not report it).
	CgroupPeak uint64 `json:"cgroup_peak_bytes,omitempty"`
}

// ReplRun is one setup's results.
type ReplRun struct {
	Setup  ReplSetup     `json:"setup"`
	Phases []PhaseResult `json:"phases"`
	// Round is the round the run belongs to (1-based; ReplConfig.Rounds).
	Round int `json:"round,omitempty"`
	// CPUSplit is the servers' CPU seconds by component (pprof label) over
	// the whole run (load and run phases).
	CPUSplit map[string]float64 `json:"cpu_split_seconds"`
	// L0Pairs is each replica's L0 capacity in this setup.
	L0Pairs int `json:"l0_pairs"`
	// Regions is the number of regions of the map.
	Regions int `json:"regions"`
	// Memory is every server's peak memory over the run (all phases),
	// read just before it stops; PeakRSSSum sums their PeakRSS.
	Memory     []ServerMemory `json:"server_memory"`
	PeakRSSSum uint64         `json:"peak_rss_sum_bytes"`
}

// ReplResult is a replication benchmark's results.
type ReplResult struct {
	Started time.Time `json:"started"`
	Seed    uint64    `json:"seed"`
	Sizes   string    `json:"kv_sizes"`
	Records int64     `json:"recordcount"`
	Ops     int64     `json:"operationcount"`
	Threads int       `json:"threads"`
	L0Pairs int       `json:"l0_pairs"`
	Growth  int       `json:"growth_factor"`
	// ServerProcs and ClientProcs are Bench's: each server's GOMAXPROCS
	// and this process's while a setup runs (0: not set).
	ServerProcs int `json:"server_procs,omitempty"`
	ClientProcs int `json:"client_procs,omitempty"`
	// Rounds is how many times every setup ran (ReplConfig.Rounds).
	Rounds int       `json:"rounds,omitempty"`
	Runs   []ReplRun `json:"runs"`
}

// RunReplication runs every setup in turn, each on fresh servers.
func RunReplication(ctx context.Context, cfg ReplConfig) (*ReplResult, error) {
	if cfg.Binary == "" {
		return nil, fmt.Errorf("%w: replication bench needs the tebis binary", ErrBadConfig)
	}
	if len(cfg.Setups) == 0 {
		cfg.Setups = DefaultReplSetups
	}
	if cfg.SegmentSize == "" {
		cfg.SegmentSize = "2MiB"
	}
	if cfg.Transport == "" {
		cfg.Transport = "shm"
	}
	if cfg.RegionsPerServer == 0 {
		cfg.RegionsPerServer = 1
	}
	b := cfg.Bench.withDefaults()
	b.Engines = []string{"server"}
	b.DiskBWBytes = 0
	res := &ReplResult{Started: time.Now(), Seed: b.Seed, Sizes: b.Sizes.String(), Records: b.RecordCount, Ops: b.OperationCount,
		Threads: b.Threads, L0Pairs: b.L0Pairs, Growth: b.GrowthFactor, ServerProcs: b.ServerProcs, ClientProcs: b.ClientProcs, Rounds: max(cfg.Rounds, 1)}
	if cfg.Rounds < 0 || cfg.Rounds > MaxRounds {
		return nil, fmt.Errorf("%w: %d rounds (0 to %d)", ErrBadConfig, cfg.Rounds, MaxRounds)
	}
	if err := b.checkProcs(); err != nil {
		return nil, err
	}
	parent := b.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	work, err := os.MkdirTemp(parent, "tebis-bench-repl-")
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if !b.Keep {
		defer func() { _ = os.RemoveAll(work) }()
	}
	for _, setup := range cfg.Setups {
		if setup.Factor < 1 || setup.Factor > 3 || (setup.Factor > 1) != (setup.Mode != "") {
			return res, fmt.Errorf("%w: setup %+v (factor 1-3; a mode exactly when replicating)", ErrBadConfig, setup)
		}
		if setup.l0Pairs(b.L0Pairs) < 16 {
			return res, fmt.Errorf("%w: setup %s: L0 of %d pairs per replica (at least 16)", ErrBadConfig, setup.Name, setup.l0Pairs(b.L0Pairs))
		}
	}
	for round := 1; round <= res.Rounds; round++ {
		for _, setup := range roundOrder(cfg.Setups, round) {
			b.Logger.Info("replication setup", zap.String("setup", setup.Name), zap.Int("round", round))
			dir := roundDir(filepath.Join(work, setup.Name), res.Rounds, round)
			run, err := runReplSetup(ctx, cfg, b, setup, dir)
			if err != nil {
				return res, fmt.Errorf("%s (round %d): %w", setup.Name, round, err)
			}
			run.Round = round
			res.Runs = append(res.Runs, *run)
			if !b.Keep {
				_ = os.RemoveAll(dir)
			}
		}
	}
	return res, nil
}

// replServerSpec is how runReplSetup starts server e of setup (its data
// under dir, its CPU profile to profile).
func replServerSpec(cfg ReplConfig, b Config, setup ReplSetup, e regionmap.Server, dir, mapFile, profile string) child.Spec {
	mode := "async"
	if b.Sync {
		mode = "sync"
	}
	args := []string{"--log-level", "warn", "server", "--name", e.Name, "--data-dir", filepath.Join(dir, e.Name),
		"--shm", e.Shm, "--tcp", e.TCP, "--map-file", mapFile, "--sync-mode", mode, "--segment-size", cfg.SegmentSize,
		"--l0-pairs", strconv.Itoa(setup.l0Pairs(b.L0Pairs)), "--growth-factor", strconv.Itoa(b.GrowthFactor),
		"--replication-transport", cfg.Transport, "--cpuprofile", profile}
	if setup.Factor == 1 {
		// The paper's No-Replication acknowledges from memory (async):
		// without the flag a lone primary syncs every write.
		args = append(args, "--unsafe-lone-ack")
	}
	args = append(args, cfg.ServerArgs...)
	return child.Spec{Argv: append([]string{cfg.Binary}, args...), Env: serverEnv(TargetOptions{ServerProcs: b.ServerProcs}, os.Environ()), Stderr: os.Stderr}
}

// replServer is one started server process.
type replServer struct {
	entry   regionmap.Server
	proc    *child.Process // nil once stopped
	profile string
	cg      *memCgroup // with ReplConfig.ServerMemory
}

func runReplSetup(ctx context.Context, cfg ReplConfig, b Config, setup ReplSetup, dir string) (*ReplRun, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	m, err := replMap(dir, b, setup, cfg.RegionsPerServer)
	if err != nil {
		return nil, err
	}
	mapFile := filepath.Join(dir, "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		return nil, err
	}
	defer setProcs(b.ClientProcs)()
	var servers []*replServer
	defer func() {
		for _, s := range servers {
			s.kill()
		}
	}()
	for i, e := range m.Servers {
		s := &replServer{entry: e, profile: filepath.Join(dir, fmt.Sprintf("rs%d.pprof", i+1))}
		if s.proc, err = child.Start(replServerSpec(cfg, b, setup, e, dir, mapFile, s.profile)); err != nil {
			return nil, fmt.Errorf("start server: %w", err)
		}
		servers = append(servers, s)
		if cfg.ServerMemory > 0 {
			pid := s.proc.PID()
			if s.cg, err = newMemCgroup(fmt.Sprintf("tebis-bench-%d", pid), cfg.ServerMemory); err == nil {
				err = s.cg.add(pid)
			}
			if err != nil {
				return nil, fmt.Errorf("server memory limit: %w", err)
			}
		}
	}
	if err := waitCluster(ctx, m, cfg.Transport, b); err != nil {
		return nil, err
	}
	b.ServerMap = regionmap.Static{M: m}
	b.ServerTransport = cfg.Transport
	b.PIDs = nil
	for _, s := range servers {
		b.PIDs = append(b.PIDs, s.proc.PID())
	}
	b.Dir = dir
	b.Keep = true // the setup's directory goes as a whole
	r, err := Run(ctx, b)
	if err != nil {
		return nil, err
	}
	run := &ReplRun{Setup: setup, CPUSplit: map[string]float64{}, L0Pairs: setup.l0Pairs(b.L0Pairs), Regions: len(m.Regions)}
	for i := range r.Phases {
		r.Phases[i].Engine = setup.Name
	}
	run.Phases = r.Phases
	for _, s := range servers {
		mem, err := s.memory()
		if err != nil {
			return nil, err
		}
		run.Memory = append(run.Memory, mem)
		run.PeakRSSSum += mem.PeakRSS
	}
	for _, s := range servers {
		if err := s.stop(); err != nil {
			return nil, err
		}
		split, err := cpuSplit(s.profile)
		if err != nil {
			return nil, err
		}
		for k, v := range split {
			run.CPUSplit[k] += v
		}
	}
	servers = nil
	return run, nil
}

// maxSplitKeys bounds the keys replMap sorts to place its splits: a
// sample of the hashed keys, spread evenly over their numbers, splits
// them about as evenly as all of them.
const maxSplitKeys = 1 << 20

// replMap places 3*perServer regions, split evenly over the loaded keys,
// region i's primary on server i mod 3 and its backups on the next servers
// round the ring.
func replMap(dir string, b Config, setup ReplSetup, perServer int) (*regionmap.Map, error) {
	n := 3 * perServer
	step := max(b.RecordCount/maxSplitKeys, 1)
	keys := make([]string, 0, b.RecordCount/step+1)
	for i := int64(0); i < b.RecordCount; i += step {
		keys = append(keys, ycsb.KeyName(i, true, 1))
	}
	if len(keys) < n {
		return nil, fmt.Errorf("%w: %d records for %d regions", ErrBadConfig, b.RecordCount, n)
	}
	sort.Strings(keys)
	bounds := make([]string, n+1)
	for i := 1; i < n; i++ {
		bounds[i] = keys[i*len(keys)/n]
	}
	m := &regionmap.Map{Version: 1, Replication: setup.Mode}
	for i := range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		tcp := l.Addr().String()
		l.Close()
		m.Servers = append(m.Servers, regionmap.Server{Name: fmt.Sprintf("rs%d", i+1), Shm: filepath.Join(dir, fmt.Sprintf("rs%d.sock", i+1)), TCP: tcp})
	}
	for i := range n {
		r := regionmap.Assignment{ID: uint64(i + 1), Start: bounds[i], End: bounds[i+1], Primary: m.Servers[i%3].Name, Epoch: 1}
		for j := 1; j < setup.Factor; j++ {
			r.Backups = append(r.Backups, m.Servers[(i+j)%3].Name)
		}
		m.Regions = append(m.Regions, r)
	}
	return m, m.Validate()
}

// waitCluster waits until every region serves.
func waitCluster(ctx context.Context, m *regionmap.Map, transport string, b Config) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var cl *client.Client
	var err error
	for cl == nil {
		if cl, err = client.Open(ctx, client.Config{Map: regionmap.Static{M: m}, Transport: transport}); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("servers not reachable: %w", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	defer cl.Close()
	for _, r := range m.Regions {
		key := append([]byte(r.Start), 0) // the region's first possible key
		for {
			_, err := cl.Get(ctx, key)
			if err == nil || errors.Is(err, client.ErrNotFound) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("region %d not serving: %w", r.ID, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}

// memory reads the running server's peak memory.
func (s *replServer) memory() (ServerMemory, error) {
	mem := ServerMemory{Name: s.entry.Name}
	var err error
	if mem.PeakRSS, err = procstat.PeakRSS(s.proc.PID()); err != nil {
		return mem, err
	}
	if s.cg != nil {
		mem.CgroupPeak = s.cg.peak()
	}
	return mem, nil
}

// stop shuts the server down (SIGINT, then SIGKILL after 60 s) and
// returns how it exited.
func (s *replServer) stop() error {
	err := s.proc.Stop(syscall.SIGINT, 60*time.Second)
	if err == nil {
		err = s.proc.Wait()
	} else {
		err = fmt.Errorf("server %s did not stop within 60s: %w", s.entry.Name, err)
	}
	s.proc = nil
	s.dropCgroup()
	return err
}

// kill kills the server (if it still runs) and waits for the reap.
func (s *replServer) kill() {
	if s.proc != nil {
		_ = s.proc.Kill()
		s.proc = nil
	}
	s.dropCgroup()
}

// dropCgroup removes the server's cgroup (it exited).
func (s *replServer) dropCgroup() {
	if s.cg != nil {
		_ = s.cg.remove()
		s.cg = nil
	}
}

// cpuSplit sums a CPU profile's samples by their "component" label
// (unlabeled: "other").
func cpuSplit(path string) (map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("server profile: %w", err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("server profile %s: %w", path, err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("server profile %s has no cpu samples", path)
	}
	out := map[string]float64{}
	for _, s := range p.Sample {
		c := "other"
		if l := s.Label["component"]; len(l) > 0 {
			c = l[0]
		}
		out[c] += float64(s.Value[idx]) / 1e9
	}
	return out, nil
}

package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/zkserver"
	"github.com/tebis-go/tebis/region"
	"github.com/tebis-go/tebis/tools/progress"
	"github.com/tebis-go/tebis/tools/ycsb"
	"go.uber.org/zap"
)

// Cluster defaults: small enough for a few seconds on a 2-core machine.
const (
	DefaultClusterRecords  = 20_000
	DefaultClusterOps      = 20_000
	DefaultClusterServers  = 3
	DefaultClusterWorkload = "a"
	// DefaultClusterL0Pairs is the servers' L0 capacity: small, so that
	// the default load compacts and ships index segments to the backups.
	DefaultClusterL0Pairs = 4096
	// DefaultSessionTimeout is every member's ZooKeeper session timeout.
	DefaultSessionTimeout = 2 * time.Second
	// ClusterSubdir is the cluster's directory under ClusterConfig.Dir,
	// recreated by every run.
	ClusterSubdir = "cluster"
)

// DefaultServerArgs are extra flags for every server by default: pollers
// barely spin, as 3 servers, a master, ZooKeeper and the client share
// the host's cores.
var DefaultServerArgs = []string{"--spin-time=1us"}

// Stop timeouts: SIGINT to SIGKILL.
const (
	serverGrace = 30 * time.Second
	masterGrace = 10 * time.Second
	readyWait   = 60 * time.Second // start-up: registration, map, backups attached
	markerFile  = ".tebis-demo-cluster"
	lockFile    = "cluster.lock"
	maxSockPath = 100 // a unix socket path must fit sun_path (108 bytes)
)

// ErrDirInUse reports a directory another demo cluster is running in.
var ErrDirInUse = errors.New("demo: another demo cluster runs in this directory")

// ClusterConfig configures RunCluster: a local managed cluster of
// separate processes (ZooKeeper, a master, region servers) and a YCSB
// workload through the client over shm.
type ClusterConfig struct {
	// Dir holds the cluster in Dir/cluster, wiped and recreated by every
	// run (and left in place afterwards: logs and volumes).
	Dir string
	// Binary is the tebis executable the master and servers run.
	Binary string
	// Command is how printed hints invoke tebis (default "tebis").
	Command string
	// Servers, Regions and Replicas shape the cluster (3, 3, 3).
	Servers, Regions, Replicas int
	// Replication is send-index (default) or build-index.
	Replication string
	// Records are loaded (Load A), then the run phase does Ops operations
	// (0: DefaultClusterOps; negative: none) of the YCSB built-in Workload
	// (default "a").
	Records, Ops int64
	Workload     string
	Threads      int
	Seed         uint64
	Sizes        ycsb.SizeMix
	// SyncMode is the servers' log mode (default async: a write is safe
	// once every replica has it in memory, as in the paper).
	SyncMode string
	// L0Pairs is the servers' L0 capacity (0: DefaultClusterL0Pairs).
	L0Pairs int
	// ServerArgs are extra flags for every server (nil: DefaultServerArgs).
	ServerArgs []string
	// ZKPort is ZooKeeper's client port (0: a free one).
	ZKPort int
	// SessionTimeout is every member's ZooKeeper session timeout.
	SessionTimeout time.Duration
	// Serve keeps the cluster up after the workload until ctx ends.
	Serve bool
	// Force, once closed, turns the shutdown into SIGKILL at once (a
	// second Ctrl-C).
	Force <-chan struct{}
	// Started, if set, is called once every region serves, before the
	// workload.
	Started  func(*Cluster)
	Progress progress.Reporter
	Out      io.Writer
	Logger   *zap.Logger
}

func (c ClusterConfig) withDefaults() (ClusterConfig, error) {
	if c.Dir == "" {
		c.Dir = DefaultDir
	}
	if c.Command == "" {
		c.Command = "tebis"
	}
	if c.Servers == 0 {
		c.Servers = DefaultClusterServers
	}
	if c.Regions == 0 {
		c.Regions = 3
	}
	if c.Replicas == 0 {
		c.Replicas = min(3, c.Servers)
	}
	if c.Replication == "" {
		c.Replication = "send-index"
	}
	if c.Records == 0 {
		c.Records = DefaultClusterRecords
	}
	if c.Ops == 0 {
		c.Ops = DefaultClusterOps
	}
	if c.Workload == "" {
		c.Workload = DefaultClusterWorkload
	}
	if c.Threads == 0 {
		c.Threads = DefaultThreads
	}
	if c.Sizes == (ycsb.SizeMix{}) {
		c.Sizes = ycsb.MixSD
	}
	if c.SyncMode == "" {
		c.SyncMode = "async"
	}
	if c.L0Pairs == 0 {
		c.L0Pairs = DefaultClusterL0Pairs
	}
	if c.ServerArgs == nil {
		c.ServerArgs = DefaultServerArgs
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	switch {
	case c.Binary == "":
		return c, fmt.Errorf("%w: no tebis binary to run the cluster's processes", ErrBadConfig)
	case c.Servers < 1 || c.Regions < 1 || c.Replicas < 1 || c.Replicas > c.Servers:
		return c, fmt.Errorf("%w: %d servers, %d regions, %d replicas (1 to the server count)", ErrBadConfig, c.Servers, c.Regions, c.Replicas)
	case c.Records < 1 || c.Threads < 1:
		return c, fmt.Errorf("%w: records %d, ops %d, threads %d", ErrBadConfig, c.Records, c.Ops, c.Threads)
	case c.SyncMode != "sync" && c.SyncMode != "async":
		return c, fmt.Errorf("%w: sync mode %q", ErrBadConfig, c.SyncMode)
	}
	if w, err := ycsb.Builtin(c.Workload); err != nil {
		return c, fmt.Errorf("%w: %w", ErrBadConfig, err)
	} else if w.Load {
		return c, fmt.Errorf("%w: workload %q is a load; the run phase needs a-f", ErrBadConfig, c.Workload)
	}
	return c, c.Sizes.Validate()
}

// Cluster is a running local cluster: ZooKeeper, a master and region
// servers, each its own process.
type Cluster struct {
	cfg     ClusterConfig
	dir     string // Dir/cluster, absolute
	lock    *os.File
	sockDir string // a temporary directory for the sockets, if dir is too deep
	zk      *zkserver.Server
	master  *member
	servers []*member
	src     *client.ZooKeeper
	stopped sync.Once
	stopErr error
}

// StartCluster starts ZooKeeper, the master and the servers, creates the
// region map and waits until every region serves. On error everything it
// started is stopped. The caller must Stop the cluster.
func StartCluster(ctx context.Context, cfg ClusterConfig) (_ *Cluster, err error) {
	if cfg, err = cfg.withDefaults(); err != nil {
		return nil, err
	}
	if err := zkserver.Installed(); err != nil {
		return nil, fmt.Errorf("%w (`make deps`, run by `make run` and `make test`, installs the Debian zookeeper package)", err)
	}
	c := &Cluster{cfg: cfg}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop())
		}
	}()
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	out := cfg.Out
	fmt.Fprintf(out, "cluster: starting in %s (ZooKeeper, a master and %d region servers, each a process)\n", c.dir, cfg.Servers)
	fmt.Fprintln(out, transportNote(cfg.ServerArgs))
	c.zk, err = zkserver.Start(ctx, zkserver.Config{Dir: filepath.Join(c.dir, "zk"), Port: cfg.ZKPort, Log: cfg.Logger.Named("zkserver")})
	if err != nil {
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	fmt.Fprintf(out, "  zookeeper  pid %-7d %s\n", c.zk.PID(), c.zk.Addr())
	timeout := cfg.SessionTimeout.String()
	c.master, err = startMember("master m1", cfg.Binary, []string{"--log-level", "info", "master", "--zookeeper", c.zk.Addr(),
		"--zk-session-timeout", timeout, "--name", "m1", "--http", "127.0.0.1:0"}, filepath.Join(c.dir, "m1.log"))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  master m1  pid %d\n", c.master.pid())
	for i := range cfg.Servers {
		name := fmt.Sprintf("rs%d", i+1)
		args := []string{"--log-level", "info", "server", "--name", name, "--zookeeper", c.zk.Addr(), "--zk-session-timeout", timeout,
			"--shm", c.socket(name), "--tcp", "127.0.0.1:0", "--http", "127.0.0.1:0", "--data-dir", filepath.Join(c.dir, name),
			"--sync-mode", cfg.SyncMode, "--l0-pairs", strconv.Itoa(cfg.L0Pairs)}
		m, err := startMember(name, cfg.Binary, append(args, cfg.ServerArgs...), filepath.Join(c.dir, name+".log"))
		if err != nil {
			return nil, err
		}
		c.servers = append(c.servers, m)
		fmt.Fprintf(out, "  server %s pid %d\n", name, m.pid())
	}
	if err := c.initMap(ctx); err != nil {
		return nil, err
	}
	if c.src, err = client.DialZooKeeper(ctx, c.zk.Addr(), "", cfg.Logger.Named("zk")); err != nil {
		return nil, fmt.Errorf("connect to zookeeper: %w", err)
	}
	if err := c.waitServing(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// prepareDir locks Dir against a second demo and recreates Dir/cluster.
func (c *Cluster) prepareDir() error {
	parent, err := filepath.Abs(c.cfg.Dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	c.lock, err = os.OpenFile(filepath.Join(parent, lockFile), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(c.lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		c.lock.Close()
		c.lock = nil
		return fmt.Errorf("%w: %s", ErrDirInUse, parent)
	}
	c.dir = filepath.Join(parent, ClusterSubdir)
	if _, err := os.Stat(c.dir); err == nil {
		// Only ever remove what an earlier demo made.
		if _, err := os.Stat(filepath.Join(c.dir, markerFile)); err != nil {
			return fmt.Errorf("demo: %s exists and is not a demo cluster's directory; remove it or pick another --dir", c.dir)
		}
		if err := os.RemoveAll(c.dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.dir, markerFile), []byte("made by tebis demo --cluster; removed by the next run\n"), 0o644); err != nil {
		return err
	}
	if len(filepath.Join(c.dir, "rs000.sock")) > maxSockPath {
		if c.sockDir, err = os.MkdirTemp("", "tebis-demo-"); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) socket(name string) string {
	if c.sockDir != "" {
		return filepath.Join(c.sockDir, name+".sock")
	}
	return filepath.Join(c.dir, name+".sock")
}

// watchMembers returns a channel that receives the first member to exit.
func (c *Cluster) watchMembers(ctx context.Context) <-chan *member {
	ch := make(chan *member, 1)
	for _, m := range append([]*member{c.master}, c.servers...) {
		go func() {
			select {
			case <-m.done():
				select {
				case ch <- m:
				default:
				}
			case <-ctx.Done():
			}
		}()
	}
	return ch
}

// initMap runs `tebis cluster init`, which waits for the servers to
// register and creates the region map.
func (c *Cluster) initMap(ctx context.Context) error {
	cfg := c.cfg
	logPath := filepath.Join(c.dir, "init.log")
	m, err := startMember("cluster init", cfg.Binary, []string{"--log-level", "warn", "cluster", "init", "--zookeeper", c.zk.Addr(),
		"--zk-session-timeout", cfg.SessionTimeout.String(), "--servers", strconv.Itoa(cfg.Servers), "--wait", readyWait.String(),
		"--regions", strconv.Itoa(cfg.Regions), "--replicas", strconv.Itoa(cfg.Replicas), "--replication", cfg.Replication}, logPath)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	exited := c.watchMembers(wctx)
	select {
	case <-m.done():
		if err := m.proc.Wait(); err != nil {
			return fmt.Errorf("cluster init: %w; %s says:\n%s", err, logPath, m.proc.Tail(20))
		}
		return nil
	case x := <-exited:
		m.kill()
		return x.exitErr()
	case <-ctx.Done():
		m.kill()
		return ctx.Err()
	}
}

// waitServing waits until every region of the map answers a read (its
// primary is up with its backups attached).
func (c *Cluster) waitServing(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyWait)
	defer cancel()
	exited := c.watchMembers(ctx)
	cl, err := client.Open(ctx, client.Config{Map: c.src, Transport: "shm"})
	if err != nil {
		return fmt.Errorf("open a client: %w", err)
	}
	defer cl.Close()
	m := cl.Map()
	for _, r := range m.Regions {
		key := append([]byte(r.Start), 0) // a key inside the region
		for {
			_, err := cl.Get(ctx, key)
			if err == nil || errors.Is(err, client.ErrNotFound) {
				break
			}
			if !transient(err) && ctx.Err() == nil {
				return fmt.Errorf("region %d: %w", r.ID, err)
			}
			select {
			case x := <-exited:
				return x.exitErr()
			case <-ctx.Done():
				if parent := context.Cause(ctx); errors.Is(parent, context.DeadlineExceeded) {
					return fmt.Errorf("region %d not serving after %v: %w (see the servers' logs in %s)", r.ID, readyWait, err, c.dir)
				}
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// ZooKeeper is the cluster's ZooKeeper address.
func (c *Cluster) ZooKeeper() string { return c.zk.Addr() }

// Dir is the cluster's directory (absolute).
func (c *Cluster) Dir() string { return c.dir }

// PIDs are the cluster's processes by name: "zookeeper", "m1", "rs1"...
func (c *Cluster) PIDs() map[string]int {
	out := map[string]int{}
	if c.zk != nil {
		out["zookeeper"] = c.zk.PID()
	}
	if c.master != nil {
		out["m1"] = c.master.pid()
	}
	for _, m := range c.servers {
		out[m.name] = m.pid()
	}
	return out
}

// Map is the region map the master publishes now.
func (c *Cluster) Map(ctx context.Context) (*regionmap.Map, error) { return c.src.Load(ctx) }

// Stop shuts the cluster down: the servers (SIGINT, all at once, each
// waited for; SIGKILL after 30 s), then the master, then ZooKeeper. Once
// cfg.Force is closed, whatever still runs is killed at once. It returns
// the members that did not exit cleanly; a member that had exited before
// Stop (killed by hand, say) is reported on Out, not as an error. Stop is
// idempotent.
func (c *Cluster) Stop() error {
	c.stopped.Do(func() { c.stopErr = c.stop() })
	return c.stopErr
}

func (c *Cluster) stop() error {
	var errs []error
	if c.src != nil {
		_ = c.src.Close()
	}
	for _, m := range append(append([]*member(nil), c.servers...), c.master) {
		if m == nil {
			continue
		}
		if done, err := m.exited(); done {
			fmt.Fprintf(c.cfg.Out, "cluster: %s (pid %d) had exited already (%v)\n", m.name, m.pid(), exitText(err))
		}
	}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for _, m := range c.servers {
		wg.Go(func() {
			if err := m.stop(serverGrace, c.cfg.Force); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if c.master != nil {
		if err := c.master.stop(masterGrace, c.cfg.Force); err != nil {
			errs = append(errs, err)
		}
	}
	if c.zk != nil {
		stop := c.zk.Stop
		select {
		case <-c.cfg.Force:
			stop = c.zk.Kill
		default:
		}
		if err := stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.sockDir != "" {
		_ = os.RemoveAll(c.sockDir)
	}
	if c.lock != nil {
		_ = c.lock.Close() // releases the flock
	}
	return errors.Join(errs...)
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// ClusterResult is what a cluster demo run did.
type ClusterResult struct {
	ZooKeeper string
	PIDs      map[string]int // every process the demo started, by name
	Map       *regionmap.Map // the region map when the workload started
	Load      PhaseStats
	Run       PhaseStats
	// Interrupted reports that ctx ended before the demo finished (the
	// cluster was stopped all the same).
	Interrupted bool
}

// RunCluster starts a local cluster, prints its layout, loads
// cfg.Records records and runs cfg.Ops operations of cfg.Workload
// through the client, prints the results and how to reach the cluster,
// serves until ctx ends if cfg.Serve, and stops the cluster. When ctx
// ends early the cluster is stopped the same way and the result says
// Interrupted; that is not an error.
func RunCluster(ctx context.Context, cfg ClusterConfig) (*ClusterResult, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	res := &ClusterResult{}
	c, err := StartCluster(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			res.Interrupted = true
			fmt.Fprintln(cfg.Out, "cluster: interrupted while starting; stopped")
			return res, nil
		}
		return nil, err
	}
	res.ZooKeeper, res.PIDs = c.ZooKeeper(), c.PIDs()
	err = c.run(ctx, res)
	if ctx.Err() != nil {
		res.Interrupted = true
		err = nil
	}
	fmt.Fprintln(cfg.Out, "cluster: stopping the servers, the master, then ZooKeeper")
	if serr := c.Stop(); serr != nil {
		return res, errors.Join(err, fmt.Errorf("stop the cluster: %w", serr))
	}
	if err == nil {
		fmt.Fprintln(cfg.Out, "cluster: stopped, no process left")
	}
	return res, err
}

// run is the demo on a serving cluster.
func (c *Cluster) run(ctx context.Context, res *ClusterResult) error {
	cfg, out := c.cfg, c.cfg.Out
	m, err := c.Map(ctx)
	if err != nil {
		return err
	}
	res.Map = m
	c.printLayout(m)
	if cfg.Started != nil {
		cfg.Started(c)
	}
	if err := c.workload(ctx, res); err != nil {
		return err
	}
	z := c.ZooKeeper()
	intro := "The cluster is up. From another terminal:"
	if !cfg.Serve {
		intro = "Without --exit the cluster stays up until Ctrl-C; from another terminal, then:"
	}
	fmt.Fprintf(out, "\n%[3]s\n    %[1]s kv --zookeeper %[2]s put hello world\n    %[1]s kv --zookeeper %[2]s get hello\n    %[1]s cluster status --zookeeper %[2]s\n"+
		"    %[1]s cluster health --zookeeper %[2]s    # every endpoint; the master's http:// address serves its status page\n",
		cfg.Command, z, intro)
	if r := m.Regions[0]; len(r.Backups) > 0 {
		fmt.Fprintf(out, "    kill -9 %d    # crash %s, the primary of region %d: the master fails it over to a backup\n", res.PIDs[r.Primary], r.Primary, r.ID)
		fmt.Fprintf(out, "    %s cluster move-primary --zookeeper %s %d %s    # move it to a backup while it serves\n", cfg.Command, z, r.ID, r.Backups[0])
	}
	fmt.Fprintf(out, "Logs: %[1]s/{m1,rs*,init}.log and %[1]s/zk/zk.log\n", c.dir)
	if !cfg.Serve {
		return nil
	}
	fmt.Fprintln(out, "Press Ctrl-C to stop the cluster.")
	<-ctx.Done()
	return nil
}

// printLayout prints the members and the region map.
func (c *Cluster) printLayout(m *regionmap.Map) {
	out := c.cfg.Out
	pids := c.PIDs()
	fmt.Fprintf(out, "cluster: up; region map version %d, %d regions, %d replicas, %s\n", m.Version, len(m.Regions), m.Replicas, m.Replication)
	servers := append([]regionmap.Server(nil), m.Servers...)
	sort.Slice(servers, func(i, j int) bool { return servers[i].Name < servers[j].Name })
	for _, s := range servers {
		fmt.Fprintf(out, "  %-4s pid %-7d shm %s  tcp %s\n", s.Name, pids[s.Name], s.Shm, s.TCP)
	}
	for _, r := range m.Regions {
		fmt.Fprintf(out, "  region %d  [%s, %s)  primary %s  backups %s\n", r.ID, keyText(r.Start), keyText(r.End), r.Primary, strings.Join(r.Backups, ","))
	}
}

// keyText prints a region bound: quoted, "…" for an open end.
func keyText(k string) string {
	if k == "" {
		return "…"
	}
	return strconv.Quote(k)
}

// workload loads the records, then runs the run phase, through a client
// on the ZooKeeper map over shm.
func (c *Cluster) workload(ctx context.Context, res *ClusterResult) error {
	cfg, out := c.cfg, c.cfg.Out
	dcfg := Config{Records: cfg.Records, Threads: cfg.Threads, Seed: cfg.Seed, Sizes: cfg.Sizes, Progress: cfg.Progress,
		Out: out, Logger: cfg.Logger, Map: c.src, Transport: "shm"}
	s, err := openClientStore(ctx, dcfg)
	if err != nil {
		return err
	}
	defer s.Close()
	run := fmt.Sprintf(", then %d operations of YCSB workload %s", cfg.Ops, strings.ToUpper(cfg.Workload))
	if cfg.Ops < 0 {
		run = ""
	}
	fmt.Fprintf(out, "workload: load %d records%s; kv sizes %s, %d client threads, seed %d, shm\n",
		cfg.Records, run, cfg.Sizes, cfg.Threads, cfg.Seed)

	load, err := newWorkload("load-a", dcfg)
	if err != nil {
		return err
	}
	loadGen, err := ycsb.NewGenerator(load, cfg.Seed)
	if err != nil {
		return err
	}
	res.Load, err = runOps(ctx, dcfg, loadGen, "load", func(op ycsb.Op) (int, error) {
		return len(op.Key) + len(op.Value), s.Put(op.Key, op.Value)
	})
	if err != nil {
		return fmt.Errorf("load: %w", err)
	}
	fmt.Fprintf(out, "load: %d inserts in %.2fs: %.0f ops/s, %.1f MB/s\n%s",
		res.Load.Ops, res.Load.Seconds, res.Load.OpsPerSec(), res.Load.MBPerSec(), latencyLines(res.Load.Latency))
	if cfg.Ops < 0 {
		return nil
	}
	w, err := ycsb.Builtin(cfg.Workload)
	if err != nil {
		return err
	}
	w.RecordCount, w.OperationCount, w.Sizes = loadGen.Records(), cfg.Ops, cfg.Sizes
	gen, err := ycsb.NewGenerator(w, cfg.Seed+1)
	if err != nil {
		return err
	}
	desc := "run " + strings.ToUpper(cfg.Workload)
	res.Run, err = runOps(ctx, dcfg, gen, desc, func(op ycsb.Op) (int, error) { return doOp(s, op) })
	if err != nil {
		return fmt.Errorf("%s: %w", desc, err)
	}
	fmt.Fprintf(out, "%s: %d operations in %.2fs: %.0f ops/s, %.1f MB/s, every read found its record\n%s",
		desc, res.Run.Ops, res.Run.Seconds, res.Run.OpsPerSec(), res.Run.MBPerSec(), latencyLines(res.Run.Latency))
	printServerStats(ctx, out, s.cl)
	return nil
}

// printServerStats prints each server's compactions, device writes and
// replication traffic (best effort: a server that does not answer is
// skipped).
func printServerStats(ctx context.Context, out io.Writer, cl *client.Client) {
	servers := append([]regionmap.Server(nil), cl.Map().Servers...)
	sort.Slice(servers, func(i, j int) bool { return servers[i].Name < servers[j].Name })
	switch m := cl.Map(); {
	case m.Replicas < 2:
		fmt.Fprintln(out, "servers:")
	case m.Replication == "send-index":
		fmt.Fprintln(out, "servers (Send-Index: a region's backups install the index segments its primary's compactions build):")
	case m.Replication == "build-index":
		fmt.Fprintln(out, "servers (Build-Index: a region's backups compact their own copy):")
	default:
		fmt.Fprintln(out, "servers:")
	}
	for _, srv := range servers {
		b, err := cl.ServerStats(ctx, srv.Name)
		if err != nil {
			continue
		}
		var st region.ServerStats
		if json.Unmarshal(b, &st) != nil {
			continue
		}
		fmt.Fprintf(out, "  %-4s %d compactions, %.1f MB written to its device, %.1f MB sent to backups\n",
			srv.Name, st.Engine.Compactions, float64(st.Engine.TotalWritten())/1e6, float64(st.ReplNet)/1e6)
	}
}

// doOp runs one run-phase operation; a read of a record that is not
// there is ErrMissing.
func doOp(s *clientStore, op ycsb.Op) (int, error) {
	switch op.Kind {
	case ycsb.OpRead, ycsb.OpReadModifyWrite:
		v, found, err := s.Get(op.Key)
		if err != nil {
			return 0, fmt.Errorf("get %q: %w", op.Key, err)
		}
		if !found {
			return 0, fmt.Errorf("%w: record %d (%q)", ErrMissing, op.KeyNum, op.Key)
		}
		n := len(op.Key) + len(v)
		if op.Kind == ycsb.OpReadModifyWrite {
			n += len(op.Key) + len(op.Value)
			return n, s.Put(op.Key, op.Value)
		}
		return n, nil
	case ycsb.OpScan:
		return s.Scan(op.Key, op.ScanLen)
	default: // update, insert
		return len(op.Key) + len(op.Value), s.Put(op.Key, op.Value)
	}
}

// transportNote says how the servers the demo starts (with serverArgs
// added) can be reached: on loopback tcp and unix sockets only, and
// without TLS unless serverArgs give it.
func transportNote(serverArgs []string) string {
	for _, a := range serverArgs {
		if a == "--tls-cert" || strings.HasPrefix(a, "--tls-cert=") {
			return "cluster: tcp on 127.0.0.1 with TLS (--server-arg), shm on unix sockets"
		}
	}
	return "cluster: plaintext tcp on 127.0.0.1 and shm on unix sockets, for this host only: no TLS (docs/operations.md, \"TLS and peer authentication\")"
}

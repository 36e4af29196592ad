package region_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jonboulle/clockwork"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord/coordtest"
	"github.com/tebis-go/tebis/master"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/region"
)

var _ region.Coordinator = (*coordtest.Session)(nil)

// inprocCluster is a managed cluster in this process: an in-memory
// coordinator, master.Run on it, and region servers on one loopback
// fabric, each with its volume in a crashable in-memory file system.
// Everything is stopped when the test ends.
type inprocCluster struct {
	t      *testing.T
	coord  *coordtest.Coordinator
	fabric *rdma.Loopback
	nodes  map[string]*inprocNode
	cl     *client.Client
	logs   *logGate
	// clock, if set, is the servers' clock (region.WithClock) and the
	// coordinator's (its sessions' leases); nil: the system clock.
	clock clockwork.Clock
	// splits are the initial map's region boundaries; balance runs the
	// master with its balancer (master.Config.Balance).
	splits  []string
	balance bool
}

// inprocSetup is what startInproc starts: n servers, a map asking for
// replicas copies of regions split at splits (nil: inprocSplits), the
// clock (nil: the system clock), the master balancing primaries or not.
type inprocSetup struct {
	n, replicas int
	splits      []string
	clock       clockwork.Clock
	balance     bool
}

// inprocNode is one region server: its file system outlives its runs.
type inprocNode struct {
	name string
	mem  *vfs.MemFS
	// The current run (nil srv: stopped).
	srv  *region.Server
	sess *coordtest.Session
	zk   *zkLink // sess as the server sees it
	tr   *cuttable
	// stalled: the next run's fabric view starts stalled (cuttable.Stall).
	stalled bool
}

// inprocSessionTimeout is the coordinator's session timeout (the servers'
// leases last half of it) and the servers' zk_session_timeout.
const inprocSessionTimeout = time.Second

// inprocSplits split the keys k000000..k009999 into three regions.
var inprocSplits = []string{"k003200", "k006400"}

// startInprocCluster starts n servers, publishes the initial map (three
// regions, three replicas, as `tebis cluster init` does from the
// registrations), starts the master and a client, and waits until every
// region serves. With fewer than three servers the initial groups have
// what there is (one server: none) and the map still asks for three
// replicas: the master adds servers that join later.
func startInprocCluster(t *testing.T, n int) *inprocCluster {
	t.Helper()
	return startInprocClusterOf(t, n, 3)
}

// startInprocClusterOf is startInprocCluster with a map asking for
// replicas copies of each region (the initial groups as many as there
// are servers).
func startInprocClusterOf(t *testing.T, n, replicas int) *inprocCluster {
	t.Helper()
	return startInprocClusterOn(t, n, replicas, nil)
}

// startInprocClusterOn is startInprocClusterOf with clk (nil: the system
// clock) as the servers' and the coordinator's clock (inprocCluster.clock).
// The master keeps the system clock.
func startInprocClusterOn(t *testing.T, n, replicas int, clk clockwork.Clock) *inprocCluster {
	t.Helper()
	return startInproc(t, inprocSetup{n: n, replicas: replicas, clock: clk})
}

// startInproc starts the cluster setup describes (startInprocCluster).
func startInproc(t *testing.T, setup inprocSetup) *inprocCluster {
	t.Helper()
	n, replicas, clk := setup.n, setup.replicas, setup.clock
	if setup.splits == nil {
		setup.splits = inprocSplits
	}
	copts := []coordtest.Option{coordtest.WithSessionTimeout(inprocSessionTimeout)}
	if clk != nil {
		copts = append(copts, coordtest.WithClock(clk))
	}
	c := &inprocCluster{t: t, coord: coordtest.New(nil, nil, copts...),
		fabric: rdma.NewLoopback(), nodes: map[string]*inprocNode{}, logs: newLogGate(t), clock: clk,
		splits: setup.splits, balance: setup.balance}
	t.Cleanup(func() {
		for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
			c.stop(name)
		}
	})
	for i := range n {
		name := fmt.Sprintf("rs%d", i+1)
		c.nodes[name] = &inprocNode{name: name, mem: newMem()}
		c.start(name)
	}
	var srvs []regionmap.Server
	for _, si := range c.coord.Servers() {
		srv := si.Server
		srv.Started = si.Started
		srvs = append(srvs, srv)
	}
	m, err := master.InitialMap(srvs, master.Layout{Splits: c.splits, Replicas: min(n, replicas)})
	if err != nil {
		t.Fatal(err)
	}
	m.Replicas = replicas
	c.coord.PutMap(m)
	c.startMaster()
	c.cl, err = client.Open(ctxFor(t, 10*time.Second), client.Config{Map: c.coord.Source(), DialTransport: c.fabric, RetryWindow: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cl.Close() })
	c.waitServing("the initial map")
	return c
}

// newMem is a new server's file system.
func newMem() *vfs.MemFS { return vfs.NewCrashableMem() }

func ctxFor(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

// startMaster runs master.Run on the coordinator until the test ends.
func (c *inprocCluster) startMaster() {
	t := c.t
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		// A crash ends a session at once here: a short DropHold (how long
		// a server reported dropped gets no role) is as safe as the
		// default with real sessions, and restarts rejoin without a wait.
		done <- master.Run(ctx, master.Config{Name: "m", Coord: c.coord, Recheck: 20 * time.Millisecond, DropHold: 100 * time.Millisecond,
			Balance: c.balance, Log: c.logs.logger(t, "master")})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("master: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the master did not stop 10 s after its context ended")
		}
	})
}

// nodeOf returns server name's node in nodes, made with a new, empty
// file system the first time.
func nodeOf(nodes map[string]*inprocNode, name string) *inprocNode {
	nd := nodes[name]
	if nd == nil {
		nd = &inprocNode{name: name, mem: newMem()}
		nodes[name] = nd
	}
	return nd
}

// start starts a run of server name on its file system (a new, empty one
// the first time), with a new session and a new view of the fabric.
func (c *inprocCluster) start(name string) *region.Server {
	t := c.t
	t.Helper()
	nd := nodeOf(c.nodes, name)
	cfg := inprocConfig(name)
	cfg.Zookeeper, cfg.ZKSessionTimeout = "coordtest", region.Duration(inprocSessionTimeout)
	nd.sess, nd.tr = c.coord.NewSession(), newCuttable(c.fabric)
	nd.zk = newZKLink(nd.sess)
	if nd.stalled {
		nd.tr.Stall()
	}
	opts := []region.Option{region.WithCoordinator(nd.zk), region.WithFS(nd.mem), region.WithListenTransport(nd.tr), region.WithDialTransport(nd.tr)}
	if c.clock != nil {
		opts = append(opts, region.WithClock(c.clock))
	}
	srv, err := region.Start(cfg, c.logs.logger(t, name), opts...)
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	nd.srv = srv
	return srv
}

// inprocConfig is the configuration of in-process server name, managed
// or not: its volume at /name in its file system, listening at address
// name on the fabric, small segments and L0, sync mode.
func inprocConfig(name string) region.Config {
	cfg := region.DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm = name, "/"+name, name, ""
	cfg.SegmentSize, cfg.L0Pairs, cfg.GrowthFactor, cfg.GrowStep = 64<<10, 256, 2, 256<<10
	cfg.CacheSize, cfg.Workers, cfg.SpinTime = 4<<20, 4, region.Duration(time.Microsecond)
	cfg.ReplicationConnect = region.Duration(3 * time.Second)
	cfg.HTTP = "127.0.0.1:0" // /readyz: waitServing checks every server is ready
	return cfg
}

// stop closes server name's run (a clean stop: it syncs its volume and
// ends its session), if it runs.
func (c *inprocCluster) stop(name string) {
	nd := c.nodes[name]
	if nd.srv == nil {
		return
	}
	if err := nd.srv.CheckRoles(); err != nil {
		c.t.Error(err)
	}
	if err := nd.srv.Close(); err != nil {
		c.t.Errorf("close %s: %v", name, err)
	}
	nd.srv = nil
}

// crash stops server name's run as a crash would: its file system keeps
// only what it synced, every connection it had breaks, and its session
// ends (its registration goes at once, as its expiry would after the
// session timeout; a standalone server has none). The dead run is then
// closed to free it; nothing it does meanwhile reaches the cluster or the
// file system a restart uses.
func (c *inprocCluster) crash(name string) {
	nd := c.nodes[name]
	synced := nd.mem.CrashClone(vfs.CrashCloneCfg{})
	nd.tr.Cut()
	if nd.zk != nil {
		nd.zk.Close()
	}
	nd.mem = synced
	if err := nd.srv.Close(); err != nil {
		c.t.Logf("closing the crashed run of %s: %v", name, err)
	}
	nd.srv = nil
}

// run is server name's registered run (0: not registered).
func (c *inprocCluster) run(name string) int64 { return c.coord.Servers()[name].Started }

// waitMap waits (event-driven, up to 20 s) until the published map
// satisfies ok, and returns it.
func (c *inprocCluster) waitMap(what string, ok func(*regionmap.Map) bool) *regionmap.Map {
	c.t.Helper()
	return c.waitMapWithin(20*time.Second, what, ok)
}

// waitMapWithin is waitMap, waiting up to d.
func (c *inprocCluster) waitMapWithin(d time.Duration, what string, ok func(*regionmap.Map) bool) *regionmap.Map {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	found := make(chan *regionmap.Map, 1)
	go c.coord.WatchMap(ctx, func(m *regionmap.Map) {
		if ok(m) {
			select {
			case found <- m:
			default:
			}
		}
	}, nil)
	select {
	case m := <-found:
		return m
	case <-ctx.Done():
		m, _ := c.coord.Map()
		t.Fatalf("timed out after %v waiting for %s; the map: %+v", d, what, m)
		return nil
	}
}

// waitServing waits (up to 20 s) until a read of each region gets an
// answer.
func (c *inprocCluster) waitServing(what string) {
	t := c.t
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, k := range append([]string{"k000000"}, c.splits...) {
		for {
			_, err := c.cl.Get(ctxFor(t, 5*time.Second), []byte(k))
			if err == nil || errors.Is(err, client.ErrNotFound) {
				break
			}
			if !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrWrongRegion) || time.Now().After(deadline) {
				t.Fatalf("%s: the region of %s does not serve: %v", what, k, err)
			}
			time.Sleep(5 * time.Millisecond) // a server installing the map, or a lease being renewed
		}
	}
	for name, nd := range c.nodes {
		if nd.srv == nil {
			continue
		}
		if err := nd.srv.CheckRoles(); err != nil {
			t.Errorf("%s: %s: %v", what, name, err)
		}
		waitHTTPReady(t, what, name, nd.srv)
	}
}

// waitHTTPReady waits (up to 10 s) until srv's /readyz answers 200: every
// server is ready once every region serves (a backup may install the
// last map a moment after its primary serves it).
func waitHTTPReady(t *testing.T, what, name string, srv *region.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + srv.HTTPAddr() + "/readyz")
		if err != nil {
			t.Fatalf("%s: %s: /readyz: %v", what, name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s not ready 10 s after every region served: %d %q", what, name, resp.StatusCode, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// write puts keys from..from+n-1 of a permutation of k000000..k009999
// (spread over every region), values tagged with tag, and returns them.
func (c *inprocCluster) write(from, n int, tag string) map[string]string {
	t := c.t
	t.Helper()
	acked := map[string]string{}
	ctx := ctxFor(t, 30*time.Second)
	for i := from; i < from+n; i++ {
		k := fmt.Sprintf("k%06d", i*9973%10000)
		v := fmt.Sprintf("%s-%d", tag, i)
		if err := c.cl.Put(ctx, []byte(k), []byte(v)); err != nil {
			t.Fatalf("put %s: %v", k, err)
		}
		acked[k] = v
	}
	return acked
}

// readBack checks that every key of acked reads as its value.
func (c *inprocCluster) readBack(what string, acked map[string]string) {
	t := c.t
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	unavailable := 0
	for k, want := range acked {
		got, err := c.cl.Get(ctx, []byte(k))
		// A server may refuse reads for a while (its lease lapses when a
		// loaded machine delays its session's renewal; a region being
		// promoted): safe, and what a client retries. A wrong value, or a
		// refusal for the whole 30 s, fails.
		for errors.Is(err, client.ErrUnavailable) && ctx.Err() == nil {
			unavailable++
			time.Sleep(10 * time.Millisecond)
			got, err = c.cl.Get(ctx, []byte(k))
		}
		if err != nil || string(got) != want {
			t.Fatalf("%s: get %s = %q, %v; want %q", what, k, got, err, want)
		}
	}
	if unavailable > 0 {
		t.Logf("%s: %d reads answered UNAVAILABLE first, retried", what, unavailable)
	}
}

// without reports whether name has no role in m.
func without(name string) func(*regionmap.Map) bool {
	return func(m *regionmap.Map) bool {
		return !slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool { return r.Primary == name || slices.Contains(r.Group(), name) })
	}
}

// backupOfAll reports whether m lists name's run run as a backup (not
// joining) of every region.
func backupOfAll(name string, run int64) func(*regionmap.Map) bool {
	return func(m *regionmap.Map) bool {
		srv, ok := m.Server(name)
		return ok && srv.Started == run && !slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool { return !slices.Contains(r.Backups, name) })
	}
}

// writers are client goroutines putting keys until stopped; they record
// the writes acknowledged.
type writers struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	acked   map[string]string
	failed  int
	lastErr error
}

// startWriters starts n goroutines putting keys through the cluster's
// client, up to 10000 each: every put a new key (spread over every
// region), so that a put that failed (a failover beyond the client's
// retry window), applied or not, leaves no acknowledged value in doubt.
// Failed puts are not recorded.
func (c *inprocCluster) startWriters(n int) *writers {
	w := &writers{stop: make(chan struct{}), acked: map[string]string{}}
	for g := range n {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			for i := range 10000 {
				select {
				case <-w.stop:
					return
				default:
				}
				k := fmt.Sprintf("k%06d-w%d", i*9973%10000, g)
				v := fmt.Sprintf("w%d-%d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := c.cl.Put(ctx, []byte(k), []byte(v))
				cancel()
				w.mu.Lock()
				if err == nil {
					w.acked[k] = v
				} else {
					w.failed, w.lastErr = w.failed+1, err
				}
				w.mu.Unlock()
			}
		}()
	}
	c.t.Cleanup(w.halt)
	return w
}

// count is the number of keys acknowledged so far.
func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// failures returns the number of puts that failed so far, and the last
// error.
func (w *writers) failures() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed, w.lastErr
}

// halt stops the writers and waits for them (idempotent).
func (w *writers) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// result stops the writers and returns the writes acknowledged.
func (w *writers) result() map[string]string {
	w.halt()
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.acked)
}

// waitCopiesComplete waits (up to 20 s) until srv, the run of server
// name, holds a complete copy of every region the map makes it a backup
// of, at the map's epoch.
func (c *inprocCluster) waitCopiesComplete(name string, srv *region.Server) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, name+"'s copies complete at the map's epochs", func() bool {
		m, _ := c.coord.Map()
		complete := map[uint64]uint64{}
		for _, cp := range srv.Stats().Copies {
			if cp.Complete {
				complete[cp.Region] = cp.Epoch
			}
		}
		for _, r := range m.Regions {
			if slices.Contains(r.Backups, name) && complete[r.ID] != r.Epoch {
				return false
			}
		}
		return true
	})
}

// planned reports whether server name installed a map (version at least
// from) whose plan (plan.go) holds step, e.g. "promote 1".
func (c *inprocCluster) planned(name string, from uint64, step string) bool {
	return len(c.logs.find(name, "region map installed", func(e logEntry) bool {
		v, _ := e.fields["version"].(uint64)
		plan, _ := e.fields["plan"].([]any)
		return v >= from && slices.Contains(plan, any(step))
	})) > 0
}

// waitPlanned waits (up to 10 s) until server name installed a map
// (version at least from) whose plan holds step.
func (c *inprocCluster) waitPlanned(name string, from uint64, step string) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !c.planned(name, from, step) {
		if time.Now().After(deadline) {
			m, _ := c.coord.Map()
			c.t.Fatalf("timed out after 10 s waiting for %s to install a map (version >= %d) whose plan holds %q; the map is version %d; its plans: %q",
				name, from, step, m.Version, c.plans(name))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// plans returns server name's plans so far, one line per map installed
// (for failure messages).
func (c *inprocCluster) plans(name string) []string {
	var out []string
	for _, e := range c.logs.find(name, "region map installed", nil) {
		out = append(out, fmt.Sprintf("v%v: %v", e.fields["version"], e.fields["plan"]))
	}
	return out
}

// logged reports whether server name logged msg with fields holding
// (each) the given values (numbers as uint64, as zap records them).
func (c *inprocCluster) logged(name, msg string, fields map[string]any) bool {
	return len(c.logs.find(name, msg, func(e logEntry) bool {
		for k, v := range fields {
			if e.fields[k] != v {
				return false
			}
		}
		return true
	})) > 0
}

// fixedSource is a map source that always returns its map: a client
// holding an old map (one that never learns of a newer one).
type fixedSource struct{ m *regionmap.Map }

func (f fixedSource) Load(context.Context) (*regionmap.Map, error) { return f.m.Clone(), nil }

// clientAt opens a client that routes by m whatever is published (a
// client that lags), closed when the test ends.
func (c *inprocCluster) clientAt(m *regionmap.Map) *client.Client {
	return c.openClient(fixedSource{m}, 3)
}

// openClient opens a client on src that gives up after retries
// attempts (and after a second of retries for a write), closed when the
// test ends.
func (c *inprocCluster) openClient(src regionmap.Source, retries int) *client.Client {
	t := c.t
	t.Helper()
	cl, err := client.Open(ctxFor(t, 5*time.Second), client.Config{Map: src, DialTransport: c.fabric, RetryWindow: time.Second, Retries: retries})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// freshClient opens a client on the map published now. (The cluster's
// client, like any on a coordinator Source rather than a ZooKeeper
// watch, learns a newer map only from a WRONG_REGION or a broken
// connection: an old primary that is cut off but alive answers it
// UNAVAILABLE until it installs the newer map.)
func (c *inprocCluster) freshClient() *client.Client { return c.openClient(c.coord.Source(), 8) }

// keyOf returns the i-th key (of the permutation write uses) in region
// id of m, and the index after it.
func keyOf(m *regionmap.Map, id uint64, i int) (string, int) {
	for ; ; i++ {
		k := fmt.Sprintf("k%06d", i*9973%10000)
		if m.Lookup([]byte(k)).ID == id {
			return k, i + 1
		}
	}
}

// putAcked puts key=value through cl until it is acknowledged (up to
// 10 s): a client gives up on a region that is unavailable for longer
// than its retries (a failover, an attach).
func (c *inprocCluster) putAcked(cl *client.Client, key, value string) {
	t := c.t
	t.Helper()
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if err = cl.Put(ctxFor(t, 5*time.Second), []byte(key), []byte(value)); err == nil {
			return
		}
		if !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrWrongRegion) {
			break
		}
	}
	t.Fatalf("put %s: %v", key, err)
}

// writersGoOnThenReadBack waits (10 s at most) until w acknowledged more
// writes, stops it, and reads back every write acknowledged before
// (acked) and by w.
func (c *inprocCluster) writersGoOnThenReadBack(w *writers, more int, what string, acked map[string]string) {
	c.t.Helper()
	n := w.count()
	waitFor(c.t, 10*time.Second, "writes "+what, func() bool { return w.count() >= n+more })
	during := w.result()
	c.readBack(what, acked)
	c.readBack("written by the writers", during)
}

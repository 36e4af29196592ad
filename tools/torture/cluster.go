package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/region"
)

// serverPort is the region servers' tcp port when each has an address of
// its own (netns).
const serverPort = 7000

// splits are where the cluster's three regions start: the workloads'
// keys begin with k and a digit, spread over all three.
var splits = []string{"k3", "k6"}

// cluster is the cluster under test: ZooKeeper, masters and region
// servers, placed on the network's hosts, and a client of its own for
// the map and the servers' stats.
type cluster struct {
	o   Options
	net network
	zk  *zkEnsemble

	masters []*proc
	servers map[string]*proc
	addrs   map[string]string // region server -> host:port
	names   []string          // rs1...

	zs    *client.ZooKeeper
	stats *client.Client

	mu   sync.Mutex
	logs []string // every process's log file
}

// startCluster starts everything and initialises the cluster; with tmpfs
// each server's volume is on a tmpfs of its own (disk-full). On error what
// was started is stopped.
func startCluster(ctx context.Context, o Options, n network, tmpfs bool) (_ *cluster, err error) {
	c := &cluster{o: o, net: n, servers: map[string]*proc{}, addrs: map[string]string{}}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	for _, d := range []string{"logs", "volumes"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("torture: %w", err)
		}
	}
	if c.zk, err = startZK(ctx, filepath.Join(o.Dir, "zookeeper"), n, o.ZooKeepers); err != nil {
		return nil, err
	}
	c.logs = append(c.logs, c.zk.logs()...)
	zkc := c.zk.connect()
	session := o.Session.String()
	for i := range 2 {
		name := fmt.Sprintf("m%d", i+1)
		h, err := n.add(name)
		if err != nil {
			return nil, err
		}
		p := c.newProc(name, h, "--log-level", "info", "master", "--zookeeper", zkc, "--zk-session-timeout", session,
			"--grace", "5s", "--name", name)
		if err := p.start(); err != nil {
			return nil, err
		}
		c.masters = append(c.masters, p)
	}
	for i := range o.Servers {
		name := fmt.Sprintf("rs%d", i+1)
		h, err := n.add(name)
		if err != nil {
			return nil, err
		}
		if tmpfs {
			if err := mountTmpfs(filepath.Join(o.Dir, "volumes", name)); err != nil {
				return nil, err
			}
		}
		addr := net.JoinHostPort(h.addr, strconv.Itoa(serverPort))
		shm := "" // processes in namespaces of their own talk tcp
		if h.wrap == nil {
			// All in one namespace: shm, as users run servers that share
			// a machine (tcp stays on for the readiness check).
			shm = filepath.Join(o.Dir, "volumes", name+".sock")
			if addr, err = freeAddr(); err != nil {
				return nil, err
			}
		}
		args := []string{}
		if tmpfs {
			// Growth a segment or two at a time: a full file system shows
			// within seconds of writes, not after a 32 MiB step's worth.
			args = append(args, "--grow-step", "4MiB")
		}
		p := c.newProc(name, h, append([]string{"--log-level", "info", "server", "--name", name,
			"--data-dir", volumeDir(o.Dir, name), "--fault-fs", "--shm", shm, "--tcp", addr,
			"--zookeeper", zkc, "--zk-session-timeout", session, "--replication-connect", "3s",
			"--sync-mode", o.SyncMode, "--segment-size", "2MiB", "--l0-pairs", strconv.Itoa(o.L0Pairs),
			"--growth-factor", "4", "--replication-transport", c.transport()}, args...)...)
		c.servers[name], c.addrs[name] = p, addr
		c.names = append(c.names, name)
		if err := p.start(); err != nil {
			return nil, err
		}
	}
	for _, name := range c.names {
		if err := c.servers[name].waitListen(c.addrs[name], 30*time.Second); err != nil {
			return nil, err
		}
	}
	init := exec.CommandContext(ctx, o.Binary, "--log-level", "warn", "cluster", "init", "--zookeeper", zkc,
		"--servers", strconv.Itoa(o.Servers), "--replicas", strconv.Itoa(o.Replicas), "--splits", splits[0]+","+splits[1],
		"--replication", o.Replication, "--min-copies", strconv.Itoa(o.MinCopies))
	if out, err := init.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("torture: cluster init: %w: %s", err, out)
	}
	if c.zs, err = client.DialZooKeeper(ctx, zkc, "", zap.NewNop()); err != nil {
		return nil, fmt.Errorf("torture: %w", err)
	}
	if c.stats, err = c.newClient(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// newProc makes the process name on host h: the tebis binary with args.
func (c *cluster) newProc(name string, h host, args ...string) *proc {
	log := filepath.Join(c.o.Dir, "logs", name+".log")
	c.mu.Lock()
	c.logs = append(c.logs, log)
	c.mu.Unlock()
	return newProc(name, log, append(append(slices.Clone(h.wrap), c.o.Binary), args...))
}

// freeAddr returns a 127.0.0.1 address with a port free right now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("torture: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// transport is the clients' and replication's transport: tcp across
// namespaces, shm when every process shares one.
func (c *cluster) transport() string {
	if c.net.partitions() {
		return "tcp"
	}
	return "shm"
}

// newClient opens a client of the cluster (the map from ZooKeeper).
func (c *cluster) newClient(ctx context.Context) (*client.Client, error) {
	cl, err := client.Open(ctx, client.Config{Map: c.zs, Transport: c.transport()})
	if err != nil {
		return nil, fmt.Errorf("torture: client: %w", err)
	}
	return cl, nil
}

// load reads the published map.
func (c *cluster) load(ctx context.Context) (*regionmap.Map, error) {
	lc, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.zs.Load(lc)
}

// copyComplete asks server name whether its copy of region id is complete
// at epoch.
func (c *cluster) copyComplete(ctx context.Context, name string, id, epoch uint64) bool {
	sc, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, err := c.stats.ServerStats(sc, name)
	if err != nil {
		return false
	}
	var st region.ServerStats
	if err := json.Unmarshal(b, &st); err != nil {
		return false
	}
	for _, cp := range st.Copies {
		if cp.Region == id {
			return cp.Complete && cp.Epoch == epoch
		}
	}
	return false
}

// whole reports whether the cluster is whole: every process running,
// every region's group full with no joining backup, every backup's copy
// complete at the map's epoch, and every region serving a read. It
// returns why not.
func (c *cluster) whole(ctx context.Context) (bool, string) {
	for _, p := range append(c.serverProcs(), c.masters...) {
		if !p.running() || p.isPaused() {
			return false, p.name + " not running"
		}
	}
	if ok, why := c.zk.serving(ctx); !ok {
		return false, "zookeeper: " + why
	}
	m, err := c.load(ctx)
	if err != nil {
		return false, "map: " + err.Error()
	}
	for _, r := range m.Regions {
		if len(r.Joining) > 0 || len(r.Backups) != m.Replicas-1 {
			return false, fmt.Sprintf("region %d: group %s+%v joining %v", r.ID, r.Primary, r.Backups, r.Joining)
		}
		for _, b := range r.Backups {
			if !c.copyComplete(ctx, b, r.ID, r.Epoch) {
				return false, fmt.Sprintf("region %d: backup %s's copy not complete at epoch %d", r.ID, b, r.Epoch)
			}
		}
		gc, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.stats.Get(gc, append([]byte(r.Start), 'k'))
		cancel()
		if err != nil && !errors.Is(err, client.ErrNotFound) {
			return false, fmt.Sprintf("region %d: a read failed: %v", r.ID, err)
		}
	}
	return true, ""
}

// waitWhole waits (at most d) until the cluster is whole.
func (c *cluster) waitWhole(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	why := ""
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var ok bool
		if ok, why = c.whole(ctx); ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster not whole after %v: %s", d, why)
}

// serverProcs lists the region servers' processes.
func (c *cluster) serverProcs() []*proc {
	var out []*proc
	for _, name := range c.names {
		out = append(out, c.servers[name])
	}
	return out
}

// heal puts the cluster back together: every cut, shaping, filler and
// disk fault removed, every paused process continued, every exited one
// started again. (A server whose volume failed stays failed until it is
// restarted: that is the disk-error nemesis's own heal.)
func (c *cluster) heal(ctx context.Context) error {
	err := c.net.healAll()
	for _, name := range c.names {
		if e := unfill(c.o.Dir, name); e != nil && err == nil {
			err = e
		}
		if e := setFault(c.o.Dir, name, "off"); e != nil && err == nil {
			err = e
		}
	}
	for _, p := range append(c.serverProcs(), c.masters...) {
		switch {
		case p.isPaused():
			if e := p.signal(syscall.SIGCONT); e != nil && err == nil {
				err = e
			}
		case !p.running():
			if e := p.start(); e != nil && err == nil {
				err = e
			}
		}
	}
	if e := c.zk.restartExited(ctx); e != nil && err == nil {
		err = e
	}
	return err
}

// leader names the leading master ("" if unknown).
func (c *cluster) leader(ctx context.Context) string {
	lc, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(lc, c.o.Binary, "--log-level", "warn", "cluster", "status", "--json", "--zookeeper", c.zk.connect()).Output()
	if err != nil {
		return ""
	}
	var st struct {
		Master string `json:"master"`
	}
	if json.Unmarshal(out, &st) != nil {
		return ""
	}
	return st.Master
}

// master returns the master process named name.
func (c *cluster) master(name string) *proc {
	for _, p := range c.masters {
		if p.name == name {
			return p
		}
	}
	return nil
}

// logFiles lists every process's log.
func (c *cluster) logFiles() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.logs)
}

// close stops every process (gracefully, then by SIGKILL) and ZooKeeper.
func (c *cluster) close() {
	if c.stats != nil {
		c.stats.Close()
	}
	if c.zs != nil {
		c.zs.Close()
	}
	var wg sync.WaitGroup
	for _, p := range append(c.serverProcs(), c.masters...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.stop(5 * time.Second)
		}()
	}
	wg.Wait()
	if c.zk != nil {
		_ = c.zk.stop()
	}
	_ = unmountUnder(filepath.Join(c.o.Dir, "volumes"))
}

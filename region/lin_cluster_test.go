package region_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/proctest"
	"github.com/tebis-go/tebis/region"
)

// linEngineArgs are the servers' engine sizes for the fault test.
//
// Segments are the default 2 MiB. L0 holds l0 pairs (default 4096, where
// users run 96K): the background writers put values of linBgValue bytes
// to keys that are almost all distinct within an L0 (L0 counts distinct
// keys), so an L0 holds l0*linBgValue bytes of log = 16 MiB, 8 log
// segments. As at the default sizes (96K pairs of ~1 KiB: ~48 segments),
// log segments fill and are sealed with no partial flush between two L0
// compactions; the scaled L0 makes a compaction (a partial flush, index
// shipping or rebuilding, freeing of dead log segments and reuse of their
// numbers) happen every few seconds of the checked history instead of
// every minute. TEBIS_LIN_L0=98304 runs the default.
func linEngineArgs(c linConfig, l0 int) []string {
	mode := "async"
	if c.Sync {
		mode = "sync"
	}
	return []string{"--segment-size", "2MiB", "--l0-pairs", fmt.Sprint(l0), "--growth-factor", "4",
		"--sync-mode", mode, "--replication-transport", c.Transport}
}

// linBgValue is the size of a background writer's value.
const linBgValue = 4000

// linCluster is a managed cluster under the fault test, with every process
// it ran (also the killed ones) for the artifacts of a violation.
type linCluster struct {
	*managed
	cfg   linConfig
	mu    sync.Mutex
	procs []linProc
}

type linProc struct {
	name string
	p    *proctest.Proc
}

func startLinCluster(t *testing.T, cfg linConfig, l0 int) *linCluster {
	t.Helper()
	m := startManagedSpec(t, managedSpec{servers: cfg.servers, replicas: cfg.Replicas, masters: 2, replication: cfg.replication,
		serverArgs: linEngineArgs(cfg, l0), transport: cfg.Transport})
	c := &linCluster{managed: m, cfg: cfg}
	for i, p := range m.masters {
		c.procs = append(c.procs, linProc{fmt.Sprintf("m%d", i+1), p})
	}
	for name, s := range m.servers {
		c.procs = append(c.procs, linProc{name, s.p})
	}
	return c
}

// restart starts the stopped or killed server name again, on its volume.
func (c *linCluster) restart(t *testing.T, name string) {
	t.Helper()
	s := c.servers[name]
	s.start(t)
	c.mu.Lock()
	c.procs = append(c.procs, linProc{name, s.p})
	c.mu.Unlock()
}

// newMaster starts one more master.
func (c *linCluster) newMaster(t *testing.T) {
	t.Helper()
	c.startMaster(t)
	c.mu.Lock()
	c.procs = append(c.procs, linProc{fmt.Sprintf("m%d", len(c.masters)), c.masters[len(c.masters)-1]})
	c.mu.Unlock()
}

// saveLogs copies every process's output into dir.
func (c *linCluster) saveLogs(t *testing.T, dir string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.procs {
		f := filepath.Join(dir, fmt.Sprintf("%02d-%s.log", i, p.name))
		if err := os.WriteFile(f, []byte(p.p.Output(t)), 0o644); err != nil {
			t.Errorf("saving %s's log: %v", p.name, err)
		}
	}
}

// load reads the published map.
func (c *linCluster) load(t *testing.T) *regionmap.Map {
	t.Helper()
	for range 100 {
		m, err := c.zs.Load(ctx(t))
		if err == nil {
			return m
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the region map cannot be read from ZooKeeper")
	return nil
}

// waitMapFor waits up to d for a published map satisfying ok.
func (c *linCluster) waitMapFor(t *testing.T, d time.Duration, ok func(*regionmap.Map) bool) (*regionmap.Map, bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		m := c.load(t)
		if ok(m) {
			return m, true
		}
		if time.Now().After(deadline) {
			return m, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// engineCounters are the fields of a server's engine stats the fault
// timing watches.
type engineCounters struct {
	LogSeals           uint64
	IndexSegmentsBuilt uint64
	Compactions        uint64
	GCFreed            uint64
}

// copiesComplete waits up to d until every backup of region 1 (the map's
// group) says its copy is complete at the map's epoch: the group holds 3
// (or 2) copies of every acknowledged write, not only in the map.
func (c *linCluster) copiesComplete(t *testing.T, d time.Duration) bool {
	t.Helper()
	cl, err := client.Open(ctx(t), client.Config{Map: c.zs, Transport: c.cfg.Transport})
	if err != nil {
		return false
	}
	defer cl.Close()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		m := c.load(t)
		r := m.Region(1)
		all := len(r.Joining) == 0
		for _, b := range r.Backups {
			if !all {
				break
			}
			all = copyComplete(cl, b, r.ID, r.Epoch)
		}
		if all {
			return true
		}
	}
	return false
}

// copyComplete asks server name whether its copy of region id is complete
// at epoch.
func copyComplete(cl *client.Client, name string, id, epoch uint64) bool {
	cc, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b, err := cl.ServerStats(cc, name)
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

// counters asks server name for its engine counters through cl.
func counters(cl *client.Client, name string) (engineCounters, error) {
	cc, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	b, err := cl.ServerStats(cc, name)
	if err != nil {
		return engineCounters{}, err
	}
	var st struct {
		Engine engineCounters `json:"engine"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return engineCounters{}, fmt.Errorf("stats of %s: %w", name, err)
	}
	return st.Engine, nil
}

// waitCounter polls server name's counters until field grows, for at most
// d; it reports whether it saw the change (the caller acts right after).
func (c *linCluster) waitCounter(t *testing.T, name string, d time.Duration, field func(engineCounters) uint64) bool {
	t.Helper()
	// A client of its own: a connection to a server that was since killed
	// stays broken in a client.
	cl, err := client.Open(ctx(t), client.Config{Map: c.zs, Transport: c.cfg.Transport})
	if err != nil {
		return false
	}
	defer cl.Close()
	first, err := counters(cl, name)
	if err != nil {
		return false
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); {
		cur, err := counters(cl, name)
		if err != nil {
			return false
		}
		if field(cur) > field(first) {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// lagSource is a region map source for clients that lag the map: they do
// not follow the map's watch (only a failed or redirected operation makes
// them reload), and while frozen, a reload returns the map they were
// frozen at, as a slow ZooKeeper follower would.
type lagSource struct {
	zs     *client.ZooKeeper
	mu     sync.Mutex
	frozen *regionmap.Map
	until  time.Time
}

func (s *lagSource) Load(ctx context.Context) (*regionmap.Map, error) {
	s.mu.Lock()
	if s.frozen != nil && time.Now().Before(s.until) {
		m := s.frozen
		s.mu.Unlock()
		return m, nil
	}
	s.mu.Unlock()
	return s.zs.Load(ctx)
}

// freeze makes reloads return m until until.
func (s *lagSource) freeze(m *regionmap.Map, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen, s.until = m, until
}

// String names the map a source serves, for logs.
func (s *lagSource) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frozen == nil {
		return "live"
	}
	return fmt.Sprintf("frozen at v%d until %s", s.frozen.Version, s.until.Format(time.StampMilli))
}

// primaryOf returns region id's primary in m.
func primaryOf(m *regionmap.Map, id uint64) string { return m.Region(id).Primary }

// groupOf returns region id's primary, then its backups.
func groupOf(m *regionmap.Map, id uint64) []string {
	r := m.Region(id)
	return append([]string{r.Primary}, r.Backups...)
}

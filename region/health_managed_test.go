package region

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/go-zookeeper/zk"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/zkserver"
)

// A managed server's full disk, through ZooKeeper without a master: the
// test writes the maps a master would, and checks what the server
// publishes (its registration, its health znode).

var (
	diskPlenty = vfs.DiskUsage{AvailBytes: 1 << 30, TotalBytes: 2 << 30, UsedBytes: 1 << 30}
	diskFull   = vfs.DiskUsage{AvailBytes: 16 << 20, TotalBytes: 2 << 30, UsedBytes: 2<<30 - 16<<20}
)

// healthRig is managed server rs2 with its volume in memory (free space
// set by the test), its ZooKeeper, and the test's session.
type healthRig struct {
	zk  *zkserver.Server
	s   *Server
	mem *vfs.MemFS
	ts  *coord.Session
}

func startHealthRig(t *testing.T, edit func(*Config)) *healthRig {
	t.Helper()
	r := &healthRig{zk: zkserver.ForTest(t), mem: vfs.NewMem()}
	r.mem.TestingSetDiskUsage(diskPlenty)
	dir := t.TempDir()
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm = "rs2", filepath.Join(dir, "rs2"), "", filepath.Join(dir, "rs2.sock")
	cfg.Zookeeper, cfg.ZKSessionTimeout = r.zk.Addr(), Duration(time.Second)
	cfg.SegmentSize, cfg.L0Pairs, cfg.GrowthFactor = 64<<10, 256, 2
	cfg.GrowStep = 256 << 10
	if edit != nil {
		edit(&cfg)
	}
	var err error
	if r.ts, err = coord.Dial(ctx(t), coord.Config{Servers: []string{r.zk.Addr()}, Root: cfg.ZKRoot}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.ts.Close)
	if r.s, err = Start(cfg, zaptest.NewLogger(t).Named("rs2"), WithFS(r.mem)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.s.Close() })
	return r
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// run is rs2's registered run (0: not registered).
func (r *healthRig) run(t *testing.T) int64 {
	t.Helper()
	live, err := r.ts.Servers(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return live["rs2"].Started
}

// health is rs2's health znode (ok false: none).
func (r *healthRig) health(t *testing.T) (coord.Health, bool) {
	t.Helper()
	hs, err := r.ts.HealthReports(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	h, ok := hs["rs2"]
	return h, ok
}

// writeMap publishes m as the master would, and waits until rs2 installed
// it.
func (r *healthRig) writeMap(t *testing.T, m *regionmap.Map) {
	t.Helper()
	if m.Version == 1 {
		if err := r.ts.CreateMap(ctx(t), m); err != nil {
			t.Fatal(err)
		}
	} else {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.ts.Conn().Set(r.s.cfg.ZKRoot+"/map", data, -1); err != nil {
			t.Fatal(err)
		}
	}
	within(t, 10*time.Second, "map installed", func() bool { return r.s.MapVersion() >= m.Version })
}

// fill takes the volume's free segments until an allocation fails for
// want of space on a full file system: the server's health turns
// no-space.
func (r *healthRig) fill(t *testing.T) {
	t.Helper()
	r.mem.TestingSetDiskUsage(diskFull)
	for i := 0; ; i++ {
		if _, _, err := r.s.vol.AllocSegment(); errors.Is(err, engine.ErrNoSpace) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if i > 1<<16 {
			t.Fatal("the volume never ran out of space")
		}
	}
	r.s.health.poke()
}

// within polls cond until it holds, failing after d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stays checks that cond holds for d.
func stays(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !cond() {
			t.Fatalf("%s no longer holds", what)
		}
	}
}

// healthMap is a map of rs1 (a server that does not run: nothing connects
// to rs2) and rs2 at run: region 1 is rs1's with backup rs2, region 2 is
// primary's with no backup.
func healthMap(version uint64, run int64, primary2 string, epoch2 uint64) *regionmap.Map {
	return &regionmap.Map{Version: version, Replicas: 2,
		Servers: []regionmap.Server{{Name: "rs1", Shm: "/nonexistent/rs1.sock", Started: 1}, {Name: "rs2", Shm: "/nonexistent/rs2.sock", Started: run}},
		Regions: []regionmap.Assignment{
			{ID: 1, End: "m", Primary: "rs1", Backups: []string{"rs2"}, Epoch: 1},
			{ID: 2, Start: "m", Primary: primary2, Epoch: epoch2},
		}}
}

// TestHealthBackupOnlyPublishesInPlace: a managed server that is primary
// of nothing (a backup only) whose disk fills publishes its health znode
// for the run it is registered as and keeps that registration: its backup
// copies stay in their groups (a re-registration would be a restart to the
// master, which takes a restarted server out of every group). Made
// primary of a region later in the episode (a promotion, or a decision
// that predates its znode), it steps down, once: it registers a new run
// and its health znode names that run; a region then given back to the
// new run does not make it step down again. Once space returns it deletes
// the znode and keeps its run.
func TestHealthBackupOnlyPublishesInPlace(t *testing.T) {
	r := startHealthRig(t, nil)
	within(t, 10*time.Second, "rs2 registered", func() bool { return r.run(t) != 0 })
	run0 := r.run(t)
	r.writeMap(t, healthMap(1, run0, "rs1", 1))
	backup := r.s.backupOf(1) != nil
	if !backup {
		t.Fatal("rs2 does not hold region 1's backup copy")
	}

	r.fill(t)
	waitHealth(t, r.s, "no-space")
	within(t, 10*time.Second, "the health znode", func() bool { _, ok := r.health(t); return ok })
	if h, _ := r.health(t); h.Started != run0 || h.State != coord.HealthNoSpace {
		t.Fatalf("the health znode names run %d (%s); want the registered run %d: a backup-only server publishes in place", h.Started, h.State, run0)
	}
	stays(t, time.Second, "rs2 registered as its first run", func() bool { return r.run(t) == run0 })
	backup = r.s.backupOf(1) != nil
	if !backup || !r.s.cluster.knows(r.s.state.Load().m, "rs2") {
		t.Fatal("rs2 dropped its backup role")
	}

	// Made primary of region 2 (a decision that did not see its znode):
	// it steps down.
	r.writeMap(t, healthMap(2, run0, "rs2", 2))
	var run1 int64
	within(t, 10*time.Second, "a step-down's new run", func() bool { run1 = r.run(t); return run1 != run0 && run1 != 0 })
	within(t, 10*time.Second, "the health znode of the new run", func() bool { h, _ := r.health(t); return h.Started == run1 })
	if st := r.s.state.Load(); len(st.hostedIDs()) != 0 || r.s.cluster.knows(st.m, "rs2") {
		t.Fatalf("after its step-down rs2 serves %d regions as primary of map %d", len(st.hostedIDs()), st.m.Version)
	}

	// The master gives region 2 back to the new run (no other copy): the
	// episode stepped down already.
	r.writeMap(t, healthMap(3, run1, "rs2", 3))
	stays(t, 1500*time.Millisecond, "rs2 registered as its second run", func() bool { return r.run(t) == run1 })

	// Space returns: healthy, same run, no znode.
	r.mem.TestingSetDiskUsage(diskPlenty)
	waitHealth(t, r.s, "ok")
	within(t, 10*time.Second, "the health znode deleted", func() bool { _, ok := r.health(t); return !ok })
	if got := r.run(t); got != run1 {
		t.Fatalf("rs2 registered run %d after space returned, want %d", got, run1)
	}
}

// TestHealthStepDownEscalates: a primary whose disk fills steps down, but
// ZooKeeper refuses its health znode (the health directory's ACL denies
// creating it: an error no retry cures), so it cannot register its new
// run. It serves nothing, and its old run's registration would keep the
// master from moving its regions: after stepDownWithin it deletes that
// registration (the master fails it over as a dead server), and registers
// its new run, health znode first, once ZooKeeper takes it. If it cannot
// deregister either (the servers directory denies deletes), it closes its
// ZooKeeper session: the registration goes with it.
func TestHealthStepDownEscalates(t *testing.T) {
	for _, c := range []struct {
		name         string
		noDeregister bool
	}{{name: "deregisters"}, {name: "closes the session", noDeregister: true}} {
		t.Run(c.name, func(t *testing.T) {
			r := startHealthRig(t, nil)
			root := r.s.cfg.ZKRoot
			within(t, 10*time.Second, "rs2 registered", func() bool { return r.run(t) != 0 })
			run0 := r.run(t)
			r.writeMap(t, healthMap(1, run0, "rs2", 1)) // rs2 is region 2's primary
			within(t, 10*time.Second, "region 2 served", func() bool { return len(r.s.state.Load().hostedIDs()) == 1 })
			if _, err := r.ts.Conn().Create(root+"/health", nil, 0, zk.WorldACL(zk.PermRead|zk.PermAdmin)); err != nil {
				t.Fatal(err)
			}
			if c.noDeregister {
				if _, err := r.ts.Conn().SetACL(root+"/servers", zk.WorldACL(zk.PermAll&^zk.PermDelete), -1); err != nil {
					t.Fatal(err)
				}
			}
			r.fill(t)
			waitHealth(t, r.s, "no-space")
			// Without the bound the step-down retried for ever, its old run
			// registered.
			within(t, 10*time.Second, "the old run's registration gone", func() bool { return r.run(t) != run0 })
			if st := r.s.state.Load(); len(st.hostedIDs()) != 0 {
				t.Fatalf("rs2 still serves %d regions as primary", len(st.hostedIDs()))
			}
			if _, err := r.ts.Conn().SetACL(root+"/health", zk.WorldACL(zk.PermAll), -1); err != nil {
				t.Fatal(err)
			}
			if c.noDeregister {
				if !r.s.cluster.detached.Load() {
					t.Fatal("the session was not closed")
				}
				stays(t, 2*time.Second, "rs2 unregistered (its session closed: a restart rejoins)", func() bool { return r.run(t) == 0 })
				return
			}
			var run1 int64
			within(t, 10*time.Second, "the new run registered once zookeeper takes its health znode", func() bool { run1 = r.run(t); return run1 != 0 })
			if run1 == run0 {
				t.Fatal("registered as the old run")
			}
			if h, ok := r.health(t); !ok || h.Started != run1 {
				t.Fatalf("health znode %+v (present %v), want one for run %d", h, ok, run1)
			}
		})
	}
}

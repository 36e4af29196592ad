package region_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
)

// TestInprocClusterServes: three managed servers in this process come up
// under the master's map, and a client writes and reads every region.
func TestInprocClusterServes(t *testing.T) {
	c := startInprocCluster(t, 3)
	acked := c.write(0, 300, "v1")
	c.readBack("after the writes", acked)
	if _, err := c.cl.Get(ctxFor(t, 10*time.Second), []byte("k-missing")); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get of a key never written = %v, want ErrNotFound", err)
	}
	m, _ := c.coord.Map()
	for _, r := range m.Regions {
		if len(r.Backups) != 2 || len(r.Joining) != 0 {
			t.Fatalf("region %d of a healthy cluster: %+v", r.ID, r)
		}
	}
}

// TestInprocPrimaryCrashPromotesBackup: the primary of region 1 crashes
// under writers (its unsynced data lost, its connections broken, its
// session gone); the master promotes one of its backups, writes go on,
// and every acknowledged write reads back from the new primaries.
func TestInprocPrimaryCrashPromotesBackup(t *testing.T) {
	c := startInprocCluster(t, 3)
	acked := c.write(0, 300, "v1")
	w := c.startWriters(2)
	waitFor(t, 10*time.Second, "writes before the crash", func() bool { return w.count() >= 50 })
	before, _ := c.coord.Map()
	r := *before.Region(1)
	c.crash(r.Primary)
	after := c.waitMap("region 1 failed over", func(m *regionmap.Map) bool {
		nr := m.Region(1)
		return nr.Primary != r.Primary && without(r.Primary)(m)
	})
	if nr := after.Region(1); !slices.Contains(r.Backups, nr.Primary) || nr.Epoch <= r.Epoch {
		t.Fatalf("region %+v after its primary crashed: %+v; want a backup promoted at a new epoch", r, nr)
	}
	c.writersGoOnThenReadBack(w, 50, "after the failover", acked)
}

// TestInprocCrashedServerRestartsOnSyncedData: a crashed server restarted
// on what its file system had synced rejoins every group as a backup with
// a complete copy.
func TestInprocCrashedServerRestartsOnSyncedData(t *testing.T) {
	c := startInprocCluster(t, 3)
	acked := c.write(0, 300, "v1")
	m, _ := c.coord.Map()
	name := m.Region(3).Primary
	c.crash(name)
	c.waitMap(name+" out of every group", without(name))
	c.waitServing("after the crash")
	during := c.write(300, 100, "v2")
	srv := c.start(name)
	c.waitMap(name+" a backup of every region", backupOfAll(name, c.run(name)))
	c.waitCopiesComplete(name, srv)
	c.readBack("after the rejoin", acked)
	c.readBack("written while it was down", during)
}

// TestInprocRestartedServerRejoinsSeeded: a server stopped and restarted
// on its file system rejoins as a new run: the master fails its regions
// over, then adds it back to every group as a joining backup, the
// primaries seed it and report it joined, and it is a backup with a
// complete copy of every region.
func TestInprocRestartedServerRejoinsSeeded(t *testing.T) {
	c := startInprocCluster(t, 3)
	acked := c.write(0, 300, "v1")
	m, _ := c.coord.Map()
	name := m.Region(2).Primary
	c.stop(name)
	c.waitMap(name+" out of every group", without(name))
	c.waitServing("after the stop")
	during := c.write(300, 100, "v2") // not on the stopped server's copy: seeding must bring it
	srv := c.start(name)
	run := c.run(name)
	joined := c.waitMap(name+" a backup of every region", backupOfAll(name, run))
	for _, r := range joined.Regions {
		if r.Primary == name {
			t.Fatalf("region %d given back to the restarted %s as primary: %+v", r.ID, name, r)
		}
	}
	c.waitCopiesComplete(name, srv)
	c.readBack("after the rejoin", acked)
	c.readBack("written while it was stopped", during)
}

// waitFor polls cond every 5 ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

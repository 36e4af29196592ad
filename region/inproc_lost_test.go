package region_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
)

// TestInprocPrimaryLostFailsOverAtOnce: a primary whose connections to
// its backups end as at its death (severed: no goodbye) and whose
// ZooKeeper session lives on (still registered, its read lease renewed:
// a process killed before its session expires; here it even keeps
// serving its clients, the harder case, and its requests to ZooKeeper are
// held so it reports no drop) is failed over on its backups' loss reports, without its session
// expiring; from the promotion on it answers no read (a client still on
// the old map does not read the value the new primary overwrote), and no
// acknowledged write is lost.
func TestInprocPrimaryLostFailsOverAtOnce(t *testing.T) {
	c := startInprocCluster(t, 3)
	// Region 1 gets about 1 300 writes, its L0 256 pairs: its first key's
	// value is in a level when read below (an L0 hit would wait for its
	// replication, and fail, without the confirmation).
	acked := c.write(0, 4000, "v1")
	before, _ := c.coord.Map()
	r := *before.Region(1)
	key, _ := keyOf(before, 1, 0)
	oldRun := c.run(r.Primary)
	pinned := c.clientAt(before)
	if v, err := pinned.Get(ctxFor(t, 5*time.Second), []byte(key)); err != nil || string(v) != acked[key] {
		t.Fatalf("get %s before the cut: %q, %v; want %q", key, v, err, acked[key])
	}
	start := time.Now()
	c.nodes[r.Primary].zk.cut(true)
	c.nodes[r.Primary].tr.SeverDialed()
	after := c.waitMap("region 1 failed over", func(m *regionmap.Map) bool { return m.Region(1).Primary != r.Primary })
	took := time.Since(start)
	if run := c.run(r.Primary); run != oldRun {
		t.Fatalf("the cut primary's registration changed (run %d -> %d): the failover waited for its session", oldRun, run)
	}
	if nr := after.Region(1); !slices.Contains(r.Backups, nr.Primary) || nr.Epoch <= r.Epoch {
		t.Fatalf("region %+v after its primary was lost: %+v; want a backup promoted at a new epoch", r, nr)
	}
	t.Logf("failed over %v after the cut (session timeout %v)", took, inprocSessionTimeout)
	c.putAcked(c.freshClient(), key, "v2")
	acked[key] = "v2"
	v, err := pinned.Get(ctxFor(t, 5*time.Second), []byte(key))
	if err == nil && string(v) != "v2" {
		t.Fatalf("the cut primary answered %s = %q after the new primary acknowledged %q (stale read)", key, v, "v2")
	}
	if err != nil && !errors.Is(err, client.ErrUnavailable) && !errors.Is(err, client.ErrWrongRegion) {
		t.Fatalf("get from the cut primary: %v", err)
	}
	if c.run(r.Primary) != oldRun {
		t.Fatal("the cut primary's session ended during the check: the read proves nothing")
	}
	// The cut primary learns the new map (the cluster's client follows it
	// from its WRONG_REGION), then its session's expiry.
	c.nodes[r.Primary].zk.deliverMaps()
	c.waitPlanned(r.Primary, after.Version, "depose 1")
	c.readBack("after the failover", acked)
	c.nodes[r.Primary].zk.heal()
}

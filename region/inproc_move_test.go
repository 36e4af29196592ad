package region_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// TestInprocMovePrimary: an operator's move of a live primary to one of
// its backups, with writers running. The move takes two maps (MoveTo,
// then the promotion at a new epoch); every write acknowledged before,
// during and after reads back; the old primary stays in the group (it
// joins again and is seeded) and, reached through a client that still
// routes by the map from before the move, never answers a read with the
// value the new primary overwrote.
func TestInprocMovePrimary(t *testing.T) {
	c := startInprocCluster(t, 3)
	before := c.write(0, 300, "before")
	m0, _ := c.coord.Map()
	r := *m0.Region(m0.Regions[1].ID)
	target := r.Backups[len(r.Backups)-1]
	key, _ := keyOf(m0, r.ID, 400) // not among the writes of before
	c.putAcked(c.cl, key, "old")
	w := c.startWriters(2)
	waitFor(t, 10*time.Second, "writes before the move", func() bool { return w.count() >= 100 })

	start := time.Now()
	c.coord.SetRequests(coord.Requests{Moves: map[uint64]string{r.ID: target}})
	c.waitMap("the move started", func(m *regionmap.Map) bool { return m.Region(r.ID).MoveTo == target })
	moved := c.waitMap("the target promoted", func(m *regionmap.Map) bool {
		cur := m.Region(r.ID)
		return cur.Primary == target && cur.MoveTo == "" && cur.Epoch > r.Epoch
	})
	took := time.Since(start)
	if got := moved.Region(r.ID); !slices.Contains(got.Group(), r.Primary) {
		t.Errorf("the old primary %s left the group: %+v", r.Primary, got)
	}
	waitFor(t, 10*time.Second, "the request deleted", func() bool { return len(c.coord.Requests().Moves) == 0 })
	t.Logf("region %d moved from %s to %s in %v (epoch %d -> %d)", r.ID, r.Primary, target, took, r.Epoch, moved.Region(r.ID).Epoch)

	c.putAcked(c.freshClient(), key, "new")
	lagging := c.clientAt(m0) // routes region r to its old primary
	for range 20 {
		if v, err := lagging.Get(ctxFor(t, 5*time.Second), []byte(key)); err == nil && string(v) != "new" {
			t.Fatalf("the old primary answered a read of %s with %q after the move (the new primary holds %q)", key, v, "new")
		}
	}
	c.writersGoOnThenReadBack(w, 100, "after the move", before)
	c.waitMap("the old primary back in sync", func(m *regionmap.Map) bool { return slices.Contains(m.Region(r.ID).Backups, r.Primary) })
	c.waitServing("after the move")
}

// TestInprocBalanceAfterRestart: with the master's balancer on, a server
// killed and restarted gets its share of the primaries back within 30 s
// of its restart (6 regions over 3 servers: 2 each), with writers
// running and every acknowledged write read back after.
func TestInprocBalanceAfterRestart(t *testing.T) {
	splits := []string{"k001600", "k003200", "k004800", "k006400", "k008000"}
	c := startInproc(t, inprocSetup{n: 3, replicas: 3, splits: splits, balance: true})
	even := func(m *regionmap.Map) bool {
		load := map[string]int{}
		for _, r := range m.Regions {
			if r.MoveTo != "" {
				return false
			}
			load[r.Primary]++
		}
		return len(load) == 3 && load["rs1"] == 2 && load["rs2"] == 2 && load["rs3"] == 2
	}
	c.waitMap("primaries spread at the start", even)
	before := c.write(0, 600, "before")
	w := c.startWriters(2)
	waitFor(t, 10*time.Second, "writes before the kill", func() bool { return w.count() >= 100 })
	c.crash("rs1")
	c.waitMap("rs1's primaries failed over", func(m *regionmap.Map) bool {
		return !slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool { return r.Primary == "rs1" })
	})
	restart := time.Now()
	c.start("rs1")
	m := c.waitMapWithin(30*time.Second, "primaries spread evenly again", even)
	took := time.Since(restart)
	t.Logf("primaries even %v after the restart (map version %d)", took, m.Version)
	if took > 30*time.Second {
		t.Fatalf("primaries spread evenly %v after the restart, want within 30 s", took)
	}
	c.writersGoOnThenReadBack(w, 100, "after the balancing", before)
	failed, err := w.failures()
	t.Logf("puts that failed (beyond the client's retries, not acknowledged): %d (last: %v)", failed, err)
	c.waitServing(fmt.Sprintf("balanced, version %d", m.Version))
}

// TestInprocMovingRegionRetried: while a region is moving (the map names
// MoveTo, its primary released it, the promotion not published yet), a
// client on that map gets UNAVAILABLE from the old primary (not
// WRONG_REGION at its own version, on which it would give up at once)
// and keeps retrying past its redirect budget, following newer maps,
// until the promotion serves its read.
func TestInprocMovingRegionRetried(t *testing.T) {
	c := startInprocCluster(t, 3)
	m0, _ := c.coord.Map()
	r := *m0.Region(m0.Regions[1].ID)
	target := r.Backups[len(r.Backups)-1]
	key, _ := keyOf(m0, r.ID, 400)
	c.putAcked(c.cl, key, "v")

	hold := make(chan struct{})
	var once sync.Once
	unhold := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(unhold)
	c.coord.SetBeforeWrite(func() {
		if m, _ := c.coord.Map(); m.Region(r.ID).MoveTo != "" {
			<-hold // the promotion waits
		}
	})
	t.Cleanup(func() { c.coord.SetBeforeWrite(nil) })
	c.coord.SetRequests(coord.Requests{Moves: map[uint64]string{r.ID: target}})
	moving := c.waitMap("the move started", func(m *regionmap.Map) bool { return m.Region(r.ID).MoveTo == target })
	waitFor(t, 10*time.Second, "the release", func() bool {
		for _, rep := range c.coord.Reports() {
			if rr, ok := rep.(coord.ReleaseReport); ok && rr.Region == r.ID && rr.Epoch == r.Epoch {
				return true
			}
		}
		return false
	})
	cl := c.openClient(c.coord.Source(), 8) // on the moving map now; a second of retry window
	if v, _ := c.coord.Map(); v.Version != moving.Version {
		t.Fatalf("the map moved on during the hold: version %d", v.Version)
	}
	time.AfterFunc(300*time.Millisecond, unhold)
	start := time.Now()
	v, err := cl.Get(ctxFor(t, 5*time.Second), []byte(key))
	if err != nil || string(v) != "v" {
		t.Fatalf("a get while the region moved: %q, %v after %v", v, err, time.Since(start))
	}
	t.Logf("a get through the move: answered after %v (the promotion held 300 ms)", time.Since(start))
}

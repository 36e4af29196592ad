package region_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tebis-go/tebis/region"
	"github.com/tebis-go/tebis/region/regionmap"
)

// TestE2EDiskFailureFailsOver: 3 servers (sync mode, --fault-fs), 3-way
// Send-Index replication, clients writing to every region. The segment
// file of region 1's primary starts failing with EIO: the server refuses
// writes, reports itself failed (stats, health znode) and steps down
// without dying; the master promotes a backup of each of its regions and
// gives it no role; writes resume on the new primaries and every
// acknowledged write is readable. Restarted without the fault, the server
// is healthy and joins the groups again.
func TestE2EDiskFailureFailsOver(t *testing.T) {
	c := startManagedSpec(t, managedSpec{servers: 3, replicas: 3, masters: 1,
		serverArgs: []string{"--segment-size", "64KiB", "--l0-pairs", "100", "--growth-factor", "2", "--fault-fs"}})
	var keys []string
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("k%06d", i*800+1))
	}
	stop := make(chan struct{})
	w := runWriters(t, c.cl, stop, keys)
	time.Sleep(time.Second)
	m := c.cl.Map()
	r := *m.Region(1)
	victim := c.servers[r.Primary]
	t.Logf("failing the segment file of %s, primary of region 1 at epoch %d", r.Primary, r.Epoch)
	failed := time.Now()
	if err := os.WriteFile(filepath.Join(victim.dir, region.FaultFile), []byte("eio-segments\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	nm := c.waitMap(t, "region 1 moved off the failed disk", func(m *regionmap.Map) bool {
		nr := m.Region(1)
		return nr.Primary != r.Primary && nr.Epoch > r.Epoch
	})
	for {
		cc, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.cl.Put(cc, []byte("k000000"), []byte("after"))
		cancel()
		if err == nil {
			break
		}
		if time.Since(failed) > 60*time.Second {
			t.Fatalf("region 1 not serving 60 s after its primary's disk failed: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("region 1 primary %s at epoch %d, serving again %v after the fault", nm.Region(1).Primary, nm.Region(1).Epoch, time.Since(failed))
	// The failed server lives on, reports itself failed, and no region
	// gives it a role.
	c.waitMap(t, "no role for the failed server", func(m *regionmap.Map) bool {
		return !slices.ContainsFunc(m.Regions, func(o regionmap.Region) bool {
			return o.Primary == victim.name || slices.Contains(o.Group(), victim.name)
		})
	})
	b, err := c.cl.ServerStats(ctx(t), victim.name)
	if err != nil {
		t.Fatalf("stats of the failed server (it must live on): %v", err)
	}
	var st region.ServerStats
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if st.Health != "failed" || !strings.Contains(st.HealthError, "input/output error") {
		t.Fatalf("the failed server's stats: health %q (%s)", st.Health, st.HealthError)
	}
	out := victim.p.Output(t)
	for _, want := range []string{"the volume cannot store writes", "stepping down", "health znode published"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failed server's log lacks %q", want)
		}
	}
	time.Sleep(time.Second)
	close(stop)
	w.verify(t, c.cl)
	t.Logf("%d keys verified; longest write outage %v", len(w.acked), w.outage)

	// Restarted without the fault: healthy, it joins the groups again.
	victim.p.Kill()
	if err := os.Remove(filepath.Join(victim.dir, region.FaultFile)); err != nil {
		t.Fatal(err)
	}
	victim.start(t)
	c.waitMap(t, "groups full again", healed)
	w.verify(t, c.cl)
}

package region_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/region"
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
		return !slices.ContainsFunc(m.Regions, func(o regionmap.Assignment) bool {
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

// TestE2EDiskFullFailsOverThenRejoins: region 1's primary keeps its data
// directory on a small tmpfs (root only) that fills up while clients
// write: the server refuses writes, reports no space and steps down
// without dying; the master moves its regions to their backups and gives
// it no role; writes resume and nothing acknowledged is lost. Once space
// returns (a filler file is removed) the server probes, reports itself
// healthy, and the master gives it its backup roles back.
func TestE2EDiskFullFailsOverThenRejoins(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	const victim = "rs1" // region 1's primary in the initial map
	c := startManagedSpec(t, managedSpec{servers: 3, replicas: 3, masters: 1,
		serverArgs: []string{"--segment-size", "64KiB", "--l0-pairs", "100", "--growth-factor", "2", "--grow-step", "256KiB", "--space-reserve", "8MiB"},
		prepare: func(t *testing.T, s *server) {
			if s.name != victim {
				return
			}
			if err := os.MkdirAll(s.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", s.dir).CombinedOutput(); err != nil {
				t.Skipf("mount tmpfs: %v %s", err, out)
			}
			t.Cleanup(func() {
				if out, err := exec.Command("umount", "-l", s.dir).CombinedOutput(); err != nil {
					t.Logf("umount: %v %s", err, out)
				}
			})
		}})
	m := c.cl.Map()
	r := *m.Region(1)
	if r.Primary != victim {
		t.Fatalf("region 1's primary is %s, not %s", r.Primary, victim)
	}
	dir := c.servers[victim].dir
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	// Leave 2 MiB above the reserve.
	filler := filepath.Join(dir, "filler")
	if avail := int64(fs.Bavail) * fs.Bsize; avail > 10<<20 {
		if err := os.WriteFile(filler, make([]byte, avail-10<<20), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	health := func() region.ServerStats {
		t.Helper()
		b, err := c.cl.ServerStats(ctx(t), victim)
		if err != nil {
			t.Fatalf("stats of %s (it must live on): %v", victim, err)
		}
		var st region.ServerStats
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	acked := map[string]string{}
	put := func(k, v string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			cc, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := c.cl.Put(cc, []byte(k), []byte(v))
			cancel()
			if err == nil {
				acked[k] = v
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("put %s not acknowledged in 60 s: %v", k, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	full := time.Time{}
	for i := 0; i < 3200 && full.IsZero(); i++ {
		put(fmt.Sprintf("k%06d", i), fmt.Sprintf("%08192d", i))
		if i%16 == 0 && health().Health == "no-space" {
			full = time.Now()
		}
	}
	if full.IsZero() {
		t.Fatal("the tmpfs never filled")
	}
	t.Logf("%s out of space after %d puts: %s", victim, len(acked), health().HealthError)
	c.waitMap(t, "region 1 moved off the full disk, no role for its server", func(m *regionmap.Map) bool {
		return m.Region(1).Primary != victim && !slices.ContainsFunc(m.Regions, func(o regionmap.Assignment) bool {
			return o.Primary == victim || slices.Contains(o.Group(), victim)
		})
	})
	put("k000000", "after the failover")
	t.Logf("region 1 serving again on %s %v after the disk filled", c.cl.Map().Region(1).Primary, time.Since(full))
	for k, v := range acked {
		if got, err := c.cl.Get(ctx(t), []byte(k)); err != nil || string(got) != v {
			t.Fatalf("key %s: %.20q %v", k, got, err)
		}
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c.waitMap(t, "the server back in every group", healed)
	if st := health(); st.Health != "ok" {
		t.Fatalf("%s back in the groups with health %q (%s)", victim, st.Health, st.HealthError)
	}
	put("k000001", "after space returned")
	for k, v := range acked {
		if got, err := c.cl.Get(ctx(t), []byte(k)); err != nil || string(got) != v {
			t.Fatalf("key %s: %.20q %v", k, got, err)
		}
	}
	out := c.servers[victim].p.Output(t)
	for _, want := range []string{"stepping down", "space returned: accepting writes again", "health znode deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s's log lacks %q", victim, want)
		}
	}
}

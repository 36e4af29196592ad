package region_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/testseed"
)

// regionProbe puts to one key of a region in a loop and records the
// longest time between two acknowledged puts (the region's longest
// unavailability as a client sees it).
type regionProbe struct {
	key     string
	mu      sync.Mutex
	last    time.Time
	longest time.Duration
	at      time.Time // when the longest gap ended
}

func (p *regionProbe) run(c *managed, stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	p.last = time.Now()
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		cc, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := c.cl.Put(cc, []byte(p.key), []byte(fmt.Sprint(seq)))
		cancel()
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		now := time.Now()
		p.mu.Lock()
		if gap := now.Sub(p.last); gap > p.longest {
			p.longest, p.at = gap, now
		}
		p.last = now
		p.mu.Unlock()
	}
}

// TestE2ETwoServersKilledRestarted: 3 servers, 3 regions, 3-way
// Send-Index, clients writing to every region. Two servers are killed
// (SIGKILL) at once and restarted right away, before their sessions
// expire: the map still lists them when they come back. Every region must
// serve again within the session timeout plus a few seconds (the
// surviving server must not hold its regions, or its map installs, while
// it dials backups that are restarting), and the groups heal. The servers'
// logs are searched for the signs of attaches held up and of backups
// seeded whole.
func TestE2ETwoServersKilledRestarted(t *testing.T) {
	restart := func(t *testing.T, c *managed, name string) string {
		out := c.servers[name].p.Output(t)
		c.servers[name].start(t)
		return out
	}
	t.Run("together", func(t *testing.T) {
		twoServersKilled(t, func(c *managed) []string {
			c.servers["rs2"].p.Kill()
			c.servers["rs3"].p.Kill()
			time.Sleep(200 * time.Millisecond)
			return []string{restart(t, c, "rs2"), restart(t, c, "rs3")}
		})
	})
	// The second kill lands while the first one's failover runs (the
	// sessions expire apart: a map may still name the other victim a
	// backup while it restarts).
	t.Run("staggered", func(t *testing.T) {
		twoServersKilled(t, func(c *managed) []string {
			c.servers["rs2"].p.Kill()
			time.Sleep(700 * time.Millisecond)
			c.servers["rs3"].p.Kill()
			out := restart(t, c, "rs2")
			time.Sleep(300 * time.Millisecond)
			return []string{out, restart(t, c, "rs3")}
		})
	})
}

// twoServersKilled runs kill (which kills and restarts two servers and
// returns their logs before the restart) against a 3-server cluster
// under writes, and checks every region's longest unavailability.
func twoServersKilled(t *testing.T, kill func(c *managed) []string) {
	c := startManagedL0(t, 3, "50")
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 31))
	writeRandom(t, c.cl, rng, 600)
	c.waitMap(t, "groups full", healed)
	probes := []*regionProbe{{key: "k000001.u"}, {key: "k004000.u"}, {key: "k008000.u"}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Add(1)
		go p.run(c, stop, &wg)
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})
	time.Sleep(time.Second)
	killed := time.Now()
	outs := kill(c)
	m := c.waitMap(t, "groups full after the restarts", healed)
	t.Logf("groups full again %v after the kill (map version %d)", time.Since(killed), m.Version)
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	const bound = 1*time.Second + 5*time.Second // session timeout + a few seconds
	var worst time.Duration
	for _, p := range probes {
		t.Logf("region of %s: longest unavailability %v (ended %v after the kill)", p.key, p.longest, p.at.Sub(killed))
		worst = max(worst, p.longest)
	}
	for _, s := range c.servers {
		outs = append(outs, s.p.Output(t))
	}
	logSigns(t, strings.Join(outs, "\n"))
	if worst > bound {
		t.Fatalf("a region was unavailable for %v, more than %v", worst, bound)
	}
}

// logSigns logs how often the servers' logs (all) show an attach held up
// or a backup caught up the long way, and those lines.
func logSigns(t *testing.T, all string) {
	t.Helper()
	for _, msg := range []string{"regions still waiting for their backups", "i/o timeout", "attach superseded",
		"pre-seeded backup not brought up to date", "backup brought up to date after its pre-seed", "backup out of sync", "backup seeded",
		"queued commands did not all reach"} {
		t.Logf("%q: %d times in the servers' logs", msg, strings.Count(all, msg))
	}
	for _, line := range strings.Split(all, "\n") {
		if strings.Contains(line, "out of sync") || strings.Contains(line, "not brought up to date") ||
			strings.Contains(line, "still waiting") || strings.Contains(line, "i/o timeout") || strings.Contains(line, "superseded") ||
			strings.Contains(line, "queued commands did not all reach") {
			t.Log(line)
		}
	}
}

// TestE2EBalanceAfterRestart: 3 servers, 3 regions, 3-way Send-Index,
// the master balancing primaries, writers on every region. A server is
// killed (SIGKILL) and restarted once its regions failed over: it rejoins
// every group as a joining backup and, within 30 s of its restart, is
// primary of one region again (one each), and every acknowledged write
// reads back.
func TestE2EBalanceAfterRestart(t *testing.T) {
	c := startManagedSpec(t, managedSpec{servers: 3, replicas: 3, masters: 1, balance: true,
		serverArgs: []string{"--segment-size", "2MiB", "--l0-pairs", "4096", "--growth-factor", "4"}})
	even := func(m *regionmap.Map) bool {
		load := map[string]int{}
		for _, r := range m.Regions {
			if r.MoveTo != "" {
				return false
			}
			load[r.Primary]++
		}
		return load["rs1"] == 1 && load["rs2"] == 1 && load["rs3"] == 1
	}
	c.waitMap(t, "one primary each at the start", even)
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 33))
	before := writeRandom(t, c.cl, rng, 3000)
	stop := make(chan struct{})
	w := runWriters(t, c.cl, stop, []string{"k000001.b", "k004000.b", "k008000.b", "k001000.b", "k005000.b", "k009000.b"})
	time.Sleep(time.Second)
	c.servers["rs1"].p.Kill()
	c.waitMap(t, "rs1's region failed over", func(m *regionmap.Map) bool {
		return !slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool { return r.Primary == "rs1" })
	})
	restarted := time.Now()
	c.servers["rs1"].start(t)
	deadline := restarted.Add(30 * time.Second)
	var m *regionmap.Map
	for {
		var err error
		if m, err = c.zs.Load(ctx(t)); err == nil && even(m) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("primaries not spread evenly 30 s after the restart: %+v", m)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("one primary each %v after the restart (map version %d)", time.Since(restarted).Round(time.Millisecond), m.Version)
	time.Sleep(time.Second)
	close(stop)
	w.verify(t, c.cl)
	for k, want := range before {
		got, err := c.cl.Get(ctx(t), []byte(k))
		if want == nil && errors.Is(err, client.ErrNotFound) {
			continue // deleted
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("key %s written before the kill: %q, %v; want %q", k, got, err, want)
		}
	}
	w.mu.Lock()
	t.Logf("%d keys written before, %d by the writers, longest write outage %v", len(before), len(w.acked), w.outage)
	w.mu.Unlock()
}

// TestE2EPromotedBackupsInSync: 3 servers, 3-way Send-Index, clients
// writing. Rounds of SIGKILL of region 1's primary, its restart after the
// promotion, the groups healed: the backup that survived each failover
// rebases onto the promoted one and passes the stream check (it missed
// nothing: no "backup out of sync", no seed); only the restarted server's
// stale copies are seeded.
func TestE2EPromotedBackupsInSync(t *testing.T) {
	c := startManagedL0(t, 3, "50")
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 37))
	writeRandom(t, c.cl, rng, 600)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	probes := []*regionProbe{{key: "k000001.u"}, {key: "k004000.u"}, {key: "k008000.u"}}
	for _, p := range probes {
		wg.Add(1)
		go p.run(c, stop, &wg)
	}
	// Background writes over many keys: L0s fill, compactions and log
	// frees are shipped while the primaries die.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cc, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = c.cl.Put(cc, fmt.Appendf(nil, "k%06d.b", rng.IntN(9600)), fmt.Appendf(nil, "%d", i))
			cancel()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})
	var outs []string
	for round := range 3 {
		m := c.waitMap(t, "groups full", healed)
		time.Sleep(time.Second) // compactions under way
		r := *m.Region(1)
		victim := c.servers[r.Primary]
		victim.p.Kill()
		c.waitMap(t, "region 1 promoted", func(m *regionmap.Map) bool { return m.Region(1).Epoch > r.Epoch && m.Region(1).Primary != r.Primary })
		outs = append(outs, victim.p.Output(t))
		victim.start(t)
		t.Logf("round %d: killed %s, restarted", round, r.Primary)
	}
	c.waitMap(t, "groups full after the last restart", healed)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	for _, s := range c.servers {
		outs = append(outs, s.p.Output(t))
	}
	all := strings.Join(outs, "\n")
	logSigns(t, all)
	var bad []string
	for _, line := range strings.Split(all, "\n") {
		if strings.Contains(line, "kind\": \"rebase") || strings.Contains(line, "kind\": \"check") {
			bad = append(bad, line)
		}
	}
	// A refused rebase or check is repaired by a whole seed (safe, but the
	// region's writes are held while it is copied): after an ordinary
	// failover the surviving backup missed nothing, and a re-attach hands
	// the retired stream's queued commands over first. (A kill between the
	// old primary's copies of one compaction to the two backups leaves
	// them genuinely diverged, and is refused: a window of the backups'
	// install of one level: seen once in 3 of 11 runs on a loaded machine,
	// 0 in 22 others.) So a run fails when refusals are the normal path
	// (before the fix: 2-3 in 3 failovers, in 4 of 8 runs), not on one.
	if len(bad) >= 2 {
		for _, line := range bad {
			t.Errorf("a backup refused its rebase or check: %s", line)
		}
	} else if len(bad) == 1 {
		t.Logf("one refused rebase or check in 3 failovers (a kill between two backups' installs of one compaction?): %s", bad[0])
	}
}

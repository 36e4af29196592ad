package region_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
)

// Every role transition of plan (plan.go), end to end in process: each
// test drives the cluster into one and checks, in the servers' logs of
// the maps they installed, that the step was taken, and the guarantee it
// must keep.

// TestInprocOpenAttachThenServeUnchanged: on the initial map every
// primary opens its region and attaches its backups (which open their
// replicas); a later map that changes no group (a fourth server
// registers: the groups are full) keeps every region and serves it on
// its stream as it is: no re-attach, not one put of the writers fails,
// and every acknowledged write reads back.
func TestInprocOpenAttachThenServeUnchanged(t *testing.T) {
	c := startInprocCluster(t, 3)
	m0, _ := c.coord.Map()
	for _, r := range m0.Regions {
		id := r.ID
		if !c.planned(r.Primary, 0, fmt.Sprint("open ", id)) || !c.planned(r.Primary, 0, fmt.Sprint("attach ", id)) {
			t.Fatalf("region %d: its primary %s did not open and attach it; plans: %q", id, r.Primary, c.plans(r.Primary))
		}
		for _, b := range r.Backups {
			if !c.planned(b, 0, fmt.Sprint("open-backup ", id)) {
				t.Fatalf("region %d: its backup %s did not open its replica; plans: %q", id, b, c.plans(b))
			}
		}
	}
	acked := c.write(0, 200, "v1")
	w := c.startWriters(2)
	waitFor(t, 10*time.Second, "writes", func() bool { return w.count() >= 50 })
	c.start("rs4")
	m1 := c.waitMap("rs4 in the map", func(m *regionmap.Map) bool { _, ok := m.Server("rs4"); return ok })
	for _, r := range m1.Regions {
		if o := m0.Region(r.ID); o.Primary != r.Primary || o.Epoch != r.Epoch || !slices.Equal(o.Group(), r.Group()) {
			t.Fatalf("region %d changed when rs4 registered: %+v -> %+v", r.ID, o, r)
		}
		c.waitPlanned(r.Primary, m1.Version, fmt.Sprint("keep ", r.ID))
		c.waitPlanned(r.Primary, m1.Version, fmt.Sprint("serve ", r.ID))
		if c.planned(r.Primary, m1.Version, fmt.Sprint("attach ", r.ID)) || c.planned(r.Primary, m1.Version, fmt.Sprint("reattach ", r.ID)) {
			t.Fatalf("region %d re-attached on a map that changed no group; plans of %s: %q", r.ID, r.Primary, c.plans(r.Primary))
		}
	}
	n := w.count()
	waitFor(t, 10*time.Second, "writes after the map change", func() bool { return w.count() >= n+50 })
	during := w.result()
	if failed, err := w.failures(); failed > 0 {
		t.Fatalf("%d puts failed on a map that changed no group; the last: %v", failed, err)
	}
	c.readBack("after the map change", acked)
	c.readBack("written by the writers", during)
}

// TestInprocAloneThenJoinersPreSeeded: a one-server cluster (its map
// asks for three replicas) serves every region alone; a second server
// joins: each region, serving alone, is kept and attached with it as a
// joining backup, pre-seeded while the region serves and reported
// joined; a third joins: each region, now streaming to the second, is
// re-attached and the third pre-seeded and joined. Both end with
// complete copies, and every write acknowledged before and during the
// joins reads back.
func TestInprocAloneThenJoinersPreSeeded(t *testing.T) {
	c := startInprocCluster(t, 1)
	m0, _ := c.coord.Map()
	for _, r := range m0.Regions {
		for _, step := range []string{"open", "alone"} {
			if s := fmt.Sprint(step, " ", r.ID); !c.planned("rs1", 0, s) {
				t.Fatalf("the lone server did not %q; plans: %q", s, c.plans("rs1"))
			}
		}
	}
	acked := c.write(0, 300, "v1")
	w := c.startWriters(2)
	waitFor(t, 10*time.Second, "writes", func() bool { return w.count() >= 50 })
	for i, name := range []string{"rs2", "rs3"} {
		from, _ := c.coord.Map()
		srv := c.start(name)
		joined := c.waitMap(name+" a backup of every region", backupOfAll(name, c.run(name)))
		for _, r := range joined.Regions {
			if r.Primary != "rs1" {
				t.Fatalf("region %d moved from rs1: %+v", r.ID, r)
			}
			step := "attach" // from serving alone: a first stream
			if i > 0 {
				step = "reattach" // a stream to replace
			}
			if s := fmt.Sprint(step, " ", r.ID); !c.planned("rs1", from.Version+1, s) {
				t.Fatalf("%s joining: rs1 did not %q; plans: %q", name, s, c.plans("rs1"))
			}
			if !c.logged("rs1", "joining backup pre-seeded while the region served", map[string]any{"region": r.ID, "backup": name}) {
				t.Fatalf("%s joined region %d without a pre-seed", name, r.ID)
			}
			if !c.planned(name, 0, fmt.Sprint("open-backup ", r.ID)) {
				t.Fatalf("%s did not open its replica of region %d; plans: %q", name, r.ID, c.plans(name))
			}
		}
		c.waitCopiesComplete(name, srv)
	}
	during := w.result()
	c.readBack("after the joins", acked)
	c.readBack("written during the joins", during)
}

// staleWriter puts new keys of one region through a client that routes
// by an old map (to the old primary), recording for each put when it
// was sent and whether it was acknowledged.
type staleWriter struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	puts []stalePut
}

type stalePut struct {
	key, value string
	sent       time.Time
	acked      bool
	err        error
}

func startStaleWriter(cl *client.Client, m *regionmap.Map, id uint64) *staleWriter {
	w := &staleWriter{stop: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			k, _ := keyOf(m, id, i)
			p := stalePut{key: k + "-stale", value: fmt.Sprint("stale-", i), sent: time.Now()}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			p.err = cl.Put(ctx, []byte(p.key), []byte(p.value))
			cancel()
			p.acked = p.err == nil
			w.mu.Lock()
			w.puts = append(w.puts, p)
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *staleWriter) result() []stalePut {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.puts)
}

// TestInprocPartitionedPrimaryDeposedAcksNothing: the primary of region
// 1 is cut off from the coordinator (paused: its lease held, as for
// requests that passed their lease check before the pause; its links to
// the other servers intact) and its session expires there: the master
// promotes a backup. A client still holding the old map writes to the
// old primary throughout: every write it had acknowledged reads back
// after the failover, and none sent once the new primary serves is
// acknowledged (the backups fenced the old primary). When the old
// primary gets the new map it deposes the region (its stale clients get
// no answer, not a stale one); when its session's expiry reaches it, it
// registers a new run, is added back as a joining backup, seeded, and
// ends a backup with a complete copy of every region.
func TestInprocPartitionedPrimaryDeposedAcksNothing(t *testing.T) {
	c := startInprocCluster(t, 3)
	acked := c.write(0, 300, "v1")
	m0, _ := c.coord.Map()
	victim := m0.Region(1).Primary
	stale := c.clientAt(m0)
	if err := stale.Put(ctxFor(t, 5*time.Second), []byte("k000000-before"), []byte("before")); err != nil {
		t.Fatalf("a put through the old primary before the partition: %v", err)
	}
	acked["k000000-before"] = "before"
	sw := startStaleWriter(stale, m0, 1)
	c.nodes[victim].zk.cut(true)
	c.coord.RemoveServer(victim) // its session expired at the coordinator
	after := c.waitMap("region 1 failed over", func(m *regionmap.Map) bool { return m.Region(1).Primary != victim })
	if nr := after.Region(1); !slices.Contains(m0.Region(1).Backups, nr.Primary) {
		t.Fatalf("region 1 given to %s, not a backup of %+v", nr.Primary, m0.Region(1))
	}
	// The new primary serves once a put through it is acknowledged.
	k, _ := keyOf(after, 1, 0)
	c.putAcked(c.freshClient(), k+"-new", "new")
	acked[k+"-new"] = "new"
	served := time.Now()
	early := sw.result()
	sw = startStaleWriter(stale, m0, 1) // a handful more after the new primary served
	waitFor(t, 10*time.Second, "stale puts after the new primary served", func() bool {
		sw.mu.Lock()
		defer sw.mu.Unlock()
		return len(sw.puts) >= 5
	})
	puts := sw.result()
	var late int
	for _, p := range puts {
		if p.acked && p.sent.After(served) {
			late++
			t.Errorf("the old primary acknowledged put %s=%s, sent %v after the new primary served", p.key, p.value, p.sent.Sub(served))
		}
	}
	t.Logf("%d stale puts before the new primary served (%d acknowledged), %d after (%d acknowledged: 0 expected)",
		len(early), len(slices.DeleteFunc(slices.Clone(early), func(p stalePut) bool { return !p.acked })), len(puts), late)
	// The old primary gets the new map: it deposes region 1.
	c.nodes[victim].zk.deliverMaps()
	c.waitPlanned(victim, after.Version, "depose 1")
	got, err := stale.Get(ctxFor(t, 5*time.Second), []byte(k+"-new"))
	if err == nil || errors.Is(err, client.ErrNotFound) {
		t.Fatalf("the deposed primary answered a get of %s with the old map: %q, %v; want no answer", k+"-new", got, err)
	}
	if err := stale.Put(ctxFor(t, 5*time.Second), []byte(k+"-deposed"), []byte("x")); err == nil {
		t.Fatalf("the deposed primary acknowledged a put")
	}
	// Its session's expiry reaches it: it comes back as a backup.
	c.nodes[victim].zk.heal()
	waitFor(t, 10*time.Second, victim+" registered again", func() bool { return c.run(victim) != 0 })
	c.waitMap(victim+" a backup of every region", backupOfAll(victim, c.run(victim)))
	c.waitPlanned(victim, after.Version, "open-backup 1")
	c.waitCopiesComplete(victim, c.nodes[victim].srv)
	c.readBack("after the rejoin", acked)
	for _, p := range append(early, puts...) {
		if p.acked {
			acked[p.key] = p.value
		}
	}
	c.readBack("stale puts acknowledged", acked)
}

// TestInprocPromoteWhileJoiningThenSecondFailover: region 1's map asks
// for four copies; a fourth server joins every group but cannot be
// seeded yet (it does not answer connections). Under writers, region 1's
// primary crashes: a backup is promoted, never the joining server; right
// after the new primary serves, it crashes too, and the last backup is
// promoted. The joining server then answers, is seeded and joins. Every
// acknowledged write reads back.
func TestInprocPromoteWhileJoiningThenSecondFailover(t *testing.T) {
	c := startInprocClusterOf(t, 3, 4)
	acked := c.write(0, 300, "v1")
	c.nodes["rs4"] = &inprocNode{name: "rs4", mem: newMem(), stalled: true}
	c.start("rs4")
	w := c.startWriters(2)
	waitFor(t, 10*time.Second, "writes", func() bool { return w.count() >= 50 })
	m0 := c.waitMap("rs4 joining region 1", func(m *regionmap.Map) bool { return slices.Contains(m.Region(1).Joining, "rs4") })
	first := m0.Region(1).Primary
	c.crash(first)
	m1 := c.waitMap("region 1 failed over", func(m *regionmap.Map) bool { return m.Region(1).Primary != first })
	second := m1.Region(1).Primary
	if !slices.Contains(m0.Region(1).Backups, second) {
		t.Fatalf("region 1 given to %s, not a backup of %+v", second, m0.Region(1))
	}
	c.waitPlanned(second, m0.Version+1, "promote 1")
	k, next := keyOf(m1, 1, 0)
	c.putAcked(c.freshClient(), k+"-second", "second")
	acked[k+"-second"] = "second"
	c.crash(second)
	m2 := c.waitMap("region 1 failed over again", func(m *regionmap.Map) bool { return m.Region(1).Primary != second })
	third := m2.Region(1).Primary
	if !slices.Contains(m1.Region(1).Backups, third) {
		t.Fatalf("region 1 given to %s, not a backup of %+v", third, m1.Region(1))
	}
	c.waitPlanned(third, m1.Version+1, "promote 1")
	for _, m := range c.coord.History() {
		if m.Region(1).Primary == "rs4" {
			t.Fatalf("the joining rs4 was made primary of region 1: %+v", m.Region(1))
		}
	}
	c.nodes["rs4"].tr.Unstall()
	k, _ = keyOf(m2, 1, next)
	c.putAcked(c.freshClient(), k+"-third", "third")
	acked[k+"-third"] = "third"
	c.waitMap("rs4 a backup of region 1", func(m *regionmap.Map) bool { return slices.Contains(m.Region(1).Backups, "rs4") })
	c.writersGoOnThenReadBack(w, 20, "after two failovers", acked)
}

// TestInprocSupersededAttachDoesNotHang: region 1's primary re-attaches
// (its backup rs2 crashed) while its other backup does not answer
// connections, so the attach is dialing; another crash changes region
// 1's group again. The new map supersedes the attach at once (not after
// the dial's bound), and once the backup answers the region serves
// again promptly; every acknowledged write reads back.
func TestInprocSupersededAttachDoesNotHang(t *testing.T) {
	c := startInprocCluster(t, 4)
	acked := c.write(0, 300, "v1")
	m0, _ := c.coord.Map()
	r := *m0.Region(1)
	if r.Primary != "rs1" || !slices.Equal(r.Backups, []string{"rs2", "rs3"}) {
		t.Fatalf("region 1 of the initial map: %+v", r)
	}
	w := c.startWriters(2)
	waitFor(t, 10*time.Second, "writes", func() bool { return w.count() >= 50 })
	c.nodes["rs3"].tr.Stall()
	c.crash("rs2")
	m1 := c.waitMap("rs2 out of region 1", func(m *regionmap.Map) bool { return !slices.Contains(m.Region(1).Group(), "rs2") })
	c.waitPlanned("rs1", m0.Version+1, "reattach 1")
	joiner := m1.Region(1).Joining
	if len(joiner) != 1 {
		t.Fatalf("region 1 after rs2 crashed: %+v; want one joining backup", m1.Region(1))
	}
	before, _ := c.coord.Map()
	c.crash(joiner[0])
	crashed := time.Now()
	m2 := c.waitMap(joiner[0]+" out of region 1", func(m *regionmap.Map) bool { return !slices.Contains(m.Region(1).Group(), joiner[0]) })
	// The first map without the joiner supersedes the attach (rs1 may
	// install a later one first: it sees the newest).
	from := m2.Version
	for _, m := range c.coord.History() {
		if m.Version > before.Version && m.Version < from && !slices.Contains(m.Region(1).Group(), joiner[0]) {
			from = m.Version
		}
	}
	c.waitPlanned("rs1", from, "supersede 1")
	superseded := time.Since(crashed)
	if superseded > 2*time.Second {
		t.Fatalf("the attach was superseded %v after the map changed", superseded)
	}
	c.nodes["rs3"].tr.Unstall()
	unstalled := time.Now()
	k, _ := keyOf(m2, 1, 0)
	c.putAcked(c.freshClient(), k+"-after", "after")
	acked[k+"-after"] = "after"
	if d := time.Since(unstalled); d > 3*time.Second {
		t.Fatalf("region 1 served %v after its backup answered again", d)
	}
	t.Logf("superseded %v after the crash; served %v after the backup answered", superseded, time.Since(unstalled))
	c.writersGoOnThenReadBack(w, 20, "after the superseded attach", acked)
}

// TestInprocRestartedBackupNamedPrimaryRefuses: with the master stopped,
// a backup of region 1 crashes and restarts (its replication buffer,
// holding the newest acknowledged writes, is gone) and a map forced into
// the coordinator names it region 1's primary. It must not serve the
// region: every read and write of region 1 is refused UNAVAILABLE (no
// stale value, no not-found), the old primary deposes the region and
// opens it as a backup, and the other regions' writes all read back.
func TestInprocRestartedBackupNamedPrimaryRefuses(t *testing.T) {
	c := startInprocCluster(t, 3)
	acked := c.write(0, 300, "v1")
	c.coord.Depose() // the master stops deciding
	c.crash("rs2")
	c.start("rs2")
	waitFor(t, 10*time.Second, "rs2 registered again", func() bool { return c.run("rs2") != 0 })
	forced, _ := c.coord.Map()
	forced.Version++
	for i := range forced.Servers {
		if forced.Servers[i].Name == "rs2" {
			forced.Servers[i].Started = c.run("rs2")
		}
	}
	for i := range forced.Regions {
		r := &forced.Regions[i]
		switch r.ID {
		case 1: // rs1 [rs2 rs3] -> rs2 [rs1 rs3]: the restarted backup named primary
			r.Primary, r.Backups = "rs2", []string{"rs1", "rs3"}
		case 2: // rs2 [rs3 rs1] -> rs3 [rs1]: promoted as after a failover
			r.Primary, r.Backups = "rs3", []string{"rs1"}
		case 3: // rs3 [rs1 rs2] -> rs3 [rs1]
			r.Backups = []string{"rs1"}
		}
		r.Joining = nil
		r.Epoch++
	}
	c.coord.PutMap(forced)
	c.waitPlanned("rs2", forced.Version, "incomplete 1")
	c.waitPlanned("rs1", forced.Version, "depose 1")
	c.waitPlanned("rs1", forced.Version, "open-backup 1")
	cl := c.openClient(c.coord.Source(), 3)
	others := map[string]string{}
	checked := 0
	for k, v := range acked {
		if forced.Lookup([]byte(k)).ID != 1 {
			others[k] = v
			continue
		}
		if checked++; checked > 20 {
			continue
		}
		got, err := cl.Get(ctxFor(t, 5*time.Second), []byte(k))
		if !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("get %s of region 1, named to a server with an incomplete copy: %q, %v; want unavailable", k, got, err)
		}
	}
	if err := cl.Put(ctxFor(t, 5*time.Second), []byte("k000000-refused"), []byte("x")); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("put to region 1, named to a server with an incomplete copy: %v; want unavailable", err)
	}
	c.readBack("the other regions", others)
}

// TestInprocCloseDoesNotWaitForStalledPreSeed: a lone primary pre-seeds
// a joining backup that does not answer connections (its pre-seed is
// dialing it); the primary is then stopped. Close must return promptly
// (under a second), not wait out the pre-seed's dial (replication_connect:
// 3 s here, 30 s by default): a stopping server, or a crashed run being
// freed, must not hang on a peer.
func TestInprocCloseDoesNotWaitForStalledPreSeed(t *testing.T) {
	c := startInprocCluster(t, 1)
	acked := c.write(0, 100, "v1")
	c.nodes["rs2"] = &inprocNode{name: "rs2", mem: newMem(), stalled: true}
	c.start("rs2")
	m := c.waitMap("rs2 joining region 1", func(m *regionmap.Map) bool { return slices.Contains(m.Region(1).Joining, "rs2") })
	c.waitPlanned("rs1", m.Version, "attach 1")
	waitFor(t, 10*time.Second, "a connection request to rs2 held", func() bool { return c.nodes["rs2"].tr.held.Load() > 0 })
	start := time.Now()
	c.stop("rs1")
	if d := time.Since(start); d > time.Second {
		t.Errorf("closing rs1 took %v while its pre-seed of rs2 was dialing", d)
	}
	c.nodes["rs2"].tr.Unstall()
	c.start("rs1")
	c.waitServing("after rs1 restarted")
	c.readBack("after rs1 restarted", acked)
}

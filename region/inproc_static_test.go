package region_test

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/region"
)

// plan's two steps for a region the map names this server primary of
// while its volume holds the region as something it neither hosts nor
// backs up (plan.go), end to end in process:
//
//   - open-copy: a static map is the operator's word: a copy (a
//     Send-Index backup region, or a Build-Index backup's follower region)
//     is promoted without its replication buffer, with a warning, and
//     served;
//   - fail: whether the region is a copy cannot be read (Volume.IsCopy
//     fails): a standalone install fails with the error, a managed one
//     logs "region not installed", leaves the region out and installs the
//     rest.

// staticCluster is standalone servers in this process, each on its own
// crashable in-memory file system and its view of one loopback fabric,
// under one static map file (no coordinator, no master; the embedded
// inprocCluster's coord and cl are unused). Every server is stopped when
// the test ends.
type staticCluster struct {
	*inprocCluster
	mapFile string
}

func newStaticCluster(t *testing.T) *staticCluster {
	c := &inprocCluster{t: t, fabric: rdma.NewLoopback(), nodes: map[string]*inprocNode{}, logs: newLogGate(t)}
	t.Cleanup(func() {
		for _, name := range slices.Sorted(maps.Keys(c.nodes)) {
			c.stop(name)
		}
	})
	return &staticCluster{inprocCluster: c, mapFile: filepath.Join(t.TempDir(), "map.yaml")}
}

// staticMap is the static map version v of servers a and b (each at its
// name on the fabric): region 1 over every key, primary p, backups bs, at
// epoch v, replicated by mode.
func staticMap(v uint64, mode, p string, bs ...string) *regionmap.Map {
	return &regionmap.Map{Version: v, Replication: mode,
		Servers: []regionmap.Server{{Name: "a", TCP: "a"}, {Name: "b", TCP: "b"}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: p, Backups: bs, Epoch: v}}}
}

// publish writes m as the map file (read at Start and Reload).
func (c *staticCluster) publish(m *regionmap.Map) {
	c.t.Helper()
	if err := regionmap.WriteFile(c.mapFile, m); err != nil {
		c.t.Fatal(err)
	}
}

// startStatic starts a standalone run of server name on its file system
// (a new, empty one the first time) under the map file. Start returns
// once the map is installed and its regions attached or not.
func (c *staticCluster) startStatic(name string) *region.Server {
	t := c.t
	t.Helper()
	nd := nodeOf(c.nodes, name)
	cfg := inprocConfig(name)
	cfg.MapFile = c.mapFile
	nd.tr = newCuttable(c.fabric)
	srv, err := region.Start(cfg, c.logs.logger(t, name), region.WithFS(nd.mem), region.WithListenTransport(nd.tr), region.WithDialTransport(nd.tr))
	if err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	nd.srv = srv
	return srv
}

// planOf returns the plan server name logged when it last installed map
// version v (nil: it installed none).
func (c *inprocCluster) planOf(name string, v uint64) []string {
	es := c.logs.find(name, "region map installed", func(e logEntry) bool { return e.fields["version"] == v })
	if len(es) == 0 {
		return nil
	}
	var out []string
	for _, s := range es[len(es)-1].fields["plan"].([]any) {
		out = append(out, s.(string))
	}
	return out
}

// kv is one acknowledged write.
type kv struct{ k, v string }

// copyValue pads the values putInOrder writes to about 1 KiB: a 64 KiB
// log segment holds some 60 of them.
var copyValue = strings.Repeat("x", 1000)

// putInOrder puts keys from..from+n-1 of the permutation write uses, one
// after the other, through cl, each acknowledged before the next is sent
// (so the acknowledged order is the primary's log order), with values of
// about 1 KiB tagged tag, and returns them in that order.
func (c *inprocCluster) putInOrder(cl *client.Client, from, n int, tag string) []kv {
	t := c.t
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	out := make([]kv, 0, n)
	for i := from; i < from+n; i++ {
		w := kv{k: fmt.Sprintf("k%06d", i*9973%10000), v: fmt.Sprintf("%s-%d-%s", tag, i, copyValue)}
		if err := cl.Put(ctx, []byte(w.k), []byte(w.v)); err != nil {
			t.Fatalf("put %s: %v", w.k, err)
		}
		out = append(out, w)
	}
	return out
}

// heldPrefix reads every write of acked through cl and returns how many
// read back: they must be a prefix of acked (in order), each with its
// value; every later key must be not found (never another value).
func (c *inprocCluster) heldPrefix(cl *client.Client, acked []kv) int {
	t := c.t
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	held := len(acked)
	for i, w := range acked {
		got, err := cl.Get(ctx, []byte(w.k))
		switch {
		case errors.Is(err, client.ErrNotFound):
			held = min(held, i)
		case err != nil:
			t.Fatalf("get %s (write %d): %v", w.k, i, err)
		case string(got) != w.v:
			t.Fatalf("get %s (write %d) = %.20q..., want %.20q...", w.k, i, got, w.v)
		case i > held:
			t.Fatalf("write %d (%s) reads back but write %d is missing: the copy served is not a prefix of the acknowledged writes", i, w.k, held)
		}
	}
	return held
}

// minFlushed is how many of putInOrder's first 300 writes the backup's
// disk holds for sure once they were acknowledged: its primary's tail
// switched segments at least three times (300 records of over 1000 bytes
// each: over four 64 KiB segments), and a segment switch waits until
// every live backup acknowledged the flush (synced, in sync mode) of the
// buffer half it reuses, i.e. of the segment two before it
// (docs/architecture.md, "Buffer halves"); the first 32 records (some
// 33 KB) lie in the region's first segment.
const minFlushed = 32

// TestInprocStaticMapServesSendIndexCopy: under a static map, b backs
// up a's region 1 (a: primary, b: its only backup) and a acknowledges 300
// writes (sync mode: each on a's disk and in b's replication buffer).
// Then a stops, b crashes (its buffer is lost; its disk keeps what it
// synced), and b restarts under a static map that names it primary of
// region 1. The operator's map is obeyed: b's plan is exactly
// "open-copy 1, alone 1", it warns that it promotes a copy without its
// replication buffer, and serves the region; what it serves of the
// acknowledged writes is a prefix of them (log order), each with its
// value:
//
//   - a stopped cleanly: its stop flushed its log to b ("their disks
//     after the next flush", docs/failover.md, "Copies of a write"), so
//     every acknowledged write reads back;
//   - a crashed: the writes after the last flush b acknowledged were in
//     b's buffer only and may be missing (10 of the 300 in practice);
//     those of a segment two before the tail's may not (minFlushed).
//
// New writes go to b, and a restart of b under the same map opens the
// region as b's own ("open 1": the promotion is persisted, the copy mark
// gone) with everything it served. Send-Index: the copy is a backup
// region, promoted (engine.Volume.PromoteBackup).
func TestInprocStaticMapServesSendIndexCopy(t *testing.T) {
	testStaticMapServesCopy(t, "send-index")
}

// TestInprocStaticMapServesBuildIndexCopy is
// TestInprocStaticMapServesSendIndexCopy in Build-Index: the copy is an
// ordinary region marked a follower's, which loses its mark
// (engine.Volume.SetFollower).
func TestInprocStaticMapServesBuildIndexCopy(t *testing.T) {
	testStaticMapServesCopy(t, "build-index")
}

func testStaticMapServesCopy(t *testing.T, mode string) {
	t.Run("primary-stopped", func(t *testing.T) { testStaticMapServesCopyAfter(t, mode, false) })
	t.Run("primary-crashed", func(t *testing.T) { testStaticMapServesCopyAfter(t, mode, true) })
}

func testStaticMapServesCopyAfter(t *testing.T, mode string, crashed bool) {
	c := newStaticCluster(t)
	v1 := staticMap(1, mode, "a", "b")
	c.publish(v1)
	c.startStatic("b") // its backup role first: a attaches it at its start
	c.startStatic("a")
	if got, want := c.planOf("a", 1), []string{"open 1", "attach 1"}; !slices.Equal(got, want) {
		t.Fatalf("setup: a's plan of map 1: %q, want %q", got, want)
	}
	acked := c.putInOrder(c.openClient(fixedSource{v1}, 3), 0, 300, "v1")
	if crashed {
		c.crash("a")
	} else {
		c.stop("a")
	}
	c.crash("b")
	v2 := staticMap(2, mode, "b")
	c.publish(v2)
	c.startStatic("b")
	if got, want := c.planOf("b", 2), []string{"open-copy 1", "alone 1"}; !slices.Equal(got, want) {
		t.Fatalf("b's plan of the static map naming it primary of its copy: %q, want %q; its plans: %q", got, want, c.plans("b"))
	}
	if !c.logged("b", "static map: promoting a copy without its replication buffer", map[string]any{"region": uint64(1), "epoch": uint64(2)}) {
		t.Fatal("b promoted its copy of region 1 without the warning")
	}
	cl := c.openClient(fixedSource{v2}, 3)
	held := c.heldPrefix(cl, acked)
	t.Logf("%d of the %d acknowledged writes held by b's copy", held, len(acked))
	switch {
	case !crashed && held < len(acked):
		t.Fatalf("a stopped cleanly (its log flushed to b), yet b serves only the first %d of the %d acknowledged writes", held, len(acked))
	case held < minFlushed:
		t.Fatalf("b serves only the first %d acknowledged writes: those of segments flushed to it before a crashed are at least the first %d", held, minFlushed)
	}
	acked = append(acked[:held], c.putInOrder(cl, 300, 50, "v2")...)
	c.stop("b")
	c.startStatic("b")
	if got, want := c.planOf("b", 2), []string{"open 1", "alone 1"}; !slices.Equal(got, want) {
		t.Fatalf("b's plan of the same map after a restart: %q, want %q (the promoted copy is b's own)", got, want)
	}
	if n := c.heldPrefix(cl, acked); n != len(acked) {
		t.Fatalf("after b's restart: %d of the %d writes it acknowledged or served read back", n, len(acked))
	}
}

// TestInprocStaticUnreadableCopyFailsReload: a standalone server b whose
// volume holds region 1 (its own, served then moved to a by the map file:
// b deposed it) reloads a static map naming it primary of region 1 while
// whether the region is a copy cannot be read (its volume is closed
// under it: engine.Volume.IsCopy reads no file, so nothing else makes it
// fail). The plan's fail step fails the reload with that error (region
// 1: open: engine.ErrClosed), and a standalone map installs whole or not
// at all: b stays at the map it had, and logs no install of the new one.
func TestInprocStaticUnreadableCopyFailsReload(t *testing.T) {
	c := newStaticCluster(t)
	v1 := staticMap(1, "send-index", "b")
	c.publish(v1)
	b := c.startStatic("b")
	c.putInOrder(c.openClient(fixedSource{v1}, 3), 0, 20, "v1")
	c.publish(staticMap(2, "send-index", "a"))
	if err := b.Reload(); err != nil {
		t.Fatalf("reload of the map moving region 1 to a: %v", err)
	}
	if got, want := c.planOf("b", 2), []string{"depose 1"}; !slices.Equal(got, want) {
		t.Fatalf("setup: b's plan of map 2: %q, want %q", got, want)
	}
	if err := b.CloseVolume(); err != nil {
		t.Fatal(err)
	}
	defer c.crash("b") // its Close fails on the closed volume: logged only
	c.publish(staticMap(3, "send-index", "b"))
	err := b.Reload()
	if !errors.Is(err, engine.ErrClosed) || !strings.HasPrefix(err.Error(), "region 1: open: ") {
		t.Fatalf("reload of a map naming b primary of a region whose copy state cannot be read: %v; want region 1: open: %v", err, engine.ErrClosed)
	}
	if v := b.MapVersion(); v != 2 {
		t.Fatalf("b serves map version %d after the failed reload, want 2 (installed whole or not at all)", v)
	}
	if plan := c.planOf("b", 3); plan != nil {
		t.Fatalf("b logged map 3 installed (plan %q) though its install failed", plan)
	}
}

// TestInprocManagedUnreadableCopyNotInstalled: with the master stopped,
// the primary p of region 2 is taken out of every group by a forced map
// (region 2 promoted on its first backup q, as after p's failure); once
// every region's stream is attached without p, p's volume is closed
// under it and a forced map names p primary of region 2 again, alone.
// Whether p's region 2 is a copy cannot be read: p's plan is exactly
// "fail 2" (with the error), it logs "region not installed" for region 2 with the error
// and still installs the map (managed: the map is installed without the
// regions that fail); q deposes region 2, which nobody serves (a read
// gets an error, not a value), and the other regions, served by the other
// servers, read back every acknowledged write and take new ones.
func TestInprocManagedUnreadableCopyNotInstalled(t *testing.T) {
	c := startInprocCluster(t, 3)
	acked := c.write(0, 300, "v1")
	c.coord.Depose() // the master stops deciding
	m, _ := c.coord.Map()
	p := m.Region(2).Primary
	out := m.Clone()
	out.Version++
	for i := range out.Regions {
		r := &out.Regions[i]
		if r.Primary == p {
			r.Primary, r.Backups = r.Backups[0], r.Backups[1:]
		}
		r.Backups = slices.DeleteFunc(slices.Clone(r.Backups), func(n string) bool { return n == p })
		r.Joining = nil
		r.Epoch++
	}
	q := out.Region(2).Primary
	c.coord.PutMap(out)
	c.waitPlanned(p, out.Version, "depose 2")
	c.waitPlanned(q, out.Version, "promote 2")
	cl := c.freshClient()
	for _, id := range []uint64{1, 2, 3} { // every stream attached without p
		k, _ := keyOf(out, id, 0)
		c.putAcked(cl, k+"-out", "x")
	}
	if err := c.nodes[p].srv.CloseVolume(); err != nil {
		t.Fatal(err)
	}
	defer c.crash(p) // its Close fails on the closed volume: logged only
	named := out.Clone()
	named.Version++
	r2 := named.Region(2)
	r2.Primary, r2.Backups = p, nil
	r2.Epoch++
	c.coord.PutMap(named)
	fail := "fail 2: open: " + engine.ErrClosed.Error() // a fail step names its error
	c.waitPlanned(p, named.Version, fail)
	if got, want := c.planOf(p, named.Version), []string{fail}; !slices.Equal(got, want) {
		t.Fatalf("%s's plan of the map naming it primary of region 2: %q, want %q", p, got, want)
	}
	notInstalled := c.logs.find(p, "region not installed", func(e logEntry) bool { return e.fields["region"] == uint64(2) })
	if len(notInstalled) != 1 {
		t.Fatalf("%s logged region 2 not installed %d times, want once", p, len(notInstalled))
	}
	if msg, _ := notInstalled[0].fields["error"].(string); !strings.HasPrefix(msg, "region 2: open: ") || !strings.HasSuffix(msg, engine.ErrClosed.Error()) {
		t.Fatalf("%s: region 2 not installed: %q; want region 2: open: %v", p, msg, engine.ErrClosed)
	}
	c.waitPlanned(q, named.Version, "depose 2")
	// p is not ready: a region the map gives it is not served.
	resp, err := http.Get("http://" + c.nodes[p].srv.HTTPAddr() + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "primary of, not served: [2]") {
		t.Fatalf("%s /readyz with region 2 not installed: %d %q", p, resp.StatusCode, body)
	}
	cl = c.freshClient()
	k2, _ := keyOf(named, 2, 0)
	if got, err := cl.Get(ctxFor(t, 10*time.Second), []byte(k2)); !errors.Is(err, client.ErrWrongRegion) && !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("get %s of region 2, which no server installed: %q, %v; want wrong region or unavailable", k2, got, err)
	}
	others := map[string]string{}
	for k, v := range acked {
		if named.Lookup([]byte(k)).ID != 2 {
			others[k] = v
		}
	}
	c.readBack("the other regions", others)
	for _, id := range []uint64{1, 3} {
		k, _ := keyOf(named, id, 0)
		c.putAcked(cl, k+"-named", "y")
	}
}

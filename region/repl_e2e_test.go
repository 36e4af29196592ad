package region_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/region"
)

// replCluster is three server processes, each primary of one region and
// backup of the other two (3-way replication), over shm.
func replCluster(t *testing.T, mode string) ([]*server, *regionmap.Map) {
	t.Helper()
	var ss []*server
	for i := range 3 {
		ss = append(ss, newServer(t, fmt.Sprintf("rs%d", i+1), "--segment-size", "64KiB", "--l0-pairs", "100", "--growth-factor", "2"))
	}
	m := &regionmap.Map{Version: 1, Replication: mode}
	bounds := []string{"", "k003200", "k006400", ""}
	for i, s := range ss {
		m.Servers = append(m.Servers, s.entry())
		m.Regions = append(m.Regions, regionmap.Assignment{ID: uint64(i + 1), Start: bounds[i], End: bounds[i+1], Epoch: 1,
			Primary: s.name, Backups: []string{ss[(i+1)%3].name, ss[(i+2)%3].name}})
	}
	startCluster(t, ss, m)
	return ss, m
}

// startCluster writes m to a map file and starts every server on it.
func startCluster(t *testing.T, ss []*server, m *regionmap.Map) {
	t.Helper()
	mapFile := filepath.Join(t.TempDir(), "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		s.args = append(s.args, "--map-file", mapFile)
		s.start(t)
	}
}

// waitReady waits until the regions holding keys serve (a primary serves
// once it reached its backups).
func waitReady(t *testing.T, cl *client.Client, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, k := range keys {
		for {
			_, err := cl.Get(ctx(t), []byte(k))
			if err == nil || errors.Is(err, client.ErrNotFound) {
				break
			}
			if !errors.Is(err, client.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("region of %s not ready: %v", k, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// writeRandom runs 4 client goroutines of random puts and deletes over
// 2400 keys and returns the model of acknowledged writes.
func writeRandom(t *testing.T, cl *client.Client, rng *rand.Rand, ops int) map[string][]byte {
	t.Helper()
	c := ctx(t)
	var mu sync.Mutex
	model := map[string][]byte{}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		seed := rng.Uint64()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 2))
			for i := range ops {
				k := fmt.Sprintf("k%06d", r.IntN(2400)*4+w) // writer w owns k ≡ w (mod 4)
				var v []byte
				var err error
				if r.IntN(6) == 0 {
					err = cl.Delete(c, []byte(k))
				} else {
					v = bytes.Repeat(fmt.Appendf(nil, "%d.%d.", w, i), 1+r.IntN(60))
					err = cl.Put(c, []byte(k), v)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
					return
				}
				mu.Lock()
				model[k] = v
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return model
}

// regionContent opens a stopped server's volume read-only and returns a
// region's content and level shapes.
func regionContent(t *testing.T, s *server, region uint64) (map[string][]byte, []string, string) {
	t.Helper()
	in, err := engine.OpenInspector(nil, s.dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if rep := in.Check(); len(rep.Problems) > 0 {
		t.Fatalf("%s: check found %d problems, first %+v", s.name, len(rep.Problems), rep.Problems[0])
	}
	pairs, err := in.Content(region)
	if err != nil {
		t.Fatalf("%s region %d: %v", s.name, region, err)
	}
	out := map[string][]byte{}
	for _, p := range pairs {
		out[string(p.Key)] = p.Value
	}
	for _, ri := range in.Summary().Regions {
		if ri.ID == region {
			// The shape: everything but segment numbers (a root keeps its offset).
			var shape []string
			for _, l := range ri.Levels {
				shape = append(shape, fmt.Sprintf("L%d h%d root+%d nodes %d keys %d bytes %d segs %d",
					l.Level, l.Height, l.Root%(64<<10), l.Nodes, l.Pairs, l.KVBytes, len(l.Segments)))
			}
			return out, shape, ri.Role
		}
	}
	t.Fatalf("%s: no region %d", s.name, region)
	return nil, nil, ""
}

// TestE2EReplication: 3 server processes, 3 regions with 2 backups each,
// 4 writers through the client over shm with a tiny L0 (dozens of
// compactions). Stopped in turn, each primary first flushes its tail to
// the backups still running; offline, every volume passes check, Send-Index
// backups have the primary's level shapes, and backups that were running
// when their primary stopped hold exactly the primary's content (which
// holds every acknowledged write). Then the same after restarting a backup.
func TestE2EReplication(t *testing.T) {
	for _, mode := range []string{"send-index", "build-index"} {
		t.Run(mode, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(testseed.Seed(t), 3))
			ss, m := replCluster(t, mode)
			cl := open(t, regionmap.Static{M: m}, "shm")
			waitReady(t, cl, "k000000", "k003200", "k006400")
			model := writeRandom(t, cl, rng, 3000)
			// Every server's compactions are over before the first stops:
			// a backup stopped before its primary holds the primary's
			// levels only if the primary compacts nothing after it left.
			waitCompactionsOver(t, cl, ss)
			cl.Close()
			for _, s := range ss {
				s.p.Stop(t) // SIGTERM: settle, flush to the live backups, close
			}
			check := func(when string) {
				for i := range 3 {
					region := uint64(i + 1)
					prim, pl, role := regionContent(t, ss[i], region)
					t.Logf("%s: region %d: %d keys, levels %v", when, region, len(prim), pl)
					if role != "primary" {
						t.Fatalf("%s: region %d on %s has role %s", when, region, ss[i].name, role)
					}
					for k, v := range model {
						if m.Lookup([]byte(k)).ID != region {
							continue
						}
						if got, ok := prim[k]; (v == nil) == ok || !bytes.Equal(got, v) {
							t.Fatalf("%s: primary %s: key %s = %q (present %v), acknowledged %q", when, ss[i].name, k, got, ok, v)
						}
					}
					// Backup (i+1)%3 stopped after primary i for i < 2.
					for _, b := range []int{(i + 1) % 3, (i + 2) % 3} {
						content, bl, brole := regionContent(t, ss[b], region)
						if mode == "send-index" {
							if brole != "backup" {
								t.Fatalf("%s: region %d on %s has role %s", when, region, ss[b].name, brole)
							}
							if fmt.Sprint(bl) != fmt.Sprint(pl) {
								t.Fatalf("%s: region %d levels on backup %s:\n%v\nprimary:\n%v", when, region, ss[b].name, bl, pl)
							}
						}
						if b > i { // running when the primary stopped: complete
							if len(content) != len(prim) {
								t.Fatalf("%s: region %d: backup %s holds %d keys, primary %d", when, region, ss[b].name, len(content), len(prim))
							}
							for k, v := range prim {
								if !bytes.Equal(content[k], v) {
									t.Fatalf("%s: region %d: backup %s key %s = %q, primary %q", when, region, ss[b].name, k, content[k], v)
								}
							}
						}
					}
				}
			}
			check("after the run")
			// The whole cluster again: every backup passes its primary's
			// check (nothing was missed but tails, which are re-sent), and
			// replication goes on where it stopped.
			for _, s := range ss {
				s.start(t)
			}
			cl = open(t, regionmap.Static{M: m}, "shm")
			waitReady(t, cl, "k000000", "k003200", "k006400")
			for k, v := range writeRandom(t, cl, rng, 1000) {
				model[k] = v
			}
			for _, s := range ss {
				b, err := cl.ServerStats(ctx(t), s.name)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(b, []byte("dropped_backups")) {
					t.Fatalf("after the restart, %s dropped a backup: %s", s.name, b)
				}
			}
			cl.Close()
			for _, s := range ss {
				s.p.Stop(t)
			}
			check("after restarting the cluster")
		})
	}
}

// TestE2EMutualBackupsOneWorker: two servers back each other up and have
// one request worker each; large puts fill log segments fast, so a put's
// segment switch waits for the peer's flush while the peer's own puts wait
// the same way. Replication commands have their own workers, so nobody
// waits on a starved peer: every put finishes promptly and no backup is
// dropped.
func TestE2EMutualBackupsOneWorker(t *testing.T) {
	var ss []*server
	for i := range 2 {
		ss = append(ss, newServer(t, fmt.Sprintf("rs%d", i+1), "--segment-size", "64KiB", "--l0-pairs", "100000", "--workers", "1"))
	}
	m := &regionmap.Map{Version: 1, Replication: "send-index"}
	for i, bounds := range [][2]string{{"", "m"}, {"m", ""}} {
		m.Servers = append(m.Servers, ss[i].entry())
		m.Regions = append(m.Regions, regionmap.Assignment{ID: uint64(i + 1), Start: bounds[0], End: bounds[1], Epoch: 1,
			Primary: ss[i].name, Backups: []string{ss[1-i].name}})
	}
	startCluster(t, ss, m)
	cl := open(t, regionmap.Static{M: m}, "shm")
	waitReady(t, cl, "a", "z")
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var slowest atomic.Int64
	value := bytes.Repeat([]byte{'v'}, 20000)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				start := time.Now()
				k := fmt.Appendf(nil, "%c%d-%d", "az"[w%2], w, i)
				if err := cl.Put(ctx(t), k, value); err != nil {
					errs <- fmt.Errorf("%s: %w", k, err)
					return
				}
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if d := time.Duration(slowest.Load()); d > 5*time.Second {
		t.Fatalf("the slowest put took %v", d)
	}
	for _, s := range ss {
		b, err := cl.ServerStats(ctx(t), s.name)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("dropped_backups")) {
			t.Fatalf("%s dropped a backup: %s", s.name, b)
		}
	}
}

// TestE2EBackupKilled: kill -9 a server while clients write. The regions
// it backed up drop it (logged, reported by STATS) and keep acknowledging
// writes with their other backup; every acknowledged write is readable.
func TestE2EBackupKilled(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 4))
	ss, m := replCluster(t, "send-index")
	cl := open(t, regionmap.Static{M: m}, "shm")
	waitReady(t, cl, "k000000", "k003200", "k006400")
	c := ctx(t)
	model := map[string][]byte{}
	put := func(i int) {
		k := fmt.Sprintf("k%06d", rng.IntN(6400)) // regions 1 and 2: primaries rs1, rs2
		v := fmt.Appendf(nil, "v%d", i)
		start := time.Now()
		if err := cl.Put(c, []byte(k), v); err != nil {
			t.Fatalf("put %d (%s): %v", i, k, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("put %d took %v", i, d)
		}
		model[k] = v
	}
	for i := range 1500 {
		put(i)
	}
	ss[2].p.Kill() // a backup of regions 1 and 2 (and region 3's primary)
	for i := 1500; i < 4000; i++ {
		put(i)
	}
	for _, s := range ss[:2] {
		b, err := cl.ServerStats(c, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(`rs3 (region`)) {
			t.Fatalf("%s did not drop rs3: %s", s.name, b)
		}
	}
	for k, v := range model {
		got, err := cl.Get(c, []byte(k))
		if err != nil || !bytes.Equal(got, v) {
			t.Fatalf("%s: %q %v, want %q", k, got, err, v)
		}
	}
}

// waitCompactionsOver waits (30 s at most) until no server of ss finished
// a compaction for 500 ms.
func waitCompactionsOver(t *testing.T, cl *client.Client, ss []*server) {
	t.Helper()
	count := func() uint64 {
		var n uint64
		for _, s := range ss {
			b, err := cl.ServerStats(ctx(t), s.name)
			if err != nil {
				t.Fatalf("stats of %s: %v", s.name, err)
			}
			var st region.ServerStats
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatal(err)
			}
			n += st.Engine.Compactions
		}
		return n
	}
	last, since := count(), time.Now()
	for deadline := time.Now().Add(30 * time.Second); time.Since(since) < 500*time.Millisecond; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("compactions still running 30 s after the writes")
		}
		if n := count(); n != last {
			last, since = n, time.Now()
		}
	}
}

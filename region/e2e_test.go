package region_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/proctest"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

// server is a tebis server process under test.
type server struct {
	name, dir, shm, tcp string
	args                []string
	p                   *proctest.Proc
}

func newServer(t *testing.T, name string, extra ...string) *server {
	dir := t.TempDir()
	s := &server{name: name, dir: filepath.Join(dir, "data"), shm: filepath.Join(dir, "s.sock"), tcp: proctest.FreePort(t)}
	s.args = append([]string{"--log-level", "warn", "server", "--name", name, "--data-dir", s.dir, "--shm", s.shm, "--tcp", s.tcp,
		"--segment-size", "256KiB", "--l0-pairs", "2000"}, extra...)
	return s
}

func (s *server) start(t *testing.T) {
	t.Helper()
	s.p = proctest.Start(t, s.args...)
	proctest.WaitTCP(t, s.p, s.tcp)
}

func (s *server) entry() regionmap.Server {
	return regionmap.Server{Name: s.name, Shm: s.shm, TCP: s.tcp}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func open(t *testing.T, src regionmap.Source, transport string) *client.Client {
	t.Helper()
	cl, err := client.Open(ctx(t), client.Config{Map: src, Transport: transport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func TestE2EOperations(t *testing.T) {
	s := newServer(t, "rs1")
	s.start(t)
	for _, tr := range []string{"tcp", "shm"} {
		t.Run(tr, func(t *testing.T) {
			c := ctx(t)
			cl := open(t, regionmap.Static{M: regionmap.Single(s.entry())}, tr)
			k := func(i int) []byte { return fmt.Appendf(nil, "%s-key-%04d", tr, i) }
			for i := range 200 {
				if err := cl.Put(c, k(i), bytes.Repeat([]byte{byte(i)}, i*10)); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 200 {
				v, err := cl.Get(c, k(i))
				if err != nil || !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, i*10)) {
					t.Fatalf("get %s: %d bytes, %v", k(i), len(v), err)
				}
			}
			if err := cl.Delete(c, k(7)); err != nil {
				t.Fatal(err)
			}
			if _, err := cl.Get(c, k(7)); !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("get after delete: %v", err)
			}
			vals, err := cl.MultiGet(c, [][]byte{k(1), k(7), k(199), []byte("missing")})
			if err != nil || !bytes.Equal(vals[0], bytes.Repeat([]byte{1}, 10)) || vals[1] != nil || len(vals[2]) != 1990 || vals[3] != nil {
				t.Fatalf("multi-get: %v %v", vals, err)
			}
			it := cl.Scan(c, k(10), k(20), client.ScanOptions{BatchPairs: 3})
			var got []string
			for it.Next() {
				got = append(got, string(it.Key()))
			}
			if it.Err() != nil || len(got) != 10 || got[0] != string(k(10)) || got[9] != string(k(19)) {
				t.Fatalf("scan: %v %v", got, it.Err())
			}
			// Bad input: a clear error, nothing lost.
			if err := cl.Put(c, nil, []byte("v")); !errors.Is(err, client.ErrBadRequest) {
				t.Fatalf("empty key: %v", err)
			}
			if err := cl.Put(c, make([]byte, 1025), []byte("v")); !errors.Is(err, client.ErrTooLarge) {
				t.Fatalf("oversized key: %v", err)
			}
			if err := cl.Put(c, k(1), make([]byte, 65<<10)); !errors.Is(err, client.ErrTooLarge) {
				t.Fatalf("oversized value: %v", err)
			}
			if v, err := cl.Get(c, k(1)); err != nil || len(v) != 10 {
				t.Fatalf("after bad input: %d bytes, %v", len(v), err)
			}
		})
	}
}

// twoServerMap: regions [,"g") and ["p",) on s1, ["g","p") on s2.
func twoServerMap(s1, s2 *server, version uint64) *regionmap.Map {
	return &regionmap.Map{Version: version, Servers: []regionmap.Server{s1.entry(), s2.entry()}, Regions: []regionmap.Assignment{
		{ID: 1, End: "g", Primary: s1.name, Epoch: 1},
		{ID: 2, Start: "g", End: "p", Primary: s2.name, Epoch: 1},
		{ID: 3, Start: "p", Primary: s1.name, Epoch: 1},
	}}
}

func TestE2EScanAcrossRegions(t *testing.T) {
	mapFile := filepath.Join(t.TempDir(), "map.yaml")
	s1, s2 := newServer(t, "rs1", "--map-file", mapFile), newServer(t, "rs2", "--map-file", mapFile)
	if err := regionmap.WriteFile(mapFile, twoServerMap(s1, s2, 1)); err != nil {
		t.Fatal(err)
	}
	s1.start(t)
	s2.start(t)
	c := ctx(t)
	cl := open(t, regionmap.File(mapFile), "tcp")
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 1))
	want := map[string]string{}
	for range 1500 {
		k := fmt.Sprintf("%c%06d", 'a'+rng.IntN(26), rng.IntN(1e6))
		want[k] = k + "-v"
		if err := cl.Put(c, []byte(k), []byte(want[k])); err != nil {
			t.Fatal(err)
		}
	}
	check := func(start, end string) {
		t.Helper()
		var e []byte
		if end != "" {
			e = []byte(end)
		}
		it := cl.Scan(c, []byte(start), e, client.ScanOptions{BatchPairs: 37, BatchBytes: 700})
		n, prev := 0, ""
		for it.Next() {
			k := string(it.Key())
			if k <= prev || k < start || (end != "" && k >= end) || want[k] != string(it.Value()) {
				t.Fatalf("scan [%q,%q): key %q after %q, value %q", start, end, k, prev, it.Value())
			}
			prev = k
			n++
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		expect := 0
		for k := range want {
			if k >= start && (end == "" || k < end) {
				expect++
			}
		}
		if n != expect {
			t.Fatalf("scan [%q,%q): %d pairs, want %d", start, end, n, expect)
		}
	}
	check("", "")
	check("c", "r")
	check("g", "p")
	check("h", "h5")
	check("o9", "")
}

func TestE2EConcurrentClients(t *testing.T) {
	s := newServer(t, "rs1")
	s.start(t)
	seed := testseed.Seed(t)
	c := ctx(t)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for ci := range 4 {
		cl := open(t, regionmap.Static{M: regionmap.Single(s.entry())}, []string{"tcp", "shm"}[ci%2])
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(ci*8+g)))
				model := map[string][]byte{}
				for i := range 300 {
					k := fmt.Sprintf("c%d-g%d-%03d", ci, g, rng.IntN(50))
					var err error
					switch rng.IntN(3) {
					case 0:
						v := fmt.Appendf(nil, "%s=%d", k, i)
						if err = cl.Put(c, []byte(k), v); err == nil {
							model[k] = v
						}
					case 1:
						if err = cl.Delete(c, []byte(k)); err == nil {
							delete(model, k)
						}
					default:
						var v []byte
						v, err = cl.Get(c, []byte(k))
						if errors.Is(err, client.ErrNotFound) && model[k] == nil {
							err = nil
						} else if err == nil && !bytes.Equal(v, model[k]) {
							err = fmt.Errorf("get %s = %q, want %q", k, v, model[k])
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestE2ERestart: every write acknowledged in sync mode survives a crash
// (SIGKILL) and a graceful restart.
func TestE2ERestart(t *testing.T) {
	s := newServer(t, "rs1")
	s.start(t)
	c := ctx(t)
	put := func(from, to int) {
		cl := open(t, regionmap.Static{M: regionmap.Single(s.entry())}, "tcp")
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := from + g; i < to; i += 8 {
					if err := cl.Put(c, fmt.Appendf(nil, "k%06d", i), fmt.Appendf(nil, "v%d", i)); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		cl.Close()
	}
	verify := func(n int) {
		cl := open(t, regionmap.Static{M: regionmap.Single(s.entry())}, "shm")
		for i := range n {
			v, err := cl.Get(c, fmt.Appendf(nil, "k%06d", i))
			if err != nil || string(v) != fmt.Sprintf("v%d", i) {
				t.Fatalf("key %d after restart: %q, %v", i, v, err)
			}
		}
		cl.Close()
	}
	put(0, 5000)
	s.p.Kill() // crash: no shutdown
	s.start(t)
	verify(5000)
	put(5000, 8000)
	s.p.Stop(t) // graceful
	s.start(t)
	verify(8000)
}

// splitCluster starts two servers on a map file giving rs1 one region over
// all keys (version 1); rs2 holds nothing yet.
func splitCluster(t *testing.T) (string, *server, *server, *regionmap.Map) {
	mapFile := filepath.Join(t.TempDir(), "map.yaml")
	s1, s2 := newServer(t, "rs1", "--map-file", mapFile), newServer(t, "rs2", "--map-file", mapFile)
	v1 := &regionmap.Map{Version: 1, Servers: []regionmap.Server{s1.entry(), s2.entry()}, Regions: []regionmap.Assignment{{ID: 1, Primary: "rs1", Epoch: 1}}}
	if err := regionmap.WriteFile(mapFile, v1); err != nil {
		t.Fatal(err)
	}
	s1.start(t)
	s2.start(t)
	return mapFile, s1, s2, v1
}

// splitMap writes version 2 (keys from "m" on rs2, a new region) and
// SIGHUPs both servers.
func splitMap(t *testing.T, mapFile string, v1 *regionmap.Map, s1, s2 *server) {
	v2 := &regionmap.Map{Version: 2, Servers: v1.Servers, Regions: []regionmap.Assignment{
		{ID: 1, End: "m", Primary: "rs1", Epoch: 1}, {ID: 2, Start: "m", Primary: "rs2", Epoch: 1}}}
	if err := regionmap.WriteFile(mapFile, v2); err != nil {
		t.Fatal(err)
	}
	s1.p.Signal(syscall.SIGHUP)
	s2.p.Signal(syscall.SIGHUP)
}

// TestE2EWrongRegion: after the map changes (a region split onto a new
// server), a client holding the old map is redirected, refreshes and
// lands on the right server.
func TestE2EWrongRegion(t *testing.T) {
	mapFile, s1, s2, v1 := splitCluster(t)
	c := ctx(t)
	cl := open(t, regionmap.File(mapFile), "tcp")
	if err := cl.Put(c, []byte("apple"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	splitMap(t, mapFile, v1, s1, s2)
	// Wait until rs1 serves v2: a client pinned to v1 gets redirected.
	pinned := open(t, regionmap.Static{M: v1}, "tcp")
	for deadline := time.Now().Add(20 * time.Second); ; {
		err := pinned.Put(c, []byte("probe"), []byte("x"))
		if errors.Is(err, client.ErrWrongRegion) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rs1 never switched to map v2: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The client still routes by v1: "zebra" goes to rs1, which now
	// answers WRONG_REGION(2); the client reloads and goes to rs2.
	if err := cl.Put(c, []byte("zebra"), []byte("2")); err != nil {
		t.Fatal(err)
	}
	if cl.Map().Version != 2 {
		t.Fatalf("client map version %d after the redirect, want 2", cl.Map().Version)
	}
	if v, err := cl.Get(c, []byte("apple")); err != nil || string(v) != "1" {
		t.Fatalf("apple: %q %v", v, err)
	}
	if v, err := cl.Get(c, []byte("zebra")); err != nil || string(v) != "2" {
		t.Fatalf("zebra: %q %v", v, err)
	}
}

// TestE2EAsync: many operations in flight over one connection; every
// reply matches its request.
func TestE2EAsync(t *testing.T) {
	s := newServer(t, "rs1")
	s.start(t)
	c := ctx(t)
	cl := open(t, regionmap.Static{M: regionmap.Single(s.entry())}, "shm")
	const n = 2000
	ops := make([]*client.Op, n)
	done := make(chan *client.Op, n)
	for i := range n {
		ops[i] = cl.Go(c, &client.Op{Kind: client.OpPut, Key: fmt.Appendf(nil, "a%05d", i), Value: fmt.Appendf(nil, "value-%d", i)}, done)
	}
	for range n {
		if op := <-done; op.Err != nil {
			t.Fatal(op.Err)
		}
	}
	for i := range n {
		ops[i] = cl.Go(c, &client.Op{Kind: client.OpGet, Key: fmt.Appendf(nil, "a%05d", i)}, done)
	}
	for range n {
		<-done
	}
	for i, op := range ops {
		if op.Err != nil || string(op.Value) != fmt.Sprintf("value-%d", i) {
			t.Fatalf("get %d: %q %v", i, op.Value, op.Err)
		}
	}
}

// TestE2EBadRequests: malformed payloads get an error reply, a stale map
// version gets WRONG_REGION, and the server keeps serving everyone.
func TestE2EBadRequests(t *testing.T) {
	s := newServer(t, "rs1")
	s.start(t)
	c := ctx(t)
	raw, err := ring.Dial(c, ring.ClientConfig{Transport: &rdma.TCP{}, Addr: s.tcp})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, tc := range []struct {
		name   string
		req    ring.Request
		status uint16
	}{
		{"truncated put", ring.Request{Type: wire.TypePut, Region: 1, Payload: []byte{1, 0, 0}}, wire.StatusBadRequest},
		{"put key length past the payload", ring.Request{Type: wire.TypePut, Region: 1, Payload: append(wire.EncodeVersion(1), 0xff, 0xff, 0, 0)}, wire.StatusBadRequest},
		{"scan garbage", ring.Request{Type: wire.TypeScan, Region: 1, Payload: []byte("garbage")}, wire.StatusBadRequest},
		{"unknown region", ring.Request{Type: wire.TypeGet, Region: 99, Payload: (&wire.KeyRequest{MapVersion: 1, Key: []byte("k")}).Encode(nil)}, wire.StatusWrongRegion},
		{"stale map version", ring.Request{Type: wire.TypeGet, Region: 1, Payload: (&wire.KeyRequest{MapVersion: 0, Key: []byte("k")}).Encode(nil)}, wire.StatusWrongRegion},
		{"unknown type", ring.Request{Type: 200}, ring.StatusUnknownType},
	} {
		rep, err := raw.Call(c, tc.req)
		if err != nil && !errors.Is(err, ring.ErrStatus) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if rep.Status != tc.status {
			t.Fatalf("%s: status %d (%s), want %d", tc.name, rep.Status, rep.Payload, tc.status)
		}
	}
	cl := open(t, regionmap.Static{M: regionmap.Single(s.entry())}, "tcp")
	if err := cl.Put(c, []byte("still"), []byte("serving")); err != nil {
		t.Fatal(err)
	}
}

// TestE2ECLI: `tebis kv` and `tebis config check` against a real server.
func TestE2ECLI(t *testing.T) {
	s := newServer(t, "rs1")
	s.start(t)
	run := func(args ...string) (string, error) {
		out, err := exec.Command(proctest.Binary(t), args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run("kv", "--server", s.tcp, "put", "cli-key", "cli-value"); err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("kv put: %v %s", err, out)
	}
	out, err := run("kv", "--server", s.shm, "--transport", "shm", "get", "--json", "cli-key")
	if err != nil || !strings.Contains(out, `"value": "cli-value"`) {
		t.Fatalf("kv get --json: %v %s", err, out)
	}
	out, err = run("kv", "--server", s.tcp, "get", "--json", "absent")
	if err == nil || !strings.Contains(out, `"not_found": true`) {
		t.Fatalf("kv get of a missing key: %v %s", err, out)
	}
	if out, err := run("kv", "--server", s.tcp, "scan", "--start", "cli"); err != nil || !strings.Contains(out, "cli-key\tcli-value") {
		t.Fatalf("kv scan: %v %s", err, out)
	}
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("name: rs9\ndata_dir: "+dir+"\ntcp: 127.0.0.1:7999\nsegment_size: 4MiB\n"), 0o644)
	os.WriteFile(bad, []byte("segment_size: 4000000\n"), 0o644)
	if out, err := run("config", "check", good); err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("config check of a good file: %v %s", err, out)
	}
	if out, err := run("config", "check", bad); err == nil || !strings.Contains(out, "no unit") {
		t.Fatalf("config check of a bad file: %v %s", err, out)
	}
}

// TestE2EMultiGetEdges: a multi-get whose reply exceeds the ring is split;
// one made with a map that has since split its region still answers.
func TestE2EMultiGetEdges(t *testing.T) {
	mapFile, s1, s2, v1 := splitCluster(t)
	c := ctx(t)
	cl := open(t, regionmap.File(mapFile), "tcp")
	var keys [][]byte
	for i := range 200 {
		k := fmt.Appendf(nil, "big%03d", i)
		keys = append(keys, k)
		if err := cl.Put(c, k, bytes.Repeat([]byte{byte(i)}, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	vals, err := cl.MultiGet(c, keys)
	if err != nil {
		t.Fatalf("multi-get of 200 KB: %v", err)
	}
	for i, v := range vals {
		if len(v) != 1000 || v[0] != byte(i) {
			t.Fatalf("value %d: %d bytes", i, len(v))
		}
	}
	// Split the region; a client still on v1 groups apple and zebra together.
	stale := open(t, regionmap.File(mapFile), "tcp")
	splitMap(t, mapFile, v1, s1, s2)
	for deadline := time.Now().Add(20 * time.Second); ; {
		err := cl.Put(c, []byte("zebra"), []byte("z"))
		if err == nil && cl.Map().Version == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("map v2 never took: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cl.Put(c, []byte("apple"), []byte("a")); err != nil {
		t.Fatal(err)
	}
	got, err := stale.MultiGet(c, [][]byte{[]byte("apple"), []byte("zebra")})
	if err != nil || string(got[0]) != "a" || string(got[1]) != "z" {
		t.Fatalf("multi-get across a split: %q %v", got, err)
	}
}

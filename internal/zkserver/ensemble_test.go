package zkserver

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestEnsemble(t *testing.T) {
	t.Parallel()
	e := EnsembleForTest(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	modes := map[string]int{}
	for _, s := range e.Servers {
		mode, err := s.Mode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		modes[mode]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes %v, want 1 leader and 2 followers", modes)
	}

	// Written through one member, read through another.
	a, b := connect(t, e.Servers[0].Addr()), connect(t, e.Servers[1].Addr())
	if _, err := a.Create("/x", []byte("1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sync("/x"); err != nil {
		t.Fatal(err)
	}
	if v, _, err := b.Get("/x"); err != nil || string(v) != "1" {
		t.Fatalf("Get through another member = %q, %v", v, err)
	}

	// Kill the leader: the other two elect a new one, and serve.
	old, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
	defer lcancel()
	leader, err := e.Leader(lctx)
	if err != nil {
		t.Fatal(err)
	}
	if leader == old {
		t.Fatal("the killed server is still the leader")
	}
	t.Logf("new leader %s elected %v after the kill", leader.Addr(), time.Since(killed).Round(time.Millisecond))
	var rest []string
	for _, s := range e.Servers {
		if s != old {
			rest = append(rest, s.Addr())
		}
	}
	c := connect(t, rest...)
	if _, err := c.Create("/y", []byte("2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if v, _, err := c.Get("/x"); err != nil || string(v) != "1" {
		t.Fatalf("Get /x after failover = %q, %v", v, err)
	}
}

// ensembleOnForTest starts an ensemble of members in t.TempDir() and
// stops it when the test ends (logging the end of every zk.log if the
// test failed).
func ensembleOnForTest(t *testing.T, members []Member) *Ensemble {
	t.Helper()
	requireInstalled(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	e, err := StartEnsembleOn(ctx, t.TempDir(), members)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, s := range e.Snapshot() {
				t.Logf("zookeeper %s, last lines of %s:\n%s", s.Addr(), s.LogPath(), s.logTail())
			}
		}
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// wantModes checks that the members report exactly the modes counted.
func wantModes(t *testing.T, ctx context.Context, e *Ensemble, want map[string]int) {
	t.Helper()
	modes := map[string]int{}
	for _, s := range e.Snapshot() {
		mode, err := s.Mode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		modes[mode]++
	}
	if !maps.Equal(modes, want) {
		t.Fatalf("modes %v, want %v", modes, want)
	}
}

// create makes znode path holding path's name.
func create(t *testing.T, c *zk.Conn, path string) {
	t.Helper()
	if _, err := c.Create(path, []byte(path), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
}

// wantZnodes checks, after a sync, that c reads every path as written by
// create.
func wantZnodes(t *testing.T, c *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := c.Sync(p); err != nil {
			t.Fatalf("sync %s: %v", p, err)
		}
		if v, _, err := c.Get(p); err != nil || string(v) != p {
			t.Fatalf("Get %s = %q, %v", p, v, err)
		}
	}
}

// restart kills member i, writes a znode through the others (if any),
// restarts it and checks it serves the data of before and during its
// absence, alone.
func restart(t *testing.T, ctx context.Context, e *Ensemble, i int, want ...string) *Server {
	t.Helper()
	old := e.Server(i)
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	if others := slices.Delete(e.Addrs(), i, i+1); len(others) > 0 {
		if _, err := e.Leader(ctx); err != nil { // the killed one may have led
			t.Fatal(err)
		}
		create(t, connect(t, others...), "/during")
		want = append(want, "/during")
	}

	// Readers of the members may run alongside Restart.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Go(func() {
		for {
			_ = e.Snapshot()
			_ = e.Server(i).Addr()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	})
	err := e.Restart(ctx, i)
	close(stop)
	readers.Wait()
	if err != nil {
		t.Fatal(err)
	}

	s := e.Server(i)
	if s == old || e.Servers[i] != s {
		t.Fatalf("Servers[%d] is %p, the old one %p, Server(%d) %p", i, e.Servers[i], old, i, s)
	}
	if s.Addr() != old.Addr() || s.Dir() != old.Dir() {
		t.Fatalf("restarted as %s in %s, was %s in %s", s.Addr(), s.Dir(), old.Addr(), old.Dir())
	}
	select {
	case <-old.Done():
	default:
		t.Fatal("the old server is not done")
	}
	if err := old.Stop(); err != nil {
		t.Fatalf("Stop of the old server: %v", err)
	}
	if err := e.Restart(ctx, i); !errors.Is(err, ErrRunning) {
		t.Fatalf("Restart of a running member = %v, want ErrRunning", err)
	}
	wantZnodes(t, connect(t, s.Addr()), want...)
	return s
}

func TestEnsembleOnRestart(t *testing.T) {
	t.Parallel()
	e := ensembleOnForTest(t, []Member{{Host: "127.0.0.1"}, {Host: "127.0.0.1"}, {Host: "127.0.0.1"}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wantModes(t, ctx, e, map[string]int{"leader": 1, "follower": 2})
	for _, a := range e.Addrs() {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Fatalf("address %s, want 127.0.0.1", a)
		}
	}
	create(t, connect(t, e.Addrs()...), "/before")

	s := restart(t, ctx, e, 0, "/before")
	wantModes(t, ctx, e, map[string]int{"leader": 1, "follower": 2})

	// The new member pauses, resumes and is stopped with the ensemble.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range e.Snapshot() {
		gone(t, s)
	}
}

func TestEnsembleOnOne(t *testing.T) {
	t.Parallel()
	e := ensembleOnForTest(t, []Member{{}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wantModes(t, ctx, e, map[string]int{"standalone": 1})
	if l, err := e.Leader(ctx); err != nil || l != e.Server(0) {
		t.Fatalf("Leader = %v, %v; want the standalone server", l, err)
	}
	create(t, connect(t, e.Addrs()...), "/before")
	restart(t, ctx, e, 0, "/before")
	wantModes(t, ctx, e, map[string]int{"standalone": 1})
}

func TestMembersValidation(t *testing.T) {
	ctx := context.Background()
	for _, members := range [][]Member{
		nil,
		{{Host: "localhost"}},
		{{Host: "::1"}},
		{{Host: "198.18.0.1"}, {Host: "127.0.0.1"}, {Host: "198.18.0.1"}},
	} {
		if e, err := StartEnsembleOn(ctx, t.TempDir(), members); err == nil {
			e.Stop()
			t.Errorf("StartEnsembleOn(%+v) succeeded", members)
		} else {
			t.Logf("StartEnsembleOn(%+v): %v", members, err)
		}
	}
}

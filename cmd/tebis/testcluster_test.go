package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/zkserver"
	"github.com/tebis-go/tebis/master"
	"github.com/tebis-go/tebis/region"
)

// testCluster is a managed cluster in this process, on a real ZooKeeper:
// a master and region servers (shm, volumes in memory), each with its
// HTTP endpoints on a free loopback port. Everything stops when the test
// ends.
type testCluster struct {
	t       *testing.T
	zk      *zkserver.Server
	admin   *coord.Session
	servers map[string]*region.Server
}

// testSplits split the keys into three regions.
var testSplits = []string{"k3", "k6"}

// startTestCluster starts ZooKeeper, n region servers, the initial map
// (three regions, replicas copies each), and a master, and waits until
// every server and the master are ready.
func startTestCluster(t *testing.T, n, replicas int) *testCluster {
	t.Helper()
	c := &testCluster{t: t, zk: zkserver.ForTest(t), servers: map[string]*region.Server{}}
	c.admin = c.dial()
	dir := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("rs%d", i+1)
		cfg := region.DefaultConfig()
		cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm = name, "/"+name, "", filepath.Join(dir, name+".sock")
		cfg.Zookeeper, cfg.ZKSessionTimeout = c.zk.Addr(), region.Duration(time.Second)
		cfg.SegmentSize, cfg.L0Pairs, cfg.GrowthFactor, cfg.GrowStep = 64<<10, 256, 2, 256<<10
		cfg.CacheSize, cfg.Workers = 4<<20, 4
		cfg.HTTP = "127.0.0.1:0"
		srv, err := region.Start(cfg, zaptest.NewLogger(t).Named(name), region.WithFS(vfs.NewMem()))
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		c.servers[name] = srv
		t.Cleanup(func() { c.stop(name) })
	}
	live, err := c.admin.Servers(c.ctx(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var srvs []regionmap.Server
	for _, si := range live {
		srv := si.Server
		srv.Started = si.Started
		srvs = append(srvs, srv)
	}
	m, err := master.InitialMap(srvs, master.Layout{Splits: testSplits, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.admin.CreateMap(c.ctx(10*time.Second), m); err != nil {
		t.Fatal(err)
	}
	msess := c.dial()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- master.Run(ctx, master.Config{Name: "m1", Session: msess, HTTP: "127.0.0.1:0", Grace: 2 * time.Second,
			Recheck: 50 * time.Millisecond, DropHold: 200 * time.Millisecond, Log: zaptest.NewLogger(t).Named("m1")})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("master: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the master did not stop 10 s after its context ended")
		}
	})
	c.waitReady("the initial cluster")
	return c
}

func (c *testCluster) ctx(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	c.t.Cleanup(cancel)
	return ctx
}

// dial opens a ZooKeeper session closed when the test ends.
func (c *testCluster) dial() *coord.Session {
	c.t.Helper()
	s, err := coord.Dial(c.ctx(20*time.Second), coord.Config{Servers: []string{c.zk.Addr()}, Root: "/tebis", SessionTimeout: time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(s.Close)
	return s
}

// stop closes server name, if it runs.
func (c *testCluster) stop(name string) {
	if srv := c.servers[name]; srv != nil {
		if err := srv.Close(); err != nil {
			c.t.Errorf("close %s: %v", name, err)
		}
		delete(c.servers, name)
	}
}

// masterHTTP is the master's announced HTTP address (waiting for it).
func (c *testCluster) masterHTTP() string {
	c.t.Helper()
	var addr string
	c.eventually("the master announced", 20*time.Second, func() bool {
		ms, err := c.admin.Masters(c.ctx(5 * time.Second))
		addr = ms["m1"].HTTP
		return err == nil && addr != ""
	})
	return addr
}

// readMap is the region map now.
func (c *testCluster) readMap() *regionmap.Map {
	c.t.Helper()
	m, _, err := c.admin.ReadMap(c.ctx(5 * time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// waitReady waits until every running server's and the master's
// /readyz answer 200.
func (c *testCluster) waitReady(what string) {
	c.t.Helper()
	addrs := []string{c.masterHTTP()}
	for _, srv := range c.servers {
		addrs = append(addrs, srv.HTTPAddr())
	}
	c.eventually(what+": every endpoint ready", 30*time.Second, func() bool {
		return !slices.ContainsFunc(addrs, func(a string) bool {
			resp, err := http.Get("http://" + a + "/readyz")
			if err != nil {
				return true
			}
			resp.Body.Close()
			return resp.StatusCode != http.StatusOK
		})
	})
}

// waitFailover waits until no region of the map has server name as its
// primary or in its group, and returns that map.
func (c *testCluster) waitFailover(name string) *regionmap.Map {
	c.t.Helper()
	var m *regionmap.Map
	c.eventually("a map without "+name, 30*time.Second, func() bool {
		m = c.readMap()
		return !slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool {
			return r.Primary == name || slices.Contains(r.Group(), name)
		})
	})
	return m
}

// eventually polls cond until it holds, failing after d.
func (c *testCluster) eventually(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// runHealth runs `tebis cluster health` against ZooKeeper at zk: stdout,
// stderr as main would print it, and the exit status.
func runHealth(t *testing.T, zk string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.RunContext(context.Background(), []string{"tebis", "--log-level", "error", "cluster", "health", "--zookeeper", zk, "--timeout", "1s"})
	if err != nil {
		fmt.Fprintln(&errOut, "tebis:", err)
	}
	return out.String(), errOut.String(), exitStatus(err)
}

// TestClusterHealth: on a running cluster every endpoint is healthy and
// ready (status 0); with a server down, its absence is reported and the
// status is 1.
func TestClusterHealth(t *testing.T) {
	c := startTestCluster(t, 3, 3)
	out, errOut, status := runHealth(t, c.zk.Addr())
	if status != 0 {
		t.Fatalf("healthy cluster: status %d\n%s%s", status, out, errOut)
	}
	for _, name := range []string{"rs1", "rs2", "rs3"} {
		want := fmt.Sprintf("server %s http://%s: healthy, ready\n", name, c.servers[name].HTTPAddr())
		if !strings.Contains(out, want) {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
	if want := fmt.Sprintf("master m1 http://%s: healthy, ready: leader\n", c.masterHTTP()); !strings.Contains(out, want) {
		t.Errorf("no line %q in:\n%s", want, out)
	}
	if !strings.HasSuffix(out, "all healthy and ready\n") {
		t.Errorf("no verdict at the end of:\n%s", out)
	}

	c.stop("rs3")
	c.waitFailover("rs3")
	out, errOut, status = runHealth(t, c.zk.Addr())
	if status != exitUnhealthy || !strings.Contains(out, "server rs3: in the region map") || !strings.Contains(out, "NOT REGISTERED") ||
		!strings.Contains(errOut, "not healthy and ready") || strings.Contains(out, "all healthy") {
		t.Fatalf("with rs3 down: status %d\n%s%s", status, out, errOut)
	}
	t.Logf("with rs3 down:\n%s", out)
}

// fakeView is a clusterView over fixed values.
type fakeView struct {
	live    map[string]coord.ServerInfo
	masters map[string]coord.MasterInfo
	m       *regionmap.Map // nil: no map
	leader  string
}

func (f fakeView) Servers(context.Context) (map[string]coord.ServerInfo, error) { return f.live, nil }
func (f fakeView) Masters(context.Context) (map[string]coord.MasterInfo, error) {
	return f.masters, nil
}
func (f fakeView) Leader(context.Context) (string, error) { return f.leader, nil }
func (f fakeView) ReadMap(context.Context) (*regionmap.Map, int32, error) {
	if f.m == nil {
		return nil, 0, coord.ErrNoMap
	}
	return f.m, 0, nil
}

// probeServer answers /healthz and /readyz with the given statuses and
// bodies.
func probeServer(t *testing.T, health int, healthBody string, ready int, readyBody string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(health); fmt.Fprintln(w, healthBody) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(ready); fmt.Fprintln(w, readyBody) })
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return strings.TrimPrefix(ts.URL, "http://")
}

// TestCheckCluster: each kind of problem gets its line and fails the
// check; a master without an HTTP address is noted only.
func TestCheckCluster(t *testing.T) {
	ready := probeServer(t, 200, "ok", 200, "ready")
	notReady := probeServer(t, 200, "ok", 503, "regions waiting for their backups: [2]\nread lease lapsed")
	sick := probeServer(t, 503, "volume no-space: full", 503, "volume no-space: full")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String() // nothing listens there once closed
	ln.Close()
	mapOf := func(names ...string) *regionmap.Map {
		m := &regionmap.Map{Version: 4}
		for _, n := range names {
			m.Servers = append(m.Servers, regionmap.Server{Name: n})
		}
		return m
	}
	reg := func(addrs map[string]string) map[string]coord.ServerInfo {
		out := map[string]coord.ServerInfo{}
		for n, a := range addrs {
			out[n] = coord.ServerInfo{Server: regionmap.Server{Name: n}, HTTP: a}
		}
		return out
	}
	master := map[string]coord.MasterInfo{"m1": {Name: "m1", HTTP: ready}, "m2": {Name: "m2"}}
	for _, tc := range []struct {
		name string
		view fakeView
		ok   bool
		want []string
	}{
		{"healthy", fakeView{live: reg(map[string]string{"rs1": ready}), masters: master, m: mapOf("rs1"), leader: "m1"}, true, []string{
			"server rs1 http://" + ready + ": healthy, ready\n" +
				"master m1 http://" + ready + ": healthy, ready\n" +
				"master m2 (standby): no HTTP address: not checked",
		}},
		{"not ready", fakeView{live: reg(map[string]string{"rs1": notReady}), masters: master, m: mapOf("rs1"), leader: "m1"}, false, []string{
			"server rs1 http://" + notReady + ": healthy, NOT READY: regions waiting for their backups: [2]; read lease lapsed",
		}},
		{"unhealthy", fakeView{live: reg(map[string]string{"rs1": sick}), masters: master, m: mapOf("rs1"), leader: "m1"}, false, []string{
			"server rs1 http://" + sick + ": UNHEALTHY: volume no-space: full, NOT READY: volume no-space: full",
		}},
		{"unreachable", fakeView{live: reg(map[string]string{"rs1": closed}), masters: master, m: mapOf("rs1"), leader: "m1"}, false, []string{
			"server rs1 http://" + closed + ": UNHEALTHY: unreachable: ",
		}},
		{"not registered", fakeView{live: reg(map[string]string{"rs1": ready}), masters: master, m: mapOf("rs1", "rs2"), leader: "m1"}, false, []string{
			"server rs2: in the region map (version 4), NOT REGISTERED (down?)",
		}},
		{"no HTTP address", fakeView{live: reg(map[string]string{"rs1": ""}), masters: master, m: mapOf("rs1"), leader: "m1"}, false, []string{
			"server rs1: registered without an HTTP address (start it with --http): not checked",
		}},
		{"no map, no leader", fakeView{live: reg(map[string]string{"rs1": ready})}, false, []string{
			"no region map (run tebis cluster init)", "no master leads",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, ok, err := checkCluster(context.Background(), tc.view, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Join(lines, "\n")
			if ok != tc.ok {
				t.Errorf("ok = %v, want %v", ok, tc.ok)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("no %q in:\n%s", w, text)
				}
			}
		})
	}
}

package master

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/coord/coordtest"
	"github.com/tebis-go/tebis/region"
)

// disconnected is a coordinator whose service is unreachable.
type disconnected struct{ *coordtest.Coordinator }

func (disconnected) Connected() bool { return false }

// hostile is a server name that would run a script if not escaped.
const hostile = `<script>alert("rs")</script>`

// testServer serves the master's handler of cfg (Coord: c) over b.
func testServer(t *testing.T, c Coordinator, b *board, fetch func(context.Context, string) (region.Status, error)) *httptest.Server {
	t.Helper()
	cfg := Config{Name: "m<1>", Coord: c, Log: zaptest.NewLogger(t), Now: func() time.Time { return t0.Add(time.Minute) }, Fetch: fetch,
		Handlers: map[string]http.Handler{"GET /metrics": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "metrics here") })}}
	ts := httptest.NewServer(handler(cfg, b))
	t.Cleanup(ts.Close)
	return ts
}

func fetch(t *testing.T, ts *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestHTTPProbes(t *testing.T) {
	noFetch := func(context.Context, string) (region.Status, error) { return region.Status{}, errors.New("not asked") }
	c := coordtest.New(nil, nil)
	for _, tc := range []struct {
		name   string
		coord  Coordinator
		board  func(*board)
		path   string
		status int
		want   string
	}{
		{"healthy", c, func(*board) {}, "/healthz", 200, "ok"},
		{"disconnected", disconnected{c}, func(*board) {}, "/healthz", 503, "zookeeper session not connected"},
		{"leader with a map", c, func(b *board) { b.lead(true, t0); b.decided(nil) }, "/readyz", 200, "ready: leader"},
		{"leader without a map", c, func(b *board) { b.lead(true, t0); b.decided(coord.ErrNoMap) }, "/readyz", 503, "no valid region map read (yet, or in its last decision): " + coord.ErrNoMap.Error()},
		{"leader, map lost after validation", c, func(b *board) { b.lead(true, t0); b.decided(nil); b.decided(coord.ErrNoMap) }, "/readyz", 503, coord.ErrNoMap.Error()},
		{"leader, map read again", c, func(b *board) { b.lead(true, t0); b.decided(coord.ErrNoMap); b.decided(nil) }, "/readyz", 200, "ready: leader"},
		{"standby", c, func(*board) {}, "/readyz", 200, "ready: standby (leader: other)"},
		{"standby disconnected", disconnected{c}, func(*board) {}, "/readyz", 503, "zookeeper session not connected"},
		{"extra handler", c, func(*board) {}, "/metrics", 200, "metrics here"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			l, err := c.Campaign(ctx, "other")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Resign()
			b := &board{}
			tc.board(b)
			code, body := fetch(t, testServer(t, tc.coord, b, noFetch), tc.path)
			if code != tc.status || !strings.Contains(body, tc.want) {
				t.Fatalf("GET %s = %d %q, want %d with %q", tc.path, code, body, tc.status, tc.want)
			}
		})
	}
}

// TestStatusPage renders a leader's page: servers with their roles and
// states, regions with lag and ops/s from the primaries' statuses
// ("unknown" when unreadable), failovers and map versions; every name is
// escaped.
func TestStatusPage(t *testing.T) {
	c := coordtest.New(nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Announce(ctx, coord.MasterInfo{Name: "m<1>", HTTP: "127.0.0.1:7000"})
	b := &board{}
	b.lead(true, t0)
	b.decided(nil)
	m := &regionmap.Map{Version: 7, Replicas: 3, Servers: []regionmap.Server{srv("rs1"), srv("rs2"), srv(hostile)},
		Regions: []regionmap.Assignment{
			{ID: 1, End: "m", Primary: "rs1", Backups: []string{"rs2", hostile}, Epoch: 4},
			{ID: 2, Start: "m", Primary: "rs2", Backups: []string{"rs1"}, Joining: []string{"rs3"}, Epoch: 2},
		}}
	b.setMap(m)
	b.setLive(map[string]coord.ServerInfo{
		"rs1":   {Server: srv("rs1"), Started: 1, HTTP: "rs1:80"},
		"rs2":   {Server: srv("rs2"), Started: 1, HTTP: "rs2:80"},
		"rs3":   {Server: srv("rs3"), Started: 5},
		hostile: {Server: srv(hostile), Started: 1, HTTP: `x"><img src=y onerror=alert(1)>`},
	})
	b.setReports(map[Join]bool{{Region: 1, Epoch: 4, Server: hostile}: true}, nil)
	old := m.Clone()
	old.Version, old.Regions[0].Primary, old.Regions[0].Epoch = 6, "rs0", 3
	b.published(old, m, t0.Add(30*time.Second), []Failover{{Region: 1, From: "rs0", To: "rs1", Epoch: 4, At: t0.Add(30 * time.Second), Took: 1500 * time.Millisecond}})
	statuses := map[string]region.Status{
		"rs1:80": {Name: "rs1", Regions: []region.RegionStatus{{ID: 1, Epoch: 4, Role: "primary", OpsPerSec: 123.4, Backups: map[string]region.BackupLag{"rs2": {Bytes: 4096, Commands: 3}}}}},
		"rs2:80": {Name: "rs2", Unready: []string{"regions waiting for their backups: [2]"}},
	}
	page := func(_ context.Context, addr string) (region.Status, error) {
		if st, ok := statuses[addr]; ok {
			return st, nil
		}
		return region.Status{}, errors.New("connection refused")
	}
	code, body := fetch(t, testServer(t, c, b, page), "/")
	if code != 200 {
		t.Fatalf("GET / = %d:\n%s", code, body)
	}
	for _, want := range []string{
		`tebis master <span id="master">m&lt;1&gt;</span>`,
		`This master is the <b>leader</b>`,
		`Region map version <span id="map-version">7</span>`,
		`<a href="http://127.0.0.1:7000/">127.0.0.1:7000</a>`,
		// servers
		`<tr class="server" data-server="rs1">`,
		`<td class="report ok">ready</td>`,
		`<td class="report bad">not ready: regions waiting for their backups: [2]</td>`,
		`<td class="state">live, not in the map</td>`, // rs3
		`<td class="name">&lt;script&gt;alert(&#34;rs&#34;)&lt;/script&gt;</td>`,
		`region 1 at epoch 4`,
		`<td class="report bad">unknown: connection refused</td>`,
		// regions
		`<td class="primary">rs1</td>`,
		`<span class="backup">rs2</span> (4096 B, 3 commands), <span class="backup bad">&lt;script&gt;alert(&#34;rs&#34;)&lt;/script&gt;</span> (unknown)`,
		`<td class="ops">123.4</td>`,
		`<td class="ops">unknown</td>`, // rs2 answers, but not as region 2's primary
		`<td class="joining">rs3</td>`,
		// history
		`<td class="from">rs0</td><td class="to">rs1</td><td>4</td><td>1.5s</td>`,
		`region 1: primary rs0 → rs1, epoch 3 → 4`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>") || strings.Contains(body, "<img") {
		t.Errorf("the page holds unescaped markup:\n%s", body)
	}
	if t.Failed() {
		t.Logf("the page:\n%s", body)
	}
}

// TestStatusPageStandby: a standby's page names the leader and shows no
// cluster state, not even the map it saw while it led.
func TestStatusPageStandby(t *testing.T) {
	c := coordtest.New(nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l, err := c.Campaign(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Resign()
	b := &board{}
	b.lead(true, t0)
	b.setMap(&regionmap.Map{Version: 3, Servers: []regionmap.Server{srv("rs1")}, Regions: []regionmap.Assignment{{ID: 1, Primary: "rs1", Epoch: 1}}})
	b.lead(false, t0.Add(time.Second))
	code, body := fetch(t, testServer(t, c, b, nil), "/")
	if code != 200 || !strings.Contains(body, "This master is the <b>standby</b>") || !strings.Contains(body, "Leader: other;") ||
		strings.Contains(body, `class="region"`) || strings.Contains(body, "map-version") {
		t.Fatalf("GET / on a standby = %d:\n%s", code, body)
	}
}

// TestFetchStatusBounded: the master reads a server's status only from
// host:port/status.json: an address that is not a host:port is refused
// unread, a redirect is not followed, and an answer past maxStatus is cut
// (a decode error, not an allocation of whatever the peer sends).
func TestFetchStatusBounded(t *testing.T) {
	var redirected atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { redirected.Store(true) }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/status.json":
			if r.URL.Query().Get("x") != "" {
				return
			}
			w.Write([]byte(`{"name": "`))
			w.Write(bytes.Repeat([]byte("x"), maxStatus+10))
			w.Write([]byte(`"}`))
		default:
			http.Redirect(w, r, target.URL, http.StatusFound)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()
	if _, err := fetchStatus(ctx, addr); err == nil {
		t.Fatal("a status past maxStatus decoded")
	}
	for _, bad := range []string{addr + "/other?", "user@" + addr, "nohostport", ":80"} {
		if _, err := fetchStatus(ctx, bad); err == nil || !strings.Contains(err.Error(), "not a host:port") {
			t.Errorf("address %q: %v, want refused", bad, err)
		}
	}
	redir := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	}))
	defer redir.Close()
	if _, err := fetchStatus(ctx, strings.TrimPrefix(redir.URL, "http://")); err == nil || redirected.Load() {
		t.Fatalf("a redirect: %v, followed %v", err, redirected.Load())
	}
}

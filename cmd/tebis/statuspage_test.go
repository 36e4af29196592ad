package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tebis-go/tebis/client/regionmap"
)

// chromium is the browser's path; the test fails when it is missing (make
// deps installs Debian's chromium package).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run `make deps` (it installs Debian's chromium package)")
	return ""
}

// browser starts headless chromium for the test. A start that fails
// (the browser exits before it serves; seen once under a loaded `make
// test`) is tried again, three times in all.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium(t)), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000))
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
		if err = chromedp.Do(ctx); err == nil { // starts the browser
			t.Cleanup(func() { cancel(); cancelAlloc() })
			return ctx
		}
		cancel()
		cancelAlloc()
		t.Logf("start chromium, attempt %d: %v", attempt, err)
	}
	t.Fatalf("start chromium: %v", err)
	return nil
}

// shownRegion is a region row of the master's page, as the browser shows
// it.
type shownRegion struct {
	ID      uint64   `json:"id"`
	Epoch   uint64   `json:"epoch"`
	Primary string   `json:"primary"`
	Backups []string `json:"backups"`
	Ops     string   `json:"ops"`
}

// shownServer is a server row of the master's page.
type shownServer struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Report string `json:"report"`
	Page   string `json:"page"`
}

// shownFailover is a failover row of the master's page.
type shownFailover struct {
	Region uint64 `json:"region"`
	From   string `json:"from"`
	To     string `json:"to"`
}

// shown is what the master's page shows.
type shown struct {
	Role       string          `json:"role"`
	MapVersion uint64          `json:"map_version"`
	Regions    []shownRegion   `json:"regions"`
	Servers    []shownServer   `json:"servers"`
	Failovers  []shownFailover `json:"failovers"`
}

// readPage is run in the browser: what the page shows, as JSON.
const readPage = `JSON.stringify({
  role: document.querySelector('#role b').textContent,
  map_version: Number(document.querySelector('#map-version').textContent),
  regions: Array.from(document.querySelectorAll('tr.region')).map(r => ({
    id: Number(r.dataset.region),
    epoch: Number(r.querySelector('.epoch').textContent),
    primary: r.querySelector('.primary').textContent,
    backups: Array.from(r.querySelectorAll('.backup')).map(b => b.textContent),
    ops: r.querySelector('.ops').textContent })),
  servers: Array.from(document.querySelectorAll('tr.server')).map(r => ({
    name: r.dataset.server,
    state: r.querySelector('.state').textContent,
    report: r.querySelector('.report').textContent,
    page: (r.querySelector('a.page') || {}).href || '' })),
  failovers: Array.from(document.querySelectorAll('tr.failover')).map(r => ({
    region: Number(r.dataset.region),
    from: r.querySelector('.from').textContent,
    to: r.querySelector('.to').textContent })),
})`

// load (re)loads url in the browser and returns what the page shows.
func load(t *testing.T, ctx context.Context, url string) shown {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("#regions"))); err != nil {
		t.Fatalf("load %s: %v", url, err)
	}
	js, err := chromedp.Run(ctx, chromedp.Evaluate[string](readPage))
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	var s shown
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatalf("the page read as %s: %v", js, err)
	}
	return s
}

// matches reports how the page's regions differ from m's ("": they
// match).
func matches(s shown, m *regionmap.Map) string {
	if s.MapVersion != m.Version {
		return fmt.Sprintf("map version %d shown, %d in ZooKeeper", s.MapVersion, m.Version)
	}
	if len(s.Regions) != len(m.Regions) {
		return fmt.Sprintf("%d regions shown, %d in the map", len(s.Regions), len(m.Regions))
	}
	for i, r := range m.Regions {
		got := s.Regions[i]
		if got.ID != r.ID || got.Epoch != r.Epoch || got.Primary != r.Primary || !slices.Equal(got.Backups, r.Backups) {
			return fmt.Sprintf("region shown as %+v, the map has %+v", got, r)
		}
	}
	return ""
}

// TestStatusPageInBrowser loads the master's status page of a running
// cluster in headless chromium: it shows the map's primaries, backups and
// epochs, every server live and ready with a link to its own page; after
// a primary's server stops, it shows the new primary, the server dead,
// and the failover. A screenshot is kept in the test's temp dir.
func TestStatusPageInBrowser(t *testing.T) {
	ctx := browser(t)
	c := startTestCluster(t, 3, 3)
	url := "http://" + c.masterHTTP() + "/"
	m := c.readMap()
	s := load(t, ctx, url)
	if s.Role != "leader" {
		t.Fatalf("the master's page says it is the %q", s.Role)
	}
	if diff := matches(s, m); diff != "" {
		t.Fatalf("the page differs from the map: %s", diff)
	}
	for _, r := range s.Regions {
		if r.Ops == "unknown" {
			t.Errorf("region %d: ops/s unknown though its primary serves its status", r.ID)
		}
	}
	if len(s.Servers) != 3 {
		t.Fatalf("servers shown: %+v", s.Servers)
	}
	for _, srv := range s.Servers {
		if want := "http://" + c.servers[srv.Name].HTTPAddr() + "/"; srv.State != "live" || srv.Report != "ready" || srv.Page != want {
			t.Errorf("server shown as %+v; want live, ready, its page at %s", srv, want)
		}
	}
	// A server's own page, through the master's link.
	own, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(own, chromedp.Navigate(s.Servers[0].Page)); err != nil {
		t.Fatalf("the server's own page: %v", err)
	}
	name, err := chromedp.Run(own, chromedp.Text(chromedp.CSS("#name")))
	if err != nil {
		t.Fatalf("the server's own page: %v", err)
	}
	if name != s.Servers[0].Name {
		t.Fatalf("the page linked for %s names %q", s.Servers[0].Name, name)
	}

	failed := m.Regions[0].Primary
	c.stop(failed)
	c.waitFailover(failed)
	deadline := time.Now().Add(30 * time.Second)
	for {
		s = load(t, ctx, url)
		m = c.readMap()
		diff := matches(s, m)
		if diff == "" && !slices.ContainsFunc(s.Failovers, func(f shownFailover) bool { return f.Region == m.Regions[0].ID && f.From == failed }) {
			diff = fmt.Sprintf("no failover of region %d from %s shown: %+v", m.Regions[0].ID, failed, s.Failovers)
		}
		if diff == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s stopped: the page differs from the map: %s", failed, diff)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if s.Regions[0].Primary == failed {
		t.Fatalf("region %d still shown with primary %s", s.Regions[0].ID, failed)
	}
	for _, f := range s.Failovers {
		if f.Region == m.Regions[0].ID && f.From == failed && f.To != m.Regions[0].Primary {
			t.Errorf("failover of region %d shown to %s, the map's primary is %s", f.Region, f.To, m.Regions[0].Primary)
		}
	}
	i := slices.IndexFunc(s.Servers, func(srv shownServer) bool { return srv.Name == failed })
	if i < 0 || s.Servers[i].State != "dead" {
		t.Errorf("the stopped server is shown as %+v", s.Servers)
	}

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.TempDir(), "status.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(png), "\x89PNG") {
		t.Fatalf("the screenshot is not a PNG")
	}
	t.Logf("screenshot of the status page after the failover: %s", path)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// Exit status of `tebis cluster health`.
const (
	exitUnhealthy = 1 // an endpoint is unhealthy, not ready or unreachable; a server of the map is not registered; no master leads
	exitNoZK      = 3 // ZooKeeper could not be read
)

const healthDescription = `Reads ZooKeeper, then asks /healthz and /readyz of every registered region
server and every master that announced an HTTP address, in parallel, and
prints one line per endpoint.

Exit status: 0 every endpoint healthy and ready, every server of the map
registered, a master leading; 1 anything else (each problem printed);
2 usage error; 3 ZooKeeper could not be read.`

// clusterView is what `tebis cluster health` reads of ZooKeeper
// (*coord.Session).
type clusterView interface {
	Servers(ctx context.Context) (map[string]coord.ServerInfo, error)
	Masters(ctx context.Context) (map[string]coord.MasterInfo, error)
	ReadMap(ctx context.Context) (*regionmap.Map, int32, error)
	Leader(ctx context.Context) (string, error)
}

// endpoint is one HTTP endpoint to check.
type endpoint struct {
	kind, name, addr string
}

// endpointHealth is what an endpoint answered.
type endpointHealth struct {
	endpoint
	healthy, ready    bool
	health, readiness string // the bodies, or why there is none
}

// checkCluster checks every endpoint view names: it returns one line per
// endpoint or problem, and whether everything is healthy and ready. A
// failure to read ZooKeeper is returned as an error.
func checkCluster(ctx context.Context, view clusterView, timeout time.Duration) (lines []string, ok bool, err error) {
	live, err := view.Servers(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the servers: %w", err)
	}
	masters, err := view.Masters(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the masters: %w", err)
	}
	leader, err := view.Leader(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("read the master election: %w", err)
	}
	m, _, err := view.ReadMap(ctx)
	if err != nil && !errors.Is(err, coord.ErrNoMap) {
		return nil, false, fmt.Errorf("read the region map: %w", err)
	}
	ok = true
	// rows are the output lines in order: servers, then masters; a row
	// with an endpoint gets its line from the probe.
	type row struct {
		line string
		ep   int // index in eps, or -1
	}
	var rows []row
	var eps []endpoint
	add := func(ep endpoint) {
		rows = append(rows, row{ep: len(eps)})
		eps = append(eps, ep)
	}
	for _, n := range slices.Sorted(maps.Keys(live)) {
		if live[n].HTTP == "" {
			rows, ok = append(rows, row{line: fmt.Sprintf("server %s: registered without an HTTP address (start it with --http): not checked", n), ep: -1}), false
			continue
		}
		add(endpoint{"server", n, live[n].HTTP})
	}
	for _, n := range slices.Sorted(maps.Keys(masters)) {
		role := "standby"
		if n == leader {
			role = "leader"
		}
		if masters[n].HTTP == "" {
			rows = append(rows, row{line: fmt.Sprintf("master %s (%s): no HTTP address: not checked", n, role), ep: -1})
			continue
		}
		add(endpoint{"master", n, masters[n].HTTP})
	}
	probed := probeAll(ctx, eps, timeout)
	for _, r := range rows {
		if r.ep < 0 {
			lines = append(lines, r.line)
			continue
		}
		h := probed[r.ep]
		if !h.healthy || !h.ready {
			ok = false
		}
		state := "healthy"
		if !h.healthy {
			state = "UNHEALTHY: " + h.health
		}
		if h.ready {
			state += ", " + h.readiness
		} else {
			state += ", NOT READY: " + h.readiness
		}
		lines = append(lines, fmt.Sprintf("%s %s http://%s: %s", h.kind, h.name, h.addr, state))
	}
	switch {
	case errors.Is(err, coord.ErrNoMap):
		lines, ok = append(lines, "no region map (run tebis cluster init)"), false
	default:
		for _, s := range m.Servers {
			if _, ok := live[s.Name]; !ok {
				lines = append(lines, fmt.Sprintf("server %s: in the region map (version %d), NOT REGISTERED (down?)", s.Name, m.Version))
			}
		}
		if slices.ContainsFunc(m.Servers, func(s regionmap.Server) bool { _, ok := live[s.Name]; return !ok }) {
			ok = false
		}
	}
	if leader == "" {
		lines, ok = append(lines, "no master leads"), false
	}
	return lines, ok, nil
}

// probeAll asks every endpoint's /healthz and /readyz in parallel, each
// request bounded by timeout; the answers come in eps's order.
func probeAll(ctx context.Context, eps []endpoint, timeout time.Duration) []endpointHealth {
	out := make([]endpointHealth, len(eps))
	cl := &http.Client{Timeout: timeout}
	var wg sync.WaitGroup
	for i, ep := range eps {
		out[i].endpoint = ep
		wg.Add(2)
		go func() {
			defer wg.Done()
			out[i].healthy, out[i].health = probe(ctx, cl, ep.addr, "/healthz")
		}()
		go func() {
			defer wg.Done()
			out[i].ready, out[i].readiness = probe(ctx, cl, ep.addr, "/readyz")
		}()
	}
	wg.Wait()
	return out
}

// probe GETs path at addr: whether it answered 200, and its body on one
// line (or why there is no answer).
func probe(ctx context.Context, cl *http.Client, addr, path string) (bool, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := cl.Do(req)
	if err != nil {
		return false, "unreachable: " + err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(body)), "\n", "; ")), " ")
	if resp.StatusCode != http.StatusOK && text == "" {
		text = resp.Status
	}
	return resp.StatusCode == http.StatusOK, text
}

func clusterHealth(c *cli.Context) error {
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	sess, err := dialZK(c, log)
	if err != nil {
		return &statusError{exitNoZK, err}
	}
	defer sess.Close()
	ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout")+10*time.Second)
	defer cancel()
	lines, ok, err := checkCluster(ctx, sess, c.Duration("timeout"))
	if err != nil {
		return &statusError{exitNoZK, err}
	}
	for _, l := range lines {
		fmt.Fprintln(c.App.Writer, l)
	}
	if !ok {
		return &statusError{exitUnhealthy, errors.New("the cluster is not healthy and ready")}
	}
	fmt.Fprintln(c.App.Writer, "all healthy and ready")
	return nil
}

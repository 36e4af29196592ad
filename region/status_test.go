package region_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/region"
)

// getStatus fetches srv's /status.json.
func getStatus(t *testing.T, srv *region.Server) region.Status {
	t.Helper()
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st region.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("/status.json: %v", err)
	}
	return st
}

// TestStatusShowsRolesAndRegions: each server's /status.json names the
// roles the map gives it, its primaries' served requests and backups'
// lag, its copies' completeness and the regions' engine state; its
// registration carries its HTTP address; / renders the same as HTML.
func TestStatusShowsRolesAndRegions(t *testing.T) {
	c := startInprocCluster(t, 3)
	for name, nd := range c.nodes {
		if got := c.coord.Servers()[name].HTTP; got != nd.srv.HTTPAddr() {
			t.Fatalf("%s registered HTTP address %q, want %q", name, got, nd.srv.HTTPAddr())
		}
	}
	m, _ := c.coord.Map()
	for _, nd := range c.nodes {
		getStatus(t, nd.srv) // the first sample of the request rates
	}
	c.write(0, 600, "v")
	for name, nd := range c.nodes {
		st := getStatus(t, nd.srv)
		if st.Name != name || st.MapVersion != m.Version || st.Run != c.run(name) || st.Health != "ok" || len(st.Unready) > 0 {
			t.Fatalf("%s: status %+v; want its name, map version %d, run %d, healthy and ready", name, st, m.Version, c.run(name))
		}
		for _, r := range m.Regions {
			i := slices.IndexFunc(st.Regions, func(rs region.RegionStatus) bool { return rs.ID == r.ID })
			if i < 0 {
				t.Fatalf("%s: region %d missing from its status", name, r.ID)
			}
			rs := st.Regions[i]
			if rs.Epoch != r.Epoch || rs.Start != r.Start || rs.End != r.End || !rs.Hosted {
				t.Fatalf("%s: region %d: %+v; map %+v", name, r.ID, rs, r)
			}
			switch {
			case r.Primary == name:
				if rs.Role != "primary" || rs.Serving != "served" || rs.OpsPerSec <= 0 || rs.LogSegments == 0 || rs.L0Pairs+len(rs.Levels) == 0 || len(rs.Backups) != len(r.Backups) {
					t.Fatalf("%s: region %d as primary: %+v", name, r.ID, rs)
				}
				for _, b := range r.Backups {
					if _, ok := rs.Backups[b]; !ok {
						t.Fatalf("%s: region %d: no lag for backup %s: %v", name, r.ID, b, rs.Backups)
					}
				}
			case slices.Contains(r.Backups, name):
				if rs.Role != "backup" || rs.Complete == nil || !*rs.Complete {
					t.Fatalf("%s: region %d as backup: %+v", name, r.ID, rs)
				}
			}
		}
		resp, err := http.Get("http://" + nd.srv.HTTPAddr() + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Region server <span id=\"name\">"+name+"</span>") ||
			strings.Count(string(body), `<tr class="region"`) != len(m.Regions) {
			t.Fatalf("%s: status page %d:\n%s", name, resp.StatusCode, body)
		}
	}
}

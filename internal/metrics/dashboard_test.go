package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/tebis-go/tebis/internal/metrics"
	"github.com/tebis-go/tebis/master"
	"github.com/tebis-go/tebis/region"
)

// exported are the series names the region servers and the master
// export: theirs, and the Go runtime's and the process's.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range append(region.MetricNames(), master.MetricNames()...) {
		out[n] = true
	}
	fams, err := metrics.NewRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		out[f.GetName()] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			for _, n := range metrics.SeriesNames(f.GetName()) {
				out[n] = true
			}
		case dto.MetricType_SUMMARY:
			out[f.GetName()+"_sum"], out[f.GetName()+"_count"] = true, true
		}
	}
	return out
}

// queries collects every PromQL expression of a Grafana dashboard: the
// panels' targets and the template variables' queries.
func queries(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
				*out = append(*out, s)
				continue
			}
			queries(x, out)
		}
	case []any:
		for _, x := range v {
			queries(x, out)
		}
	}
}

// metricName matches the names of the series the dashboard may use.
var metricName = regexp.MustCompile(`\b(?:tebis|go|process)_[a-zA-Z0-9_]+`)

// TestDashboardUsesExportedMetrics: every metric name in the Grafana
// dashboard's queries is one the collectors export, and every panel
// queries at least one.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []map[string]any `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	var all any
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	known := exported(t)
	var exprs []string
	queries(all, &exprs)
	if len(exprs) == 0 {
		t.Fatal("no query in the dashboard")
	}
	for _, e := range exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			if !known[n] {
				t.Errorf("the dashboard queries %s, which nothing exports (in %q)", n, e)
			}
		}
	}
	for _, p := range dash.Panels {
		if p["type"] == "row" {
			continue
		}
		var mine []string
		queries(p, &mine)
		if !metricName.MatchString(strings.Join(mine, " ")) {
			t.Errorf("panel %q queries no metric", p["title"])
		}
	}
}

// TestOperationsListsExportedMetrics: the Metrics section of
// docs/operations.md lists exactly the tebis metrics the collectors
// export (a histogram by its name).
func TestOperationsListsExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Metrics\n")
	if i < 0 {
		t.Fatal("docs/operations.md has no Metrics section")
	}
	section := doc[i+1:]
	if j := strings.Index(section[1:], "\n## "); j >= 0 {
		section = section[:j+1]
	}
	listed := map[string]bool{}
	for _, n := range regexp.MustCompile("`(tebis_[a-z0-9_]+)`").FindAllStringSubmatch(section, -1) {
		listed[n[1]] = true
	}
	want := map[string]bool{}
	for _, n := range append(region.MetricNames(), master.MetricNames()...) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			n = strings.TrimSuffix(n, suffix)
		}
		want[n] = true
	}
	for n := range want {
		if !listed[n] {
			t.Errorf("docs/operations.md does not list %s", n)
		}
	}
	for n := range listed {
		if !want[n] {
			t.Errorf("docs/operations.md lists %s, which nothing exports", n)
		}
	}
}

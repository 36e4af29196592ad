package region

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// scrape reads the server's /metrics.
func scrape(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + s.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample is the value of the series name{labels} in fams (a histogram's:
// its count); ok false if there is none.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// sum adds the values of every series of name with labels.
func sum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	total := 0.0
	f := fams[name]
	if f == nil {
		return 0
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		total += m.GetGauge().GetValue() + m.GetCounter().GetValue()
	}
	return total
}

func mustSample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := sample(fams, name, labels)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// TestMetricsScrapedFromServers: a primary and its backup, scraped over
// HTTP. N puts and M gets move the region's op counters and latency
// histograms by N and M, a missing key the not_found errors by one;
// L0 and the levels hold exactly the pairs put (the engine's state);
// the primary reports its backup live with nothing pending and the
// index segments it shipped; the backup reports its complete copy.
func TestMetricsScrapedFromServers(t *testing.T) {
	dir := t.TempDir()
	m := pairMap(dir)
	start := staticServersWith(t, dir, m, 5*time.Second, nil, func(c *Config) { c.HTTP = "127.0.0.1:0" })
	b := start("b")
	p := start("p")
	cl, err := client.Open(context.Background(), client.Config{Map: regionmap.Static{M: m}, Transport: "shm", RetryWindow: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	region := map[string]string{"region": "1"}
	put := map[string]string{"region": "1", "kind": "put"}
	get := map[string]string{"region": "1", "kind": "get"}
	notFound := map[string]string{"kind": "get", "status": "not_found"}
	before := scrape(t, p)
	const n, gets = 150, 40 // L0 holds 64 pairs: compactions and a level
	for i := range n {
		if err := cl.Put(ctx, fmt.Appendf(nil, "k%05d", i), []byte("value")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range gets {
		if _, err := cl.Get(ctx, fmt.Appendf(nil, "k%05d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Get(ctx, []byte("missing")); err == nil {
		t.Fatal("a missing key was found")
	}
	er := p.state.Load().hosted(1)
	if err := er.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	if err := p.streamOf(1).shipper.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	after := scrape(t, p)

	delta := func(name string, labels map[string]string) float64 {
		old, _ := sample(before, name, labels)
		return mustSample(t, after, name, labels) - old
	}
	if d := delta("tebis_region_ops_total", put); d != n {
		t.Errorf("ops_total{kind=put} moved by %v after %d puts", d, n)
	}
	if d := delta("tebis_region_op_duration_seconds", put); d != n {
		t.Errorf("op_duration_seconds{kind=put} counted %v after %d puts", d, n)
	}
	if d := delta("tebis_region_ops_total", get); d != gets+1 {
		t.Errorf("ops_total{kind=get} moved by %v after %d gets", d, gets+1)
	}
	if d := delta("tebis_request_errors_total", notFound); d != 1 {
		t.Errorf("errors_total{kind=get,status=not_found} moved by %v after one missing key", d)
	}
	if d := delta("tebis_request_errors_total", map[string]string{"kind": "put", "status": "internal"}); d != 0 {
		t.Errorf("put internal errors moved by %v", d)
	}

	rs := er.Stats()
	if len(rs.Levels) == 0 {
		t.Fatalf("no level after %d puts into an L0 of 64: %+v", n, rs)
	}
	if v := mustSample(t, after, "tebis_region_l0_pairs", region); v != float64(rs.L0Pairs) {
		t.Errorf("l0_pairs %v, the region's L0 holds %d", v, rs.L0Pairs)
	}
	if v := mustSample(t, after, "tebis_region_l0_fill_ratio", region); v != rs.L0Fill || v != float64(rs.L0Pairs)/64 {
		t.Errorf("l0_fill_ratio %v, the region's L0 is %d of 64 pairs", v, rs.L0Pairs)
	}
	if total := mustSample(t, after, "tebis_region_l0_pairs", region) + sum(after, "tebis_region_level_pairs", region); total != n {
		t.Errorf("L0 and the levels hold %v pairs, %d were put", total, n)
	}
	for _, l := range rs.Levels {
		lv := map[string]string{"region": "1", "level": fmt.Sprint(l.Level)}
		if v := mustSample(t, after, "tebis_region_level_segments", lv); v != float64(l.Segments) {
			t.Errorf("L%d segments %v, the level has %d", l.Level, v, l.Segments)
		}
		if v := mustSample(t, after, "tebis_region_level_bytes", lv); v != float64(l.KVBytes) {
			t.Errorf("L%d bytes %v, the level has %d", l.Level, v, l.KVBytes)
		}
	}
	if v := mustSample(t, after, "tebis_region_role", map[string]string{"region": "1", "role": "primary"}); v != 1 {
		t.Errorf("role primary %v", v)
	}

	pb := map[string]string{"region": "1", "backup": "b"}
	if v := mustSample(t, after, "tebis_replication_backup_up", pb); v != 1 {
		t.Errorf("backup b up %v", v)
	}
	for _, name := range []string{"tebis_replication_lag_bytes", "tebis_replication_flushes_pending", "tebis_replication_commands_pending"} {
		if v := mustSample(t, after, name, pb); v != 0 {
			t.Errorf("%s %v with the stream idle", name, v)
		}
	}
	shipped := mustSample(t, after, "tebis_replication_index_segments_shipped_total", pb)
	if built := delta("tebis_index_segments_built_total", nil); shipped != built || shipped == 0 {
		t.Errorf("%v index segments shipped to b, %v built", shipped, built)
	}
	if v := delta("tebis_compactions_total", nil); v == 0 {
		t.Error("no compaction counted")
	}
	if v := mustSample(t, after, "tebis_ring_requests_total", map[string]string{"listener": "shm"}); v < n+gets+1 {
		t.Errorf("the shm ring handed %v requests to handlers, at least %d were sent", v, n+gets+1)
	}

	bm := scrape(t, b)
	if v := mustSample(t, bm, "tebis_region_role", map[string]string{"region": "1", "role": "backup"}); v != 1 {
		t.Errorf("b's role backup %v", v)
	}
	if v := mustSample(t, bm, "tebis_backup_copy_complete", region); v != 1 {
		t.Errorf("b's copy complete %v", v)
	}
	if v := mustSample(t, bm, "tebis_backup_index_segments_rewritten_total", region); v != shipped {
		t.Errorf("b rewrote %v index segments, p shipped %v", v, shipped)
	}
	if v := mustSample(t, bm, "tebis_region_level_pairs", map[string]string{"region": "1", "level": "1"}); v != mustSample(t, after, "tebis_region_level_pairs", map[string]string{"region": "1", "level": "1"}) {
		t.Errorf("b's L1 holds %v pairs, p's another number", v)
	}
}

// TestMetricsLint: the server's collectors pass the Prometheus linter
// (names, units, suffixes, help), with every kind of series present.
func TestMetricsLint(t *testing.T) {
	dir := t.TempDir()
	start := staticServersWith(t, dir, pairMap(dir), 5*time.Second, nil, nil)
	start("b")
	p := start("p")
	p.reqMetrics.observe(opPut, 1, true, wire.StatusStorage, time.Millisecond)
	for name, c := range map[string]interface {
		Describe(chan<- *prometheus.Desc)
		Collect(chan<- prometheus.Metric)
	}{"server": serverCollector{p}, "requests": p.reqMetrics} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, pr := range problems {
			t.Errorf("%s: %s: %s", name, pr.Metric, pr.Text)
		}
	}
	if n := testutil.CollectAndCount(serverCollector{p}, "tebis_replication_lag_bytes"); n != 1 {
		t.Fatalf("%d lag series linted, want the backup's", n)
	}
}

// TestRequestMetricsPerRegionOnlyForHosted: a request naming a region
// the server does not host counts by status only: no series for it.
func TestRequestMetricsPerRegionOnlyForHosted(t *testing.T) {
	m := newRequestMetrics()
	m.observe(opGet, 1, true, wire.StatusNotFound, time.Millisecond)
	m.observe(opGet, 99, false, wire.StatusWrongRegion, time.Millisecond)
	m.observe(opPut, 1, true, 12345, time.Millisecond)
	if n := testutil.CollectAndCount(m, opsTotalName); n != int(opStats) { // region 1's, every kind but stats
		t.Fatalf("%d ops series, want region 1's %d", n, opStats)
	}
	for _, c := range []struct {
		kind, status string
		want         float64
	}{{"get", "not_found", 1}, {"get", "wrong_region", 1}, {"put", "other", 1}, {"put", "not_found", 0}} {
		if v := testutil.ToFloat64(m.errs.WithLabelValues(c.kind, c.status)); v != c.want {
			t.Errorf("errors{kind=%s,status=%s} = %v, want %v", c.kind, c.status, v, c.want)
		}
	}
	if v := testutil.ToFloat64(m.ops.WithLabelValues("1", "get")); v != 1 {
		t.Errorf("region 1 gets %v", v)
	}
}

// BenchmarkRequestMetricsObserve: what the metrics add to a request of a
// hosted region (its series resolved).
func BenchmarkRequestMetricsObserve(b *testing.B) {
	m := newRequestMetrics()
	m.observe(opPut, 1, true, 0, time.Microsecond)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.observe(opPut, 1, true, 0, time.Microsecond)
		}
	})
}

// TestArrivedStartsLatency: a request's latency starts when the ring's
// spinner took it off its ring (ServerRequest.Arrived), so a wait for a
// worker counts; a request made outside a server starts now.
func TestArrivedStartsLatency(t *testing.T) {
	req := ring.NewShortRequest(ring.Header{}, nil, nil)
	before := time.Now()
	if got := arrived(req); got.Before(before) || time.Since(got) > time.Second {
		t.Fatalf("outside a server: arrived %v, want now (%v)", got, before)
	}
	req.Arrived = before.Add(-time.Hour)
	if got := arrived(req); !got.Equal(req.Arrived) {
		t.Fatalf("arrived %v, want the request's Arrived %v", got, req.Arrived)
	}
}

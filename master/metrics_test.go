package master

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/coord/coordtest"
)

// TestRegionState: a dead or missing primary first, then joining, then
// a dead backup or a group short of Replicas.
func TestRegionState(t *testing.T) {
	all := live("a", "b", "c")
	for _, c := range []struct {
		name     string
		replicas int
		r        regionmap.Assignment
		live     map[string]regionmap.Server
		want     string
	}{
		{"full group", 3, regionmap.Assignment{Primary: "a", Backups: []string{"b", "c"}}, all, regionServing},
		{"no replicas asked", 0, regionmap.Assignment{Primary: "a"}, all, regionServing},
		{"primary dead", 3, regionmap.Assignment{Primary: "a", Backups: []string{"b", "c"}}, live("b", "c"), regionWithoutPrimary},
		{"no primary", 3, regionmap.Assignment{Backups: []string{"b", "c"}}, all, regionWithoutPrimary},
		{"primary dead and joining", 3, regionmap.Assignment{Primary: "a", Backups: []string{"b"}, Joining: []string{"c"}}, live("b", "c"), regionWithoutPrimary},
		{"joining", 3, regionmap.Assignment{Primary: "a", Backups: []string{"b"}, Joining: []string{"c"}}, all, regionJoining},
		{"backup dead", 3, regionmap.Assignment{Primary: "a", Backups: []string{"b", "c"}}, live("a", "b"), regionDegraded},
		{"short of replicas", 3, regionmap.Assignment{Primary: "a", Backups: []string{"b"}}, all, regionDegraded},
	} {
		m := &regionmap.Map{Replicas: c.replicas, Regions: []regionmap.Assignment{c.r}}
		if got := regionState(m, &m.Regions[0], c.live); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		counts := regionCounts(m, c.live)
		if len(counts) != len(regionStates) || counts[c.want] != 1 {
			t.Errorf("%s: counts %v", c.name, counts)
		}
	}
}

// fakeSession is a sessionState.
type fakeSession struct {
	*coordtest.Coordinator
	connected bool
	gen       uint64
}

func (f fakeSession) Connected() bool    { return f.connected }
func (f fakeSession) Generation() uint64 { return f.gen }

// TestMasterMetricsLint: the master's metrics pass the Prometheus linter,
// every series present; registering twice on one registerer gives the
// first metrics back.
func TestMasterMetricsLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	mm, err := registerMetrics(reg, fakeSession{coordtest.New(nil, nil), true, 3})
	if err != nil {
		t.Fatal(err)
	}
	m := threeWay(t)
	mm.decided(m, live(all4...))
	mm.published(m, View{Live: live(all4...)}, nil)
	mm.failoverDur.Observe(1)
	problems, err := testutil.CollectAndLint(mm)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	if n := testutil.CollectAndCount(mm, zkConnectedName, zkExpiriesName); n != 2 {
		t.Errorf("%d ZooKeeper series, want 2", n)
	}
	again, err := registerMetrics(reg, coordtest.New(nil, nil))
	if err != nil || again != mm {
		t.Fatalf("registered again: %p %v, want the first metrics %p", again, err, mm)
	}
	if n := testutil.CollectAndCount(mm, zkConnectedName); n != 0 {
		t.Errorf("ZooKeeper series for a coordinator without a session")
	}
}

// TestRunMetrics: a leading master counts its decisions and maps; a dead
// primary shows its region without one, then its failover is counted
// with the time from its registration's end to the promotion's map.
func TestRunMetrics(t *testing.T) {
	m := threeWay(t)
	f := newFake(m, all4...)
	reg := prometheus.NewRegistry()
	clk := &clock{t: t0}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Name: "m", Coord: f, Grace: time.Hour, Recheck: 2 * time.Millisecond,
			Log: zaptest.NewLogger(t), Now: clk.Now, Metrics: reg})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	}()
	wait(t, "leading", leading(f, 1)) // Run registered its metrics before campaigning
	mm := func() *masterMetrics {
		var are prometheus.AlreadyRegisteredError
		err := reg.Register(newMasterMetrics())
		if !errors.As(err, &are) {
			t.Fatalf("the master's metrics are not registered: %v", err)
		}
		return are.ExistingCollector.(*masterMetrics)
	}()
	settle(t, f)
	settle(t, f)
	if v := testutil.ToFloat64(mm.leader); v != 1 {
		t.Fatalf("leader %v while leading", v)
	}
	if v := testutil.ToFloat64(mm.regions.WithLabelValues(regionServing)); v != float64(len(m.Regions)) {
		t.Fatalf("%v regions serving, the map has %d, all live", v, len(m.Regions))
	}
	if testutil.ToFloat64(mm.decisions) < 2 || testutil.ToFloat64(mm.publications) != 0 {
		t.Fatalf("%v decisions, %v publications on a healthy cluster", testutil.ToFloat64(mm.decisions), testutil.ToFloat64(mm.publications))
	}

	r := m.Regions[0]
	f.RemoveServer(r.Primary) // seen gone at t0
	settle(t, f)
	if v := testutil.ToFloat64(mm.regions.WithLabelValues(regionWithoutPrimary)); v != 1 {
		t.Fatalf("%v regions without a primary after %s died", v, r.Primary)
	}
	clk.Advance(700 * time.Millisecond)
	for i, b := range r.Backups {
		f.AddReport(coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: b, Pos: uint64(len(r.Backups)-i) << 32, Complete: true})
	}
	wait(t, "the promotion", func() bool { got, _ := f.Map(); return got.Region(r.ID).Primary != r.Primary })
	settle(t, f)
	_, ver := f.Map()
	if v := testutil.ToFloat64(mm.failovers); v != 1 {
		t.Fatalf("%v failovers counted, one happened", v)
	}
	if v := testutil.ToFloat64(mm.publications); v != float64(ver) {
		t.Fatalf("%v publications, the map's znode is at version %d", v, ver)
	}
	if n := testutil.CollectAndCount(mm.failoverDur); n != 1 {
		t.Fatal("no failover duration")
	}
	var h dto.Metric
	if err := mm.failoverDur.Write(&h); err != nil {
		t.Fatal(err)
	}
	if c, s := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); c != 1 || s != 0.7 {
		t.Fatalf("failover durations: %d summing %v s, want one of 0.7 s", c, s)
	}
	if v := testutil.ToFloat64(mm.regions.WithLabelValues(regionWithoutPrimary)); v != 0 {
		t.Fatalf("%v regions without a primary after the promotion", v)
	}
}

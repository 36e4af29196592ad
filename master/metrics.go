package master

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/metrics"
)

// The states a region is counted in by tebis_master_regions (regionState).
const (
	regionServing        = "serving"
	regionWithoutPrimary = "without_primary"
	regionJoining        = "joining"
	regionDegraded       = "degraded"
)

var regionStates = []string{regionServing, regionWithoutPrimary, regionJoining, regionDegraded}

// regionState is the state a region of m is counted in, given the live
// servers: without_primary when its primary is not live (or none is
// named); else joining while a backup joins (is being seeded); else
// degraded when a backup of its group is not live or the group is
// short of the map's Replicas; else serving.
func regionState(m *regionmap.Map, r *regionmap.Assignment, live map[string]regionmap.Server) string {
	if _, ok := live[r.Primary]; r.Primary == "" || !ok {
		return regionWithoutPrimary
	}
	if len(r.Joining) > 0 {
		return regionJoining
	}
	if m.Replicas > 0 && 1+len(r.Backups) < m.Replicas {
		return regionDegraded
	}
	for _, b := range r.Backups {
		if _, ok := live[b]; !ok {
			return regionDegraded
		}
	}
	return regionServing
}

// regionCounts counts m's regions by regionState, every state present.
func regionCounts(m *regionmap.Map, live map[string]regionmap.Server) map[string]int {
	out := map[string]int{}
	for _, s := range regionStates {
		out[s] = 0
	}
	for i := range m.Regions {
		out[regionState(m, &m.Regions[i], live)]++
	}
	return out
}

// The master's metric names.
const (
	regionsName      = "tebis_master_regions"
	failoversName    = "tebis_master_failovers_total"
	movesName        = "tebis_master_primary_moves_total"
	failoverDurName  = "tebis_master_failover_duration_seconds"
	decisionsName    = "tebis_master_decisions_total"
	publicationsName = "tebis_master_map_publications_total"
	mapVersionName   = "tebis_master_map_version"
	leaderName       = "tebis_master_leader"
	zkConnectedName  = "tebis_master_zookeeper_connected"
	zkExpiriesName   = "tebis_master_zookeeper_session_expiries_total"
	zkConnectedHelp  = "1 while the master's ZooKeeper session is connected."
	zkExpiriesHelp   = "Expiries of the master's ZooKeeper session."
)

// MetricNames are the names of the series the master's metrics
// (Config.Metrics) export.
func MetricNames() []string {
	out := []string{regionsName, failoversName, movesName, decisionsName, publicationsName, mapVersionName, leaderName, zkConnectedName, zkExpiriesName}
	return append(out, metrics.SeriesNames(failoverDurName)...)
}

// sessionState is what a Coordinator over a ZooKeeper session tells of
// it (ZK's does: *coord.Session).
type sessionState interface {
	Connected() bool
	Generation() uint64
}

// masterMetrics are the master's Prometheus metrics: one prometheus.Collector.
type masterMetrics struct {
	regions      *prometheus.GaugeVec
	failovers    prometheus.Counter
	moves        prometheus.Counter
	failoverDur  prometheus.Histogram
	decisions    prometheus.Counter
	publications prometheus.Counter
	mapVersion   prometheus.Gauge
	leader       prometheus.Gauge
	zkConnected  metrics.Desc
	zkExpiries   metrics.Desc
	session      atomic.Pointer[sessionState] // nil: not a ZooKeeper session
}

func newMasterMetrics() *masterMetrics {
	return &masterMetrics{
		regions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: regionsName,
			Help: "Regions of the map by state (serving, without_primary, joining, degraded), as the leader sees them; 0 on a master not leading."}, []string{"state"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: failoversName,
			Help: "Regions whose failed primary a published map replaced."}),
		moves: prometheus.NewCounter(prometheus.CounterOpts{Name: movesName,
			Help: "Regions whose live primary a published map moved to a backup (an operator's move, a drain, the balancer)."}),
		failoverDur: prometheus.NewHistogram(prometheus.HistogramOpts{Name: failoverDurName,
			Help:    "Time from the master seeing a primary's registration end to publishing its region's promotion.",
			Buckets: metrics.DurationBuckets}),
		decisions: prometheus.NewCounter(prometheus.CounterOpts{Name: decisionsName,
			Help: "Decisions the leader made (the failover policy run on what it observed)."}),
		publications: prometheus.NewCounter(prometheus.CounterOpts{Name: publicationsName,
			Help: "Region maps the leader published."}),
		mapVersion: prometheus.NewGauge(prometheus.GaugeOpts{Name: mapVersionName,
			Help: "Version of the region map the master last read or published."}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Name: leaderName,
			Help: "1 while this master leads."}),
		zkConnected: metrics.NewDesc(zkConnectedName, zkConnectedHelp),
		zkExpiries:  metrics.NewDesc(zkExpiriesName, zkExpiriesHelp),
	}
}

func (m *masterMetrics) parts() []prometheus.Collector {
	return []prometheus.Collector{m.regions, m.failovers, m.moves, m.failoverDur, m.decisions, m.publications, m.mapVersion, m.leader}
}

func (m *masterMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range m.parts() {
		c.Describe(ch)
	}
	ch <- m.zkConnected.Desc
	ch <- m.zkExpiries.Desc
}

func (m *masterMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, c := range m.parts() {
		c.Collect(ch)
	}
	if p := m.session.Load(); p != nil {
		s := *p
		connected := 0.0
		if s.Connected() {
			connected = 1
		}
		ch <- prometheus.MustNewConstMetric(m.zkConnected.Desc, prometheus.GaugeValue, connected)
		ch <- prometheus.MustNewConstMetric(m.zkExpiries.Desc, prometheus.CounterValue, float64(s.Generation()))
	}
}

// registerMetrics makes the master's metrics, registered on reg (nil:
// none). A registerer that holds them already (an earlier Run's) gives
// those back: their counters go on.
func registerMetrics(reg prometheus.Registerer, c Coordinator) (*masterMetrics, error) {
	m := newMasterMetrics()
	if reg != nil {
		if err := reg.Register(m); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, err
			}
			old, ok := are.ExistingCollector.(*masterMetrics)
			if !ok {
				return nil, err
			}
			m = old
		}
	}
	if s, ok := c.(sessionState); ok {
		m.session.Store(&s)
	} else {
		m.session.Store(nil)
	}
	return m, nil
}

// decided records a decision on map m (the one read) given the live
// servers.
func (m *masterMetrics) decided(cur *regionmap.Map, live map[string]regionmap.Server) {
	m.decisions.Inc()
	m.mapVersion.Set(float64(cur.Version))
	for s, n := range regionCounts(cur, live) {
		m.regions.WithLabelValues(s).Set(float64(n))
	}
}

// published records the publication of next, which made the failovers
// and moves fos (failovers).
func (m *masterMetrics) published(next *regionmap.Map, v View, fos []Failover) {
	m.publications.Inc()
	m.mapVersion.Set(float64(next.Version))
	for s, n := range regionCounts(next, v.Live) {
		m.regions.WithLabelValues(s).Set(float64(n))
	}
	for _, f := range fos {
		switch {
		case f.Moved:
			m.moves.Inc()
		default:
			m.failovers.Inc()
			if !f.Gone.IsZero() {
				m.failoverDur.Observe(f.At.Sub(f.Gone).Seconds())
			}
		}
	}
}

// leading records whether this master leads; a master not leading
// reports no region counts (the leader's are the cluster's).
func (m *masterMetrics) leading(on bool) {
	if on {
		m.leader.Set(1)
		return
	}
	m.leader.Set(0)
	for _, s := range regionStates {
		m.regions.WithLabelValues(s).Set(0)
	}
}

package region

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tebis-go/tebis/internal/metrics"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// opKind is a client request's kind, as the request metrics label it.
type opKind uint8

const (
	opPut opKind = iota
	opGet
	opDelete
	opScan
	opMultiGet
	// opStats comes after every kind of a region's request: a stats
	// request is the server's.
	opStats
	numOpKinds
)

var opKindNames = [numOpKinds]string{"put", "get", "delete", "scan", "multiget", "stats"}

func (k opKind) String() string { return opKindNames[k] }

// statusNames are the reply statuses the error counter is labelled by;
// any other status counts as "other".
var statusNames = map[uint16]string{
	ring.StatusTooSmall:    "too_small",
	ring.StatusUnknownType: "unknown_type",
	wire.StatusNotFound:    "not_found",
	wire.StatusWrongRegion: "wrong_region",
	wire.StatusBadRequest:  "bad_request",
	wire.StatusTooLarge:    "too_large",
	wire.StatusUnavailable: "unavailable",
	wire.StatusInternal:    "internal",
	wire.StatusStaleEpoch:  "stale_epoch",
	wire.StatusStorage:     "storage",
}

// statusName is how the error counter labels a reply status.
func statusName(status uint16) string {
	if status == ring.StatusOK {
		return "ok"
	}
	if n, ok := statusNames[status]; ok {
		return n
	}
	return "other"
}

// requestMetrics are the request path's metrics: per region and kind,
// the requests and their latency; per kind and status, the replies that
// were not OK. Every series a request touches is resolved ahead of it
// (the error counters at start, a region's at its first request), so a
// request costs an atomic load, a map read and the observations: no lock.
type requestMetrics struct {
	ops     *prometheus.CounterVec
	latency *prometheus.HistogramVec
	errs    *prometheus.CounterVec
	// errors by kind, then by statusName ("other" last)
	byStatus [numOpKinds]map[uint16]prometheus.Counter
	other    [numOpKinds]prometheus.Counter

	mu      sync.Mutex // serializes additions to regions
	regions atomic.Pointer[map[uint64]*regionOps]
}

// regionOps is one region's resolved series, by kind (opStats: none).
type regionOps struct {
	ops     [numOpKinds]prometheus.Counter
	latency [numOpKinds]prometheus.Observer
}

// The request path's metric names.
const (
	opsTotalName      = "tebis_region_ops_total"
	opDurationName    = "tebis_region_op_duration_seconds"
	requestErrorsName = "tebis_request_errors_total"
)

func newRequestMetrics() *requestMetrics {
	m := &requestMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: opsTotalName,
			Help: "Client requests for a region this server hosts as primary, by kind, whatever their reply.",
		}, []string{"region", "kind"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    opDurationName,
			Help:    "Time to serve a client request for a region this server hosts as primary, by kind, from when the server took it off its ring (a wait for a worker and replication included).",
			Buckets: metrics.LatencyBuckets,
		}, []string{"region", "kind"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: requestErrorsName,
			Help: "Client requests answered with a status other than OK, by kind and status (not_found is an answer, not a failure).",
		}, []string{"kind", "status"}),
	}
	for k := range numOpKinds {
		m.byStatus[k] = map[uint16]prometheus.Counter{}
		for st, name := range statusNames {
			m.byStatus[k][st] = m.errs.WithLabelValues(k.String(), name)
		}
		m.other[k] = m.errs.WithLabelValues(k.String(), "other")
	}
	m.regions.Store(&map[uint64]*regionOps{})
	return m
}

func (m *requestMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.ops.Describe(ch)
	m.latency.Describe(ch)
	m.errs.Describe(ch)
}

func (m *requestMetrics) Collect(ch chan<- prometheus.Metric) {
	m.ops.Collect(ch)
	m.latency.Collect(ch)
	m.errs.Collect(ch)
}

// region returns region id's series, resolving them at its first request.
func (m *requestMetrics) region(id uint64) *regionOps {
	if r := (*m.regions.Load())[id]; r != nil {
		return r
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := *m.regions.Load()
	if r := cur[id]; r != nil {
		return r
	}
	r := &regionOps{}
	label := strconv.FormatUint(id, 10)
	for k := range opStats { // a stats request is the server's, no region's
		r.ops[k] = m.ops.WithLabelValues(label, k.String())
		r.latency[k] = m.latency.WithLabelValues(label, k.String())
	}
	next := make(map[uint64]*regionOps, len(cur)+1)
	for i, o := range cur {
		next[i] = o
	}
	next[id] = r
	m.regions.Store(&next)
	return r
}

// observe records one request's reply and latency. hosted says whether
// the request's region is one this server hosts as primary: only those
// are counted per region, so that a client naming regions at random
// creates no series.
func (m *requestMetrics) observe(k opKind, region uint64, hosted bool, status uint16, d time.Duration) {
	if status != ring.StatusOK {
		c := m.byStatus[k][status]
		if c == nil {
			c = m.other[k]
		}
		c.Inc()
	}
	if hosted {
		r := m.region(region)
		r.ops[k].Inc()
		r.latency[k].Observe(d.Seconds())
	}
}

// measured wraps a client request handler with the request metrics.
// measuredShort is measured for a ring.ShortFunc: what it declines is
// measured by the handler that then serves it.
func (s *Server) measuredShort(k opKind, h ring.ShortFunc) ring.ShortFunc {
	return func(req *ring.ServerRequest) (ring.Reply, bool) {
		start := arrived(req)
		rep, ok := h(req)
		if !ok || req.TookLater() {
			return rep, ok // declined: measured by the handler that serves it; later: by h
		}
		s.observe(k, req.Region, rep.Status, time.Since(start))
		return rep, true
	}
}

// arrived is when req's latency starts: when the ring's spinner took it
// off its ring (ring.ServerRequest.Arrived, a clock reading it shares with
// the requests of its poll round), or now for a request made outside a
// server.
func arrived(req *ring.ServerRequest) time.Time {
	if !req.Arrived.IsZero() {
		return req.Arrived
	}
	return time.Now()
}

// observe records one client request's outcome and latency.
func (s *Server) observe(k opKind, region uint64, status uint16, d time.Duration) {
	hosted := false
	if st := s.state.Load(); st != nil && k != opStats {
		hosted = st.routes[region].how != 0
	}
	s.reqMetrics.observe(k, region, hosted, status, d)
}

func (s *Server) measured(k opKind, h ring.HandlerFunc) ring.HandlerFunc {
	return func(req *ring.ServerRequest) ring.Reply {
		start := arrived(req)
		rep := h(req)
		s.observe(k, req.Region, rep.Status, time.Since(start))
		return rep
	}
}

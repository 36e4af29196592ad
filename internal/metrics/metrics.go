// Package metrics is what the region server and the master share to
// export Prometheus metrics: a registry of their own (never the global
// default one: a process may run several servers, as the tests do) with
// the Go runtime and process collectors, its HTTP handler, and the
// buckets their latency histograms use.
package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns an empty registry with the Go runtime's and the
// process's collectors registered.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// Handler serves g's metrics in the Prometheus exposition formats. A
// collector that fails does not keep the others' metrics from being
// served.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// LatencyBuckets are the upper bounds, in seconds, of request latency
// histograms: 10 µs to about 5 s, each three times the one before.
var LatencyBuckets = prometheus.ExponentialBuckets(10e-6, 3, 13)

// DurationBuckets are the upper bounds, in seconds, of histograms of
// operations measured in seconds (a failover): 50 ms to about 7 min.
var DurationBuckets = prometheus.ExponentialBuckets(0.05, 2, 14)

// Desc is a metric's description with its name kept (prometheus.Desc
// does not give it back): the names a component exports can be listed.
type Desc struct {
	Name string
	*prometheus.Desc
}

// NewDesc describes a metric without constant labels.
func NewDesc(name, help string, labels ...string) Desc {
	return Desc{Name: name, Desc: prometheus.NewDesc(name, help, labels, nil)}
}

// SeriesNames are the names a histogram called name exposes.
func SeriesNames(name string) []string {
	return []string{name + "_bucket", name + "_sum", name + "_count"}
}

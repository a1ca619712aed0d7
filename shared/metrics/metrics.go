// Package metrics is each daemon's Prometheus registry, built on client_golang: one
// *prometheus.Registry per daemon (never the global default one), with the Go runtime and
// process collectors, the HTTP request histogram shared by every daemon, and the /metrics
// handler.
//
// # Naming
//
// Every name starts with oikos_. A metric only one daemon has is oikos_<daemon>_<what>_<unit>
// (oikos_scheduler_execution_duration_seconds); one that every daemon exports with the same
// meaning has no daemon part (oikos_http_request_duration_seconds) — the scrape's job label
// tells the daemons apart. Units are base units (seconds, bytes); counters end in _total.
// Durations are histograms, so Prometheus can compute quantiles over any window and across
// daemons; a histogram's _count is the matching outcome counter (no separate _total). Label
// values come from a small fixed set (a route pattern, an action name, an outcome), never
// from a request's raw path or an entity's name, so a scrape cannot grow without bound.
// The README's Metrics section lists every metric.
//
// # Registering a part's metrics
//
// A part that has metrics takes a prometheus.Registerer in its Options (or Deps), builds its
// collectors in its constructor and registers each with Register, which accepts a nil
// Registerer (the part then records into collectors nobody scrapes: tests, tools):
//
//	type Options struct {
//		// Metrics receives the part's metrics; nil keeps them unregistered.
//		Metrics prometheus.Registerer
//	}
//
//	func New(opts Options) *Part {
//		return &Part{runs: metrics.Register(opts.Metrics, prometheus.NewHistogramVec(prometheus.HistogramOpts{
//			Name:    "oikos_scheduler_part_run_duration_seconds",
//			Help:    "Runs of the part by outcome.",
//			Buckets: metrics.FastBuckets(),
//		}, []string{"outcome"}))}
//	}
//
// The composition root (each daemon's app package) passes the daemon's registry,
// daemon.Health.Metrics, which is a prometheus.Registerer, and mounts Handler at /metrics.
// HTTP servers record requests with EchoMiddleware (echo) or InstrumentHandler (net/http).
package metrics

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Registry is one daemon's metrics. It is a *prometheus.Registry (so a
// prometheus.Registerer and a prometheus.Gatherer) holding, from the start, the Go runtime
// collector (go_*), the process collector (process_*), go_build_info and the HTTP request
// histogram.
type Registry struct {
	*prometheus.Registry
	http httpMetrics
}

// NewRegistry returns a daemon's registry. Each call builds a new one: nothing is
// registered with client_golang's global default registry.
func NewRegistry() *Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
	)
	r := &Registry{Registry: reg}
	r.http = newHTTPMetrics(reg)
	return r
}

// Handler serves the registry in the Prometheus exposition format (mount it at GET
// /metrics), negotiating the format and compression with the scraper. A collector that fails
// leaves its metrics out of the scrape; the rest is served.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Register registers c with reg and returns the collector to record into: c, or the equal
// collector (same name, help, labels and type) registered before, so one part built twice
// against a daemon's registry shares its series instead of failing. A nil reg leaves c
// unregistered. Any other error — the name taken with other labels or help — panics, as
// prometheus.MustRegister does: it is a wiring mistake the first test building the part
// finds.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if r, ok := reg.(*Registry); ok && r == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(fmt.Sprintf("metrics: register: %v", err))
	}
	return c
}

// Value reads one series of the registry as a scrape would see it: a counter's or gauge's
// value, a histogram's or summary's count; 0 when there is no such series. labels are
// name, value pairs and must name every label of the series. It is for tests (and tools)
// that look at a daemon's registry from outside; parts record into their own collectors
// and keep what they report about themselves (a /status) in their own state.
func (r *Registry) Value(name string, labels ...string) float64 {
	fams, _ := r.Gather()
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			case m.GetSummary() != nil:
				return float64(m.GetSummary().GetSampleCount())
			case m.GetUntyped() != nil:
				return m.GetUntyped().GetValue()
			}
		}
	}
	return 0
}

// FastBuckets are histogram buckets (seconds) for work that takes milliseconds: HTTP
// requests, checks. 0.5 ms to 30 s.
func FastBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
}

// SlowBuckets are histogram buckets (seconds) for work that takes seconds to minutes:
// executions of commands on machines. 50 ms to 1 h.
func SlowBuckets() []float64 {
	return []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}
}

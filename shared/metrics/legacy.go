package metrics

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// This file is the name-keyed API of the hand-written registry the package used to be
// (Add, Set, GaugeFunc, Value, WriteTo), kept on top of client_golang only for the packages
// not migrated yet: the check runner (scheduler/internal/checkrun, results) and the api's SSE
// hub (api/internal/httpapi). Each name becomes a CounterVec, GaugeVec or GaugeFunc in the
// daemon's registry on its first use, labelled with the label names of that first call. New
// code registers its collectors with Register instead.

type legacy struct {
	mu     sync.Mutex
	byName map[string]*legacyMetric
}

type legacyMetric struct {
	labels  []string
	counter *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
	fn      *atomic.Pointer[func() float64] // a GaugeFunc's function, replaceable
	// solo holds only this metric, so Value gathers it alone.
	solo *prometheus.Registry
}

const (
	kindCounter = iota
	kindGauge
	kindFunc
)

// get returns the metric called name, creating and registering it on first use; nil when
// name was first used as another kind or with other label names.
func (r *Registry) get(name, help string, kind int, labels []string) *legacyMetric {
	r.legacy.mu.Lock()
	defer r.legacy.mu.Unlock()
	if m, ok := r.legacy.byName[name]; ok {
		if m.kind() != kind || !slices.Equal(m.labels, labels) {
			return nil
		}
		return m
	}
	m := &legacyMetric{labels: slices.Clone(labels), solo: prometheus.NewRegistry()}
	var c prometheus.Collector
	switch kind {
	case kindCounter:
		m.counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, m.labels)
		c = m.counter
	case kindGauge:
		m.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, m.labels)
		c = m.gauge
	default:
		m.fn = &atomic.Pointer[func() float64]{}
		c = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 {
			if f := m.fn.Load(); f != nil {
				return (*f)()
			}
			return 0
		})
	}
	if err := m.solo.Register(c); err != nil {
		return nil // not a valid metric
	}
	// A name a migrated part registered already (with Register) keeps that part's metric;
	// this one still counts, for Value, but is not exported.
	_ = r.Registry.Register(c)
	if r.legacy.byName == nil {
		r.legacy.byName = map[string]*legacyMetric{}
	}
	r.legacy.byName[name] = m
	return m
}

func (m *legacyMetric) kind() int {
	switch {
	case m.counter != nil:
		return kindCounter
	case m.gauge != nil:
		return kindGauge
	}
	return kindFunc
}

// split turns alternating name, value pairs into names and values (an odd last one is
// dropped).
func split(kv []string) (names, values []string) {
	n := len(kv) / 2
	names, values = make([]string, n), make([]string, n)
	for i := range n {
		names[i], values[i] = kv[2*i], kv[2*i+1]
	}
	return names, values
}

// Add increments counter name (with label pairs) by v; a negative v is ignored.
//
// Deprecated: register a prometheus.Counter or CounterVec with Register.
func (r *Registry) Add(name, help string, v float64, labels ...string) {
	names, values := split(labels)
	if m := r.get(name, help, kindCounter, names); m != nil && v >= 0 {
		m.counter.WithLabelValues(values...).Add(v)
	}
}

// Set sets gauge name (with label pairs) to v.
//
// Deprecated: register a prometheus.Gauge or GaugeVec with Register.
func (r *Registry) Set(name, help string, v float64, labels ...string) {
	names, values := split(labels)
	if m := r.get(name, help, kindGauge, names); m != nil {
		m.gauge.WithLabelValues(values...).Set(v)
	}
}

// GaugeFunc registers a gauge read at scrape time; a second call for the same name replaces
// the function.
//
// Deprecated: register a prometheus.NewGaugeFunc with Register.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	if m := r.get(name, help, kindFunc, nil); m != nil {
		m.fn.Store(&fn)
	}
}

// Value returns the current value of a series: a counter's or gauge's value, a histogram's
// or summary's count; 0 when there is no such series. It works for every metric of the
// registry, the legacy ones fastest.
//
// Deprecated: tests read a part's own collectors (prometheus/testutil.ToFloat64).
func (r *Registry) Value(name string, labels ...string) float64 {
	g := prometheus.Gatherer(r.Registry)
	r.legacy.mu.Lock()
	if m, ok := r.legacy.byName[name]; ok {
		g = m.solo
	}
	r.legacy.mu.Unlock()
	fams, _ := g.Gather()
	names, values := split(labels)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			lp := s.GetLabel()
			if len(lp) != len(names) {
				continue
			}
			match := true
			for i, n := range names {
				found := false
				for _, p := range lp {
					if p.GetName() == n {
						found = p.GetValue() == values[i]
						break
					}
				}
				if !found {
					match = false
					break
				}
			}
			if !match {
				continue
			}
			switch {
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue()
			case s.GetHistogram() != nil:
				return float64(s.GetHistogram().GetSampleCount())
			case s.GetSummary() != nil:
				return float64(s.GetSummary().GetSampleCount())
			case s.GetUntyped() != nil:
				return s.GetUntyped().GetValue()
			}
		}
	}
	return 0
}

// WriteTo writes the whole registry in the text exposition format.
//
// Deprecated: serve Handler, or gather the registry.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	bw := &bufferWriter{h: http.Header{}}
	r.Handler().ServeHTTP(bw, &http.Request{Method: http.MethodGet, Header: http.Header{}})
	return bw.buf.WriteTo(w)
}

type bufferWriter struct {
	h   http.Header
	buf bytes.Buffer
}

func (b *bufferWriter) Header() http.Header         { return b.h }
func (b *bufferWriter) Write(p []byte) (int, error) { return b.buf.Write(p) }
func (b *bufferWriter) WriteHeader(int)             {}

// Package metrics is a small Prometheus text-format registry: counters, gauges and gauge
// functions, enough for each daemon's /metrics without pulling a client library into every
// module. Names follow Prometheus conventions (oikos_<daemon>_<what>_<unit>).
package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Registry holds a process's metrics.
type Registry struct {
	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	name, help, kind string
	series           map[string]*atomic.Uint64 // label string -> float64 bits
	fn               func() float64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{entries: map[string]*entry{}} }

func (r *Registry) get(name, help, kind string) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.entries[name]
	if !ok {
		e = &entry{name: name, help: help, kind: kind, series: map[string]*atomic.Uint64{}}
		r.entries[name] = e
	}
	return e
}

func (r *Registry) cell(e *entry, labels []string) *atomic.Uint64 {
	key := labelString(labels)
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := e.series[key]
	if !ok {
		c = &atomic.Uint64{}
		e.series[key] = c
	}
	return c
}

// labelString renders alternating name, value pairs as {a="b",...}.
func labelString(kv []string) string {
	if len(kv) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", kv[i], kv[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

// Add increments counter name (with label pairs) by v.
func (r *Registry) Add(name, help string, v float64, labels ...string) {
	c := r.cell(r.get(name, help, "counter"), labels)
	for {
		old := c.Load()
		if c.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

// Set sets gauge name (with label pairs) to v.
func (r *Registry) Set(name, help string, v float64, labels ...string) {
	r.cell(r.get(name, help, "gauge"), labels).Store(math.Float64bits(v))
}

// GaugeFunc registers a gauge read at scrape time.
func (r *Registry) GaugeFunc(name, help string, fn func() float64) {
	r.get(name, help, "gauge").fn = fn
}

// Value returns the current value of a series (for tests and health reports).
func (r *Registry) Value(name string, labels ...string) float64 {
	r.mu.Lock()
	e, ok := r.entries[name]
	r.mu.Unlock()
	if !ok {
		return 0
	}
	if e.fn != nil {
		return e.fn()
	}
	r.mu.Lock()
	c, ok := e.series[labelString(labels)]
	r.mu.Unlock()
	if !ok {
		return 0
	}
	return math.Float64frombits(c.Load())
}

// WriteTo writes the text exposition format.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	r.mu.Lock()
	names := make([]string, 0, len(r.entries))
	for n := range r.entries {
		names = append(names, n)
	}
	r.mu.Unlock()
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		r.mu.Lock()
		e := r.entries[n]
		keys := make([]string, 0, len(e.series))
		for k := range e.series {
			keys = append(keys, k)
		}
		r.mu.Unlock()
		sort.Strings(keys)
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", e.name, e.help, e.name, e.kind)
		if e.fn != nil {
			fmt.Fprintf(&b, "%s %g\n", e.name, e.fn())
			continue
		}
		for _, k := range keys {
			r.mu.Lock()
			c := e.series[k]
			r.mu.Unlock()
			fmt.Fprintf(&b, "%s%s %g\n", e.name, k, math.Float64frombits(c.Load()))
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// Handler serves the registry at /metrics.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = r.WriteTo(w)
	})
}

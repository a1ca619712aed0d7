package checkrun

import (
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

func (r *Runner) recordLag(d time.Duration) {
	v := max(d.Seconds(), 0)
	r.lagMu.Lock()
	if len(r.lags) < lagWindow {
		r.lags = append(r.lags, v)
	} else {
		r.lags[r.lagPos] = v
		r.lagPos = (r.lagPos + 1) % lagWindow
	}
	r.lagMu.Unlock()
}

// lagQuantiles returns the p50, p99 and max scheduling lag over the recent runs, in seconds.
func (r *Runner) lagQuantiles() (p50, p99, maxLag float64, n int) {
	r.lagMu.Lock()
	s := slices.Clone(r.lags)
	r.lagMu.Unlock()
	if len(s) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return q(0.50), q(0.99), s[len(s)-1], len(s)
}

// dueNow counts checks that are due and not yet started (waiting for a slot).
func (r *Runner) dueNow() int {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.queue {
		if !e.due.After(now) {
			n++
		}
	}
	return n
}

// Status is the runner's self-report (served as JSON by StatusHandler).
type Status struct {
	ChecksLoaded     int                `json:"checks_loaded"`
	ChecksRunning    int64              `json:"checks_running"`
	ChecksDue        int                `json:"checks_due"`
	Concurrency      int                `json:"concurrency"`
	RunsTotal        int64              `json:"runs_total"`
	OverrunsTotal    int64              `json:"overruns_total"`
	LagP50Seconds    float64            `json:"lag_p50_seconds"`
	LagP99Seconds    float64            `json:"lag_p99_seconds"`
	LagMaxSeconds    float64            `json:"lag_max_seconds"`
	LagSamples       int                `json:"lag_samples"`
	FailuresByReason map[string]float64 `json:"failures_by_reason"`
	SSHConnections   int                `json:"ssh_connections"`
	HTTPConnections  int                `json:"http_connections"`
	HTTPDials        int64              `json:"http_dials_total"`
	ResultsPending   int64              `json:"results_pending"`
	LastFlushAt      *time.Time         `json:"last_flush_at,omitempty"`
	LastFlushError   string             `json:"last_flush_error,omitempty"`
	LastReloadAt     *time.Time         `json:"last_reload_at,omitempty"`
	LastReloadError  string             `json:"last_reload_error,omitempty"`
}

// Status reports the runner's current state.
func (r *Runner) Status() Status {
	p50, p99, mx, n := r.lagQuantiles()
	s := Status{
		ChecksRunning:    r.running.Load(),
		ChecksDue:        r.dueNow(),
		Concurrency:      r.opts.Concurrency,
		RunsTotal:        r.runs.Load(),
		OverrunsTotal:    r.overruns.Load(),
		LagP50Seconds:    p50,
		LagP99Seconds:    p99,
		LagMaxSeconds:    mx,
		LagSamples:       n,
		FailuresByReason: r.m.failuresByReason(),
		SSHConnections:   r.ssh.OpenConnections(),
		ResultsPending:   r.writer.Pending(),
	}
	if r.httpc != nil {
		s.HTTPConnections, s.HTTPDials = r.httpc.OpenConnections(), r.httpc.Dials()
	}
	r.mu.Lock()
	s.ChecksLoaded = len(r.entries)
	if !r.loaded.IsZero() {
		t := r.loaded
		s.LastReloadAt = &t
	}
	if r.loadErr != nil {
		s.LastReloadError = r.loadErr.Error()
	}
	r.mu.Unlock()
	s.LastFlushAt, s.LastFlushError = r.writer.LastFlush()
	return s
}

// StatusHandler serves Status as JSON (scheduler/app mounts it at /status on the
// scheduler's health port).
func (r *Runner) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet && req.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		if strings.Contains(req.URL.RawQuery, "pretty") {
			enc.SetIndent("", "  ")
		}
		_ = enc.Encode(r.Status())
	})
}

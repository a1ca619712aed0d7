package incidents

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/results"
	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Kind is the signal kind of an incident; its dedup key is DedupPrefix + the root's id.
const (
	Kind        = signals.IncidentKind
	DedupPrefix = signals.IncidentDedupPrefix
)

// Event types (payload signals.IncidentEvent), appended with the signal's own events in the
// same transaction.
const (
	EventOpened   = signals.EventIncidentOpened
	EventUpdated  = signals.EventIncidentUpdated
	EventResolved = signals.EventIncidentResolved
)

// Defaults of Options.
const (
	DefaultEvery  = 5 * time.Second
	DefaultSettle = 100 * time.Millisecond
	DefaultMinGap = time.Second
)

// lockKey serialises evaluations across schedulers ("oikos" + 0x10, next to the sweeps').
const lockKey = 0x6f696b6f7310

// ErrBusy is returned by an evaluation another scheduler is running right now.
var ErrBusy = errors.New("incidents: another scheduler is evaluating")

// Options configure an Engine. Pool is required.
type Options struct {
	Pool       *storage.Pool
	Logger     zerolog.Logger
	Metrics    prometheus.Registerer
	Clock      func() time.Time
	Thresholds Thresholds
	// Every is the reconcile tick: what no results write announces (an entity put into
	// maintenance or destroyed) is seen within it. Default 5 s.
	Every time.Duration
	// Settle is how long an evaluation waits after a kick, so the writes of one burst of
	// results are evaluated once. Default 100 ms.
	Settle time.Duration
	// MinGap is the shortest time between the starts of two evaluations a kick asks for:
	// while something fails, every results write (each second) kicks, and an evaluation
	// reads every problem entity. Default 1 s.
	MinGap time.Duration
}

// Engine keeps the incidents matching the fleet's health. Start once; Stop is safe twice.
type Engine struct {
	opts Options
	log  zerolog.Logger
	sig  *signals.Store
	m    *engineMetrics
	kick chan struct{}
	life startstop.Lifecycle
}

// New builds an Engine.
func New(opts Options) (*Engine, error) {
	if opts.Pool == nil {
		return nil, errors.New("incidents: Pool is required")
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Every <= 0 {
		opts.Every = DefaultEvery
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.MinGap <= 0 {
		opts.MinGap = DefaultMinGap
	}
	opts.Thresholds = opts.Thresholds.withDefaults()
	return &Engine{opts: opts, log: opts.Logger.With().Str("component", "incidents").Logger(), sig: signals.New(opts.Clock),
		m: newEngineMetrics(opts.Metrics), kick: make(chan struct{}, 1)}, nil
}

// Kick asks for an evaluation soon. It never blocks.
func (e *Engine) Kick() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// Flushed is the results writer's hook: a write that carried a problem or a change of
// health may open, grow or resolve an incident.
func (e *Engine) Flushed(f results.Flush) {
	if f.Problems > 0 || f.Changes > 0 {
		e.Kick()
	}
}

// Start evaluates once at once, then after every kick and every tick.
func (e *Engine) Start(ctx context.Context) error {
	return e.life.Start(ctx, e.log, "incidents", e.loop)
}

// Stop ends the loop and waits for an evaluation in progress. Safe twice.
func (e *Engine) Stop() { e.life.Stop() }

func (e *Engine) loop(ctx context.Context) {
	tick := time.NewTicker(e.opts.Every)
	defer tick.Stop()
	for {
		started := time.Now()
		e.run(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.kick:
			wait := max(e.opts.Settle, e.opts.MinGap-time.Since(started))
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}

func (e *Engine) run(ctx context.Context) {
	start := time.Now()
	var out Outcome
	err := safego.Call(func() error {
		var err error
		out, err = e.Evaluate(ctx)
		return err
	})
	switch {
	case err == nil:
		e.m.observe(out, time.Since(start))
		if out.Opened+out.Updated+out.Resolved > 0 {
			e.log.Info().Int("opened", out.Opened).Int("updated", out.Updated).Int("resolved", out.Resolved).
				Int("open", out.Open).Msg("incidents changed")
		}
	case errors.Is(err, ErrBusy), ctx.Err() != nil:
	default:
		e.m.failures.Inc()
		e.log.Error().Err(err).Msg("incident evaluation failed; it runs again at the next write or tick")
	}
}

// Outcome is what one evaluation changed.
type Outcome struct {
	Opened, Updated, Resolved int
	// Open incidents after it; Covered: failing roots that opened nothing because they
	// are in maintenance.
	Open, Covered int
	// Problems is how many problem entities it looked at.
	Problems int
}

// Evaluate makes the incidents match the current health, in one transaction holding the
// engine's advisory lock (ErrBusy when another scheduler holds it).
func (e *Engine) Evaluate(ctx context.Context) (Outcome, error) {
	var out Outcome
	err := storage.New(e.opts.Pool).InTxLocked(ctx, lockKey, ErrBusy, func(tx *storage.Store) error {
		st, err := e.load(ctx, tx)
		if err != nil {
			return err
		}
		out, err = e.apply(ctx, tx, st)
		return err
	})
	return out, err
}

type engineMetrics struct {
	evaluations prometheus.Histogram
	failures    prometheus.Counter
	changes     *prometheus.CounterVec
	open        prometheus.Gauge
}

func newEngineMetrics(reg prometheus.Registerer) *engineMetrics {
	m := &engineMetrics{
		evaluations: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "oikos_incident_evaluation_seconds",
			Help: "Time of one incident evaluation.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "oikos_incident_evaluation_failures_total",
			Help: "Incident evaluations that failed."}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "oikos_incident_changes_total",
			Help: "Incidents opened, updated and resolved."}, []string{"change"}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "oikos_incidents_open", Help: "Open incidents."}),
	}
	metrics.Register(reg, m.evaluations)
	metrics.Register(reg, m.failures)
	metrics.Register(reg, m.changes)
	metrics.Register(reg, m.open)
	return m
}

func (m *engineMetrics) observe(o Outcome, took time.Duration) {
	m.evaluations.Observe(took.Seconds())
	m.changes.WithLabelValues("opened").Add(float64(o.Opened))
	m.changes.WithLabelValues("updated").Add(float64(o.Updated))
	m.changes.WithLabelValues("resolved").Add(float64(o.Resolved))
	m.open.Set(float64(o.Open))
}

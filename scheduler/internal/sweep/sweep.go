// Package sweep holds the scheduler's periodic passes over the whole fleet
// (docs/behaviours.md S4–S6):
//
//   - staleness: an entity whose last observation is older than 3× its fastest enabled
//     check interval (floor 5 min) becomes `stale`, with a health.stale event — so a stalled
//     scheduler, a disabled check or a host nobody can reach never looks like current data;
//   - coverage: an `unmonitored` signal for every live entity whose type (or the entity
//     itself) declares monitoring it has no check for, decided by shared/checks exactly as
//     derivation decides, so types that declare none are never reported;
//   - stuck probes: a `probe_stuck` signal for a check that has been down or unknown for
//     longer than StuckAfter, and a `check_misconfigured` signal at once for a check that
//     cannot run because of its configuration (S8);
//   - reconcile: resolves signals whose cause is gone for a reason the passes above do not
//     see (the entity was destroyed, the check was disabled or deleted);
//   - retention: deletes metric samples older than the retention in bounded batches.
//
// Each pass recomputes every cause of its kind and hands the set to signals.Store.Sync, which
// raises what is present (deduplicated, counting occurrences) and resolves what is not: the
// auto-resolution and the reconcile are the same code. Every pass runs under a
// transaction-scoped advisory lock, so several schedulers may run the sweeps and only one
// does each pass at a time.
package sweep

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/signals"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// Defaults for Options.
const (
	DefaultStaleEvery     = time.Minute
	DefaultStaleFloor     = 5 * time.Minute
	DefaultCoverageEvery  = 10 * time.Minute
	DefaultStuckEvery     = 5 * time.Minute
	DefaultStuckAfter     = time.Hour
	DefaultReconcileEvery = 5 * time.Minute
	DefaultRetentionEvery = time.Hour
	DefaultRetention      = 30 * 24 * time.Hour
	DefaultRetentionBatch = 10000
)

// Signal kinds raised by the sweeps.
const (
	KindUnmonitored        = "unmonitored"
	KindProbeStuck         = "probe_stuck"
	KindCheckMisconfigured = "check_misconfigured"
)

// EventStale is appended when the staleness pass marks an entity stale.
const EventStale = "health.stale"

// Advisory lock keys, one per pass ("oikos" + pass number).
const (
	lockStale     = 0x6f696b6f7301
	lockCoverage  = 0x6f696b6f7302
	lockStuck     = 0x6f696b6f7303
	lockReconcile = 0x6f696b6f7304
	lockRetention = 0x6f696b6f7305
)

// ErrBusy is returned by a pass another scheduler is running right now.
var ErrBusy = errors.New("sweep: another scheduler holds this pass")

// Options configure the Sweeper. Pool and Ontology are required.
type Options struct {
	Pool *storage.Pool
	// Ontology decides coverage; it must be the one the api derives with.
	Ontology *ontology.Ontology
	// Signals defaults to signals.New(Clock).
	Signals *signals.Store
	Logger  zerolog.Logger
	// Metrics receives the passes' metrics (README, Metrics); nil keeps them unregistered.
	Metrics prometheus.Registerer
	// Clock is "now" for every pass (default time.Now).
	Clock func() time.Time

	StaleEvery     time.Duration
	StaleFloor     time.Duration
	CoverageEvery  time.Duration
	StuckEvery     time.Duration
	StuckAfter     time.Duration
	ReconcileEvery time.Duration
	RetentionEvery time.Duration
	// Retention is how long metric samples are kept (OIKOS_METRICS_RETENTION, default 30 d).
	Retention      time.Duration
	RetentionBatch int
}

// Sweeper runs the passes on their intervals. Start once; Stop is safe twice.
type Sweeper struct {
	opts Options
	st   *storage.Store
	log  zerolog.Logger
	m    *sweepMetrics
	sig  *signals.Store
	life startstop.Lifecycle // the passes' goroutines
}

// New builds a Sweeper.
func New(opts Options) (*Sweeper, error) {
	if opts.Pool == nil || opts.Ontology == nil {
		return nil, errors.New("sweep: Pool and Ontology are required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.StaleEvery, DefaultStaleEvery)
	def(&opts.StaleFloor, DefaultStaleFloor)
	def(&opts.CoverageEvery, DefaultCoverageEvery)
	def(&opts.StuckEvery, DefaultStuckEvery)
	def(&opts.StuckAfter, DefaultStuckAfter)
	def(&opts.ReconcileEvery, DefaultReconcileEvery)
	def(&opts.RetentionEvery, DefaultRetentionEvery)
	def(&opts.Retention, DefaultRetention)
	if opts.RetentionBatch <= 0 {
		opts.RetentionBatch = DefaultRetentionBatch
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Signals == nil {
		opts.Signals = signals.New(opts.Clock)
	}
	return &Sweeper{opts: opts, st: storage.New(opts.Pool), log: opts.Logger.With().Str("component", "sweep").Logger(), m: newSweepMetrics(opts.Metrics), sig: opts.Signals}, nil
}

// Start runs every pass on its interval, the first time shortly after start, each on a
// goroutine of its own. Start once.
func (s *Sweeper) Start(ctx context.Context) error {
	passes := []struct {
		name  string
		every time.Duration
		first time.Duration
		run   func(context.Context) error
	}{
		{"staleness", s.opts.StaleEvery, s.opts.StaleEvery, func(ctx context.Context) error { _, err := s.Staleness(ctx); return err }},
		{"coverage", s.opts.CoverageEvery, 30 * time.Second, func(ctx context.Context) error { _, err := s.Coverage(ctx); return err }},
		{"stuck", s.opts.StuckEvery, time.Minute, func(ctx context.Context) error { _, err := s.Stuck(ctx); return err }},
		{"reconcile", s.opts.ReconcileEvery, 2 * time.Minute, func(ctx context.Context) error { _, err := s.Reconcile(ctx); return err }},
		{"retention", s.opts.RetentionEvery, 5 * time.Minute, func(ctx context.Context) error { _, err := s.Retention(ctx); return err }},
	}
	return s.life.Start(ctx, s.log, "sweep", func(context.Context) {
		for _, p := range passes {
			s.life.Go("sweep-"+p.name, func(ctx context.Context) {
				s.every(ctx, p.name, min(p.first, p.every), p.every, p.run)
			})
		}
	})
}

// Stop ends the passes and waits for one in progress. Safe twice, and before Start.
func (s *Sweeper) Stop() { s.life.Stop() }

func (s *Sweeper) every(ctx context.Context, name string, first, every time.Duration, run func(context.Context) error) {
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		err := safego.Call(func() error { return run(ctx) })
		outcome := outcomeCompleted
		switch {
		case err == nil:
		case errors.Is(err, ErrBusy):
			outcome = outcomeSkipped
		case ctx.Err() != nil:
			return
		default:
			outcome = outcomeFailed
			s.log.Error().Err(err).Str("pass", name).Msg("sweep pass failed; it runs again at its next interval")
		}
		s.m.passes.WithLabelValues(name, outcome).Observe(time.Since(start).Seconds())
		timer.Reset(every)
	}
}

// locked runs fn in a transaction holding the pass's advisory lock, or returns ErrBusy.
func (s *Sweeper) locked(ctx context.Context, key int64, fn func(tx *storage.Store) error) error {
	return s.st.InTxLocked(ctx, key, ErrBusy, fn)
}

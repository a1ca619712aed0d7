package checks

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/safego"
)

// EventHealthChanged is appended when a target's combined health changes.
const EventHealthChanged = "health.changed"

// Actor is recorded on the runner's events.
const Actor = "scheduler"

// record is one result on its way to the database.
type record struct {
	checkID, checkSlug, kind string
	targetID, targetSlug     string
	at                       time.Time
	res                      Result
}

// writer batches results: one transaction about every FlushEvery writes the latest result
// of each check, the metric samples (COPY) and the recomputed status of every touched
// target, with health.changed events for the transitions.
type writer struct {
	db    *pgxpool.Pool
	log   zerolog.Logger
	m     *metrics.Registry
	clock Clock
	every time.Duration
	batch int

	in      chan record
	pending atomic.Int64
	quit    chan struct{}
	done    chan struct{}
	once    sync.Once

	mu        sync.Mutex
	flushedAt time.Time
	flushErr  error
}

func newWriter(db *pgxpool.Pool, log zerolog.Logger, m *metrics.Registry, clock Clock, every time.Duration, batch int) *writer {
	return &writer{
		db: db, log: log, m: m, clock: clock, every: every, batch: batch,
		in:   make(chan record, 4*batch),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// submit hands a result over. It blocks when the buffer is full — backpressure on the
// checks rather than an unbounded queue or a silent drop.
func (w *writer) submit(ctx context.Context, rec record) {
	w.pending.Add(1)
	select {
	case w.in <- rec:
	case <-ctx.Done():
		w.pending.Add(-1)
	}
}

func (w *writer) start(ctx context.Context) {
	safego.Go(w.log, "check-result-writer", func() {
		defer close(w.done)
		w.loop(ctx)
	})
}

// stop flushes what was submitted and ends the writer. Safe twice; a no-op before start.
func (w *writer) stop() {
	w.once.Do(func() { close(w.quit) })
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		w.log.Error().Msg("result writer did not finish its last flush within 15 s")
	}
}

func (w *writer) lastFlush() (*time.Time, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var at *time.Time
	if !w.flushedAt.IsZero() {
		t := w.flushedAt
		at = &t
	}
	msg := ""
	if w.flushErr != nil {
		msg = w.flushErr.Error()
	}
	return at, msg
}

func (w *writer) loop(ctx context.Context) {
	tick := time.NewTicker(w.every)
	defer tick.Stop()
	var buf []record
	flush := func(fctx context.Context) {
		if len(buf) == 0 {
			return
		}
		err := w.flush(fctx, buf)
		w.mu.Lock()
		w.flushErr = err
		if err == nil {
			w.flushedAt = time.Now()
		}
		w.mu.Unlock()
		if err != nil {
			w.m.Add("oikos_scheduler_result_flush_errors_total", "Failed writes of a batch of check results (retried).", 1)
			w.log.Error().Err(err).Int("results", len(buf)).Msg("writing check results failed; retrying with the next batch")
			// Keep the results for the next attempt, but not without bound.
			if over := len(buf) - 4*w.batch; over > 0 {
				w.m.Add("oikos_scheduler_results_dropped_total", "Check results not written, by reason.", float64(over), "reason", "write_failures")
				w.log.Error().Int("dropped", over).Msg("dropping the oldest check results after repeated write failures")
				w.pending.Add(-int64(over))
				buf = append(buf[:0:0], buf[over:]...)
			}
			return
		}
		w.m.Add("oikos_scheduler_result_flushes_total", "Batches of check results written.", 1)
		w.pending.Add(-int64(len(buf)))
		buf = buf[:0]
	}
	for {
		select {
		case rec := <-w.in:
			buf = append(buf, rec)
			if len(buf) >= w.batch {
				flush(ctx)
			}
		case <-tick.C:
			flush(ctx)
		case <-w.quit:
		drain:
			for {
				select {
				case rec := <-w.in:
					buf = append(buf, rec)
				default:
					break drain
				}
			}
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			flush(fctx)
			cancel()
			return
		}
	}
}

type targetStatus struct {
	health, reason string
	exists         bool
}

type healthChange struct {
	EntityID string `json:"entity_id"`
	Slug     string `json:"slug"`
	From     string `json:"from"`
	To       string `json:"to"`
	Reason   string `json:"reason"`
}

// flush writes one batch in one transaction.
func (w *writer) flush(ctx context.Context, batch []record) error {
	// The latest result per check; every result's metrics.
	latest := map[string]record{}
	var checkIDs []string
	for _, rec := range batch {
		prev, ok := latest[rec.checkID]
		if !ok {
			checkIDs = append(checkIDs, rec.checkID)
		}
		if !ok || !rec.at.Before(prev.at) {
			latest[rec.checkID] = rec
		}
	}
	tx, err := w.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("write check results: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// The target comes from check_defs itself (S3: never the check's own entity), and a
	// check deleted since it ran is skipped rather than failing the batch.
	targetOf := map[string]string{}
	rows, err := tx.Query(ctx, `SELECT id::text, target_id::text FROM check_defs WHERE id = ANY($1::uuid[])`, checkIDs)
	if err != nil {
		return fmt.Errorf("write check results: read check targets: %w", err)
	}
	var id, target string
	if _, err := pgx.ForEachRow(rows, []any{&id, &target}, func() error { targetOf[id] = target; return nil }); err != nil {
		return fmt.Errorf("write check results: read check targets: %w", err)
	}

	var (
		cIDs, tIDs, healths, reasons, classes, summaries []string
		ats                                              []time.Time
		obs                                              []*time.Time
	)
	slugOf := map[string]string{}
	for _, cid := range checkIDs {
		rec := latest[cid]
		tid, ok := targetOf[cid]
		if !ok {
			continue
		}
		summary := rec.res.Summary
		if summary == nil {
			summary = map[string]any{}
		}
		raw, err := json.Marshal(summary)
		if err != nil {
			return fmt.Errorf("write check results: %s summary: %w", rec.checkSlug, err)
		}
		cIDs = append(cIDs, cid)
		tIDs = append(tIDs, tid)
		healths = append(healths, rec.res.Health)
		reasons = append(reasons, rec.res.Reason)
		classes = append(classes, rec.res.Class)
		summaries = append(summaries, string(raw))
		ats = append(ats, rec.at)
		var o *time.Time
		if rec.res.Observed {
			t := rec.at
			o = &t
		}
		obs = append(obs, o)
		if tid == rec.targetID {
			slugOf[tid] = rec.targetSlug
		}
	}
	if dropped := len(checkIDs) - len(cIDs); dropped > 0 {
		w.m.Add("oikos_scheduler_results_dropped_total", "Check results not written, by reason.", float64(dropped), "reason", "check_deleted")
		w.log.Debug().Int("results", dropped).Msg("results of checks deleted since they ran were dropped")
	}
	if len(cIDs) == 0 {
		return tx.Commit(ctx)
	}
	_, err = tx.Exec(ctx, `
INSERT INTO check_results (check_id, target_id, health, reason, error_class, summary, at, observed_at, since, first_at)
SELECT u.c, u.t, u.h, u.r, u.e, u.s::jsonb, u.at, u.o, u.at, u.at
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::timestamptz[])
     AS u(c, t, h, r, e, s, at, o)
ON CONFLICT (check_id) DO UPDATE SET
    target_id   = EXCLUDED.target_id,
    health      = EXCLUDED.health,
    reason      = EXCLUDED.reason,
    error_class = EXCLUDED.error_class,
    summary     = EXCLUDED.summary,
    at          = EXCLUDED.at,
    observed_at = coalesce(EXCLUDED.observed_at, check_results.observed_at),
    since       = CASE WHEN check_results.health = EXCLUDED.health THEN check_results.since ELSE EXCLUDED.at END,
    runs        = check_results.runs + 1
WHERE check_results.at <= EXCLUDED.at`,
		cIDs, tIDs, healths, reasons, classes, summaries, ats, obs)
	if err != nil {
		return fmt.Errorf("write check results: upsert latest results: %w", err)
	}

	var samples [][]any
	for _, rec := range batch {
		tid, ok := targetOf[rec.checkID]
		if !ok {
			continue
		}
		for _, m := range rec.res.Metrics {
			samples = append(samples, []any{tid, rec.checkID, m.Name, m.Value, rec.at})
		}
	}
	if len(samples) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"metric_samples"}, []string{"target_id", "check_id", "name", "value", "at"},
			pgx.CopyFromRows(samples)); err != nil {
			return fmt.Errorf("write check results: copy metric samples: %w", err)
		}
	}

	targets := uniqueSorted(tIDs)
	changes, err := w.recompute(ctx, tx, targets, slugOf)
	if err != nil {
		return err
	}
	for _, c := range changes {
		if _, err := eventbus.Append(ctx, tx, eventbus.Event{Type: EventHealthChanged, EntityID: c.EntityID, Actor: Actor}, c); err != nil {
			return fmt.Errorf("write check results: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("write check results: commit: %w", err)
	}
	w.m.Add("oikos_scheduler_metric_samples_total", "Metric samples written.", float64(len(samples)))
	w.m.Add("oikos_scheduler_health_changes_total", "Combined health transitions of targets.", float64(len(changes)))
	return nil
}

// recompute sets entity_status of targets from their enabled checks' latest results and
// returns the transitions.
func (w *writer) recompute(ctx context.Context, tx pgx.Tx, targets []string, slugOf map[string]string) ([]healthChange, error) {
	// Rows are created with the schema's default (unknown), then locked in id order so two
	// schedulers writing the same targets cannot deadlock.
	if _, err := tx.Exec(ctx, `INSERT INTO entity_status (entity_id) SELECT t FROM unnest($1::uuid[]) AS t ORDER BY t
ON CONFLICT (entity_id) DO NOTHING`, targets); err != nil {
		return nil, fmt.Errorf("write check results: ensure status rows: %w", err)
	}
	old := map[string]targetStatus{}
	rows, err := tx.Query(ctx, `SELECT es.entity_id::text, es.health, es.reason, e.slug
FROM entity_status es JOIN entities e ON e.id = es.entity_id
WHERE es.entity_id = ANY($1::uuid[]) ORDER BY es.entity_id FOR UPDATE OF es`, targets)
	if err != nil {
		return nil, fmt.Errorf("write check results: lock status rows: %w", err)
	}
	var id, health, reason, slug string
	if _, err := pgx.ForEachRow(rows, []any{&id, &health, &reason, &slug}, func() error {
		old[id] = targetStatus{health: health, reason: reason, exists: true}
		slugOf[id] = slug
		return nil
	}); err != nil {
		return nil, fmt.Errorf("write check results: lock status rows: %w", err)
	}

	states := map[string][]checkState{}
	rows, err = tx.Query(ctx, `
SELECT cr.target_id::text, cd.slug, cd.kind, cr.health, cr.reason, cr.error_class, cr.summary, cr.at, cr.observed_at
FROM check_results cr JOIN check_defs cd ON cd.id = cr.check_id AND cd.enabled AND cd.target_id = cr.target_id
WHERE cr.target_id = ANY($1::uuid[])`, targets)
	if err != nil {
		return nil, fmt.Errorf("write check results: read results of targets: %w", err)
	}
	_, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (struct{}, error) {
		var (
			tid string
			s   checkState
		)
		if err := r.Scan(&tid, &s.Slug, &s.Kind, &s.Health, &s.Reason, &s.Class, &s.Summary, &s.At, &s.ObservedAt); err != nil {
			return struct{}{}, err
		}
		states[tid] = append(states[tid], s)
		return struct{}{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("write check results: read results of targets: %w", err)
	}

	var (
		ids, healths, reasons, summaries []string
		last                             []*time.Time
		changes                          []healthChange
	)
	for _, tid := range targets {
		prev, ok := old[tid]
		if !ok {
			continue // the entity was deleted meanwhile
		}
		c := combine(states[tid])
		if prev.health == HealthStale && c.Health == HealthUnknown {
			// Still nothing observed: stale stays stale (the sweep set it; an unknown
			// result brings no news that would make the data current again).
			c.Health, c.Reason = HealthStale, prev.reason
		}
		raw, err := json.Marshal(c.Summary)
		if err != nil {
			return nil, fmt.Errorf("write check results: status summary: %w", err)
		}
		ids = append(ids, tid)
		healths = append(healths, c.Health)
		reasons = append(reasons, c.Reason)
		summaries = append(summaries, string(raw))
		last = append(last, c.LastCheckAt)
		if prev.health != c.Health {
			changes = append(changes, healthChange{EntityID: tid, Slug: slugOf[tid], From: prev.health, To: c.Health, Reason: c.Reason})
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	_, err = tx.Exec(ctx, `
UPDATE entity_status es SET
    health        = u.h,
    reason        = u.r,
    summary       = u.s::jsonb,
    last_check_at = coalesce(u.l, es.last_check_at),
    changed_at    = CASE WHEN es.health <> u.h THEN $6 ELSE es.changed_at END
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS u(id, h, r, s, l)
WHERE es.entity_id = u.id`, ids, healths, reasons, summaries, last, w.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("write check results: update status: %w", err)
	}
	return changes, nil
}

func uniqueSorted(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

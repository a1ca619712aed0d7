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
// of each check, the metric samples and the recomputed status of every touched target,
// with health.changed events for the transitions (see flush).
type writer struct {
	db    *pgxpool.Pool
	log   zerolog.Logger
	m     *metrics.Registry
	clock Clock
	every time.Duration
	batch int

	// Submitted results wait in buf (at most 4×batch) until the loop takes them, at its
	// tick or when a full batch is waiting (kick). A buffer under a mutex rather than a
	// channel: a channel send wakes the writer goroutine for every result, a hundred
	// thread wake-ups a second at 100 checks/s for nothing (issue 6).
	bufMu   sync.Mutex
	buf     []record
	space   chan struct{} // made by a submitter waiting for room; closed when the loop takes buf
	kick    chan struct{}
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
		kick: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// submit hands a result over. It blocks when the buffer is full — backpressure on the
// checks rather than an unbounded queue or a silent drop.
func (w *writer) submit(ctx context.Context, rec record) {
	w.pending.Add(1)
	for {
		w.bufMu.Lock()
		if len(w.buf) < 4*w.batch {
			w.buf = append(w.buf, rec)
			full := len(w.buf) >= w.batch
			w.bufMu.Unlock()
			if full {
				select {
				case w.kick <- struct{}{}:
				default:
				}
			}
			return
		}
		if w.space == nil {
			w.space = make(chan struct{})
		}
		space := w.space
		w.bufMu.Unlock()
		select {
		case <-space:
		case <-ctx.Done():
			w.pending.Add(-1)
			return
		}
	}
}

// take moves the submitted results onto buf and lets waiting submitters go on.
func (w *writer) take(buf []record) []record {
	w.bufMu.Lock()
	defer w.bufMu.Unlock()
	buf = append(buf, w.buf...)
	clear(w.buf)
	w.buf = w.buf[:0]
	if w.space != nil {
		close(w.space)
		w.space = nil
	}
	return buf
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
		case <-w.kick:
			buf = w.take(buf)
			if len(buf) >= w.batch {
				flush(ctx)
			}
		case <-tick.C:
			buf = w.take(buf)
			flush(ctx)
		case <-w.quit:
			buf = w.take(buf)
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			flush(fctx)
			cancel()
			return
		}
	}
}

type targetStatus struct {
	health, reason string
}

type healthChange struct {
	EntityID string `json:"entity_id"`
	Slug     string `json:"slug"`
	From     string `json:"from"`
	To       string `json:"to"`
	Reason   string `json:"reason"`
}

// targetsOfChecks is the set of targets the batch's checks observe, per check_defs (the
// batch's check ids are always $1).
const targetsOfChecks = `SELECT target_id FROM check_defs WHERE id = ANY($1::text[]::uuid[])`

// flush writes one batch in one transaction, in four round trips whatever its size: BEGIN;
// one pipelined batch that upserts the latest results, inserts the metric samples, creates
// and locks the targets' status rows and reads every enabled check's latest result of those
// targets; the UPDATE of the recomputed statuses (with the health.changed events); COMMIT.
// Ids travel as text and are cast by the server: pgx would otherwise try, fail and retry
// the binary uuid encoding of every string.
func (w *writer) flush(ctx context.Context, batch []record) error {
	// The latest result per check; every result's metrics.
	latest := map[string]int{} // check id → index in batch
	var checkIDs []string
	for i, rec := range batch {
		j, ok := latest[rec.checkID]
		if !ok {
			checkIDs = append(checkIDs, rec.checkID)
		}
		if !ok || !rec.at.Before(batch[j].at) {
			latest[rec.checkID] = i
		}
	}
	n := len(checkIDs)
	var (
		healths, reasons, classes, summaries = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		ats                                  = make([]time.Time, 0, n)
		obs                                  = make([]*time.Time, 0, n)
		sChecks, sNames                      []string
		sValues                              []float64
		sAts                                 []time.Time
	)
	for _, cid := range checkIDs {
		rec := &batch[latest[cid]]
		summary := rec.res.Summary
		if summary == nil {
			summary = map[string]any{}
		}
		raw, err := json.Marshal(summary)
		if err != nil {
			return fmt.Errorf("write check results: %s summary: %w", rec.checkSlug, err)
		}
		healths = append(healths, rec.res.Health)
		reasons = append(reasons, rec.res.Reason)
		classes = append(classes, rec.res.Class)
		summaries = append(summaries, string(raw))
		ats = append(ats, rec.at)
		var o *time.Time
		if rec.res.Observed {
			o = &rec.at
		}
		obs = append(obs, o)
	}
	for i := range batch {
		rec := &batch[i]
		for _, m := range rec.res.Metrics {
			sChecks = append(sChecks, rec.checkID)
			sNames = append(sNames, m.Name)
			sValues = append(sValues, m.Value)
			sAts = append(sAts, rec.at)
		}
	}

	tx, err := w.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("write check results: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	var b pgx.Batch
	// The target comes from check_defs itself (S3: never the check's own entity), and a
	// check deleted since it ran is skipped rather than failing the batch.
	targetOf := make(map[string]string, n)
	b.Queue(`
WITH cd AS (
    SELECT id, target_id FROM check_defs WHERE id = ANY($1::text[]::uuid[])
), latest AS (
    INSERT INTO check_results (check_id, target_id, health, reason, error_class, summary, at, observed_at, since, first_at)
    SELECT cd.id, cd.target_id, u.h, u.r, u.e, u.s::jsonb, u.at, u.o, u.at, u.at
    FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[])
         AS u(c, h, r, e, s, at, o), cd
    WHERE cd.id = u.c
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
    WHERE check_results.at <= EXCLUDED.at
), samples AS (
    INSERT INTO metric_samples (target_id, check_id, name, value, at)
    SELECT cd.target_id, cd.id, s.n, s.v, s.at
    FROM unnest($8::text[]::uuid[], $9::text[], $10::float8[], $11::timestamptz[]) AS s(c, n, v, at)
    JOIN cd ON cd.id = s.c
)
SELECT id::text, target_id::text FROM cd`,
		checkIDs, healths, reasons, classes, summaries, ats, obs, sChecks, sNames, sValues, sAts,
	).Query(func(rows pgx.Rows) error {
		var id, target string
		_, err := pgx.ForEachRow(rows, []any{&id, &target}, func() error { targetOf[id] = target; return nil })
		return err
	})
	// Status rows are created with the schema's default (unknown), then locked in id order
	// so two schedulers writing the same targets cannot deadlock.
	b.Queue(`INSERT INTO entity_status (entity_id) SELECT DISTINCT target_id FROM (`+targetsOfChecks+`) t ORDER BY target_id
ON CONFLICT (entity_id) DO NOTHING`, checkIDs)
	old := map[string]targetStatus{}
	slugOf := map[string]string{}
	b.Queue(`SELECT es.entity_id::text, es.health, es.reason, e.slug
FROM entity_status es JOIN entities e ON e.id = es.entity_id
WHERE es.entity_id IN (`+targetsOfChecks+`) ORDER BY es.entity_id FOR UPDATE OF es`, checkIDs).Query(func(rows pgx.Rows) error {
		var id, health, reason, slug string
		_, err := pgx.ForEachRow(rows, []any{&id, &health, &reason, &slug}, func() error {
			old[id] = targetStatus{health: health, reason: reason}
			slugOf[id] = slug
			return nil
		})
		return err
	})
	states := map[string][]checkState{}
	b.Queue(`
SELECT cr.target_id::text, cd.slug, cd.kind, cr.health, cr.reason, cr.error_class, cr.summary, cr.at, cr.observed_at
FROM check_results cr JOIN check_defs cd ON cd.id = cr.check_id AND cd.enabled AND cd.target_id = cr.target_id
WHERE cr.target_id IN (`+targetsOfChecks+`)`, checkIDs).Query(func(rows pgx.Rows) error {
		var (
			tid string
			s   checkState
		)
		_, err := pgx.ForEachRow(rows, []any{&tid, &s.Slug, &s.Kind, &s.Health, &s.Reason, &s.Class, &s.Summary, &s.At, &s.ObservedAt}, func() error {
			states[tid] = append(states[tid], s)
			s = checkState{}
			return nil
		})
		return err
	})
	if err := tx.SendBatch(ctx, &b).Close(); err != nil {
		return fmt.Errorf("write check results: %w", err)
	}

	written := 0
	for _, cid := range checkIDs {
		if _, ok := targetOf[cid]; ok {
			written++
		}
	}
	if dropped := n - written; dropped > 0 {
		w.m.Add("oikos_scheduler_results_dropped_total", "Check results not written, by reason.", float64(dropped), "reason", "check_deleted")
		w.log.Debug().Int("results", dropped).Msg("results of checks deleted since they ran were dropped")
	}
	if written == 0 {
		return tx.Commit(ctx)
	}
	samples := 0
	for _, c := range sChecks {
		if _, ok := targetOf[c]; ok {
			samples++
		}
	}
	changes, err := w.recompute(ctx, tx, old, slugOf, states)
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
	w.m.Add("oikos_scheduler_metric_samples_total", "Metric samples written.", float64(samples))
	w.m.Add("oikos_scheduler_health_changes_total", "Combined health transitions of targets.", float64(len(changes)))
	return nil
}

// recompute sets entity_status of the locked targets (old) from their enabled checks'
// latest results (states) and returns the transitions.
func (w *writer) recompute(ctx context.Context, tx pgx.Tx, old map[string]targetStatus, slugOf map[string]string, states map[string][]checkState) ([]healthChange, error) {
	targets := make([]string, 0, len(old))
	for tid := range old {
		targets = append(targets, tid)
	}
	sort.Strings(targets)
	var (
		ids, healths, reasons, summaries = make([]string, 0, len(targets)), make([]string, 0, len(targets)), make([]string, 0, len(targets)), make([]string, 0, len(targets))
		last                             = make([]*time.Time, 0, len(targets))
		changes                          []healthChange
	)
	for _, tid := range targets {
		prev := old[tid]
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
	_, err := tx.Exec(ctx, `
UPDATE entity_status es SET
    health        = u.h,
    reason        = u.r,
    summary       = u.s::jsonb,
    last_check_at = coalesce(u.l, es.last_check_at),
    changed_at    = CASE WHEN es.health <> u.h THEN $6 ELSE es.changed_at END
FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS u(id, h, r, s, l)
WHERE es.entity_id = u.id`, ids, healths, reasons, summaries, last, w.clock.Now())
	if err != nil {
		return nil, fmt.Errorf("write check results: update status: %w", err)
	}
	return changes, nil
}

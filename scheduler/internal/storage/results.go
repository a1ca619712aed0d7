package storage

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// The check results writer (results.Writer.flush) writes a batch in one transaction of two
// or three pipelined round trips (pg.InBatchTx); its statements are queued here and sent by
// ResultsTx.Send and Commit, in the order the writer queues them.
//
// Ids travel as text and are cast by the server: pgx would otherwise try, fail and retry the
// binary uuid encoding of every string.

// qFenceLeases reads which of the leases the batch ran under this scheduler still holds, at the
// same generation, and locks them FOR SHARE: a scheduler taking one over (leases.Tick's
// conditional upsert) waits for this transaction, so no result is written after its lease
// passed to another holder. A lease that expired but that nobody took over still counts
// (holder and generation unchanged): results buffered while Postgres was down — when no
// lease could be renewed — are written when it is back, unless another scheduler took the
// unit first (issue 32).
const qFenceLeases = `
SELECT l.resource, l.generation FROM scheduler_leases l
WHERE l.holder = $1 AND l.resource = ANY($2)
ORDER BY l.resource FOR SHARE`

// qConfirmResults writes, in one statement, what repeats the stored state and every metric
// sample of a batch. For each repeating result ($1–$6: check, expected health, class and
// reason — NULL: any reason — run time, observation time) it advances the check's row only
// where the row still holds that state, its target is not stale and the result is not
// older than the row; the targets' status rows are locked in id order first (as the full
// write locks them, so two schedulers cannot deadlock) and their last observation is
// advanced. It returns the number of samples written and the checks it confirmed: any
// other repeating result is written in full.
const qConfirmResults = `
WITH u AS (
    SELECT * FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $11::int[])
         AS u(c, h, e, r, at, o, n)
), st AS MATERIALIZED (
    SELECT es.entity_id, es.health FROM entity_status es
    WHERE es.entity_id IN (SELECT target_id FROM check_defs WHERE id IN (SELECT c FROM u))
    ORDER BY es.entity_id FOR UPDATE
), hb AS (
    UPDATE check_results cr SET at = u.at, observed_at = coalesce(u.o, cr.observed_at), runs = cr.runs + 1,
        streak = cr.streak + u.n
    FROM u, check_defs cd, st
    WHERE cr.check_id = u.c AND cd.id = cr.check_id AND cd.target_id = cr.target_id
      AND st.entity_id = cr.target_id AND st.health <> 'stale'
      AND cr.health = u.h AND cr.error_class = u.e AND (u.r IS NULL OR cr.reason = u.r) AND cr.at <= u.at
    RETURNING cr.check_id, cr.target_id, u.o
), seen AS (
    UPDATE entity_status es SET last_check_at = m.o
    FROM (SELECT target_id, max(o) AS o FROM hb WHERE o IS NOT NULL GROUP BY target_id) m
    WHERE es.entity_id = m.target_id AND (es.last_check_at IS NULL OR es.last_check_at < m.o)
), samples AS (
    INSERT INTO metric_samples (target_id, check_id, name, value, at)
    SELECT cd.target_id, cd.id, s.n, s.v, s.at
    FROM unnest($7::text[]::uuid[], $8::text[], $9::float8[], $10::timestamptz[]) AS s(c, n, v, at)
    JOIN check_defs cd ON cd.id = s.c
    RETURNING 1
)
SELECT (SELECT count(*) FROM samples), coalesce((SELECT array_agg(check_id::text) FROM hb), '{}')`

// qUpsertResults writes the latest result of each changing check ($1–$7) and creates its
// target's status row. The target comes from check_defs itself (S3: never the check's own
// entity), and a check deleted since it ran is skipped rather than failing the batch. It
// returns every check that still exists, its target, and whether its row was written (a
// result older than the stored one is not).
const qUpsertResults = `
WITH cd AS (
    SELECT id, target_id FROM check_defs WHERE id = ANY($1::text[]::uuid[])
), latest AS (
    INSERT INTO check_results (check_id, target_id, health, reason, error_class, summary, at, observed_at, since, first_at, streak)
    SELECT cd.id, cd.target_id, u.h, u.r, u.e, u.s::jsonb, u.at, u.o, u.at, u.at, u.n
    FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[], $8::int[])
         AS u(c, h, r, e, s, at, o, n), cd
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
        streak      = CASE WHEN check_results.health = EXCLUDED.health
                                 OR (check_results.health = 'unknown' AND check_results.error_class = 'unreachable'
                                     AND EXCLUDED.health = 'down' AND EXCLUDED.error_class = 'unreachable')
                           THEN check_results.streak + EXCLUDED.streak ELSE EXCLUDED.streak END,
        runs        = check_results.runs + 1
    WHERE check_results.at <= EXCLUDED.at
    RETURNING check_id
)
SELECT cd.id::text, cd.target_id::text, l.check_id IS NOT NULL FROM cd LEFT JOIN latest l ON l.check_id = cd.id`

// qEnsureStatus, qLockStatus and qTargetStates take the batch's checks as $1 and work on
// the set of targets those checks observe, per check_defs
// (SELECT target_id FROM check_defs WHERE id = ANY($1::text[]::uuid[])).

// qEnsureStatus creates the targets' status rows with the schema's default (unknown).
const qEnsureStatus = `INSERT INTO entity_status (entity_id) SELECT DISTINCT target_id FROM (SELECT target_id FROM check_defs WHERE id = ANY($1::text[]::uuid[])) t ORDER BY target_id
ON CONFLICT (entity_id) DO NOTHING`

// qLockStatus reads and locks the targets' status rows, in id order.
const qLockStatus = `SELECT es.entity_id::text, es.health, es.reason, e.slug
FROM entity_status es JOIN entities e ON e.id = es.entity_id
WHERE es.entity_id IN (SELECT target_id FROM check_defs WHERE id = ANY($1::text[]::uuid[])) ORDER BY es.entity_id FOR UPDATE OF es`

// qTargetStates reads the latest result of every enabled check of the targets.
const qTargetStates = `
SELECT cr.target_id::text, cd.slug, cd.kind, cr.health, cr.reason, cr.error_class, cr.summary, cr.at, cr.observed_at
FROM check_results cr JOIN check_defs cd ON cd.id = cr.check_id AND cd.enabled AND cd.target_id = cr.target_id
WHERE cr.target_id IN (SELECT target_id FROM check_defs WHERE id = ANY($1::text[]::uuid[]))`

// qUpdateStatuses writes the targets' recomputed status ($1–$5) with $6 as the time of a
// change. last_check_at only moves forward: it is the newest observation of the target, and
// a confirmation may have advanced it past what the states say.
const qUpdateStatuses = `
UPDATE entity_status es SET
    health        = u.h,
    reason        = u.r,
    summary       = u.s::jsonb,
    last_check_at = greatest(es.last_check_at, u.l),
    changed_at    = CASE WHEN es.health <> u.h THEN $6 ELSE es.changed_at END
FROM unnest($1::text[]::uuid[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS u(id, h, r, s, l)
WHERE es.entity_id = u.id`

// qClaimBatch records the batch's id in its own transaction (migration 00022): a retry of a
// batch that did commit fails here on the primary key (ErrBatchCommitted), before anything
// else of it is written twice.
const qClaimBatch = `INSERT INTO scheduler_result_batches (id) VALUES ($1::text::uuid)`

// qPruneBatches forgets batch ids older than a day: no retry comes that late.
const qPruneBatches = `DELETE FROM scheduler_result_batches WHERE at < now() - interval '1 day'`

// ResultsTx is the results writer's pipelined transaction: statements are queued on the
// current batch (the first carries BEGIN), Send sends it and starts the next, Commit sends
// it with COMMIT. Callbacks and destinations are filled when their batch is sent.
type ResultsTx struct {
	tx *pg.BatchTx
	b  *pgx.Batch
}

// InResultsTx runs fn with a ResultsTx on a connection of the Store's pool (pg.InBatchTx:
// rolled back unless fn commits).
func (s *Store) InResultsTx(ctx context.Context, fn func(t *ResultsTx) error) error {
	pool, ok := s.db.(*Pool)
	if !ok {
		return errNotPool
	}
	return pg.InBatchTx(ctx, pool, func(tx *pg.BatchTx) error {
		return fn(&ResultsTx{tx: tx, b: tx.Batch()})
	})
}

// Send sends the current batch and starts the next.
func (t *ResultsTx) Send(ctx context.Context) error {
	err := t.tx.Send(ctx, t.b)
	t.b = t.tx.Batch()
	return err
}

// Commit sends the current batch with COMMIT.
func (t *ResultsTx) Commit(ctx context.Context) error { return t.tx.Commit(ctx, t.b) }

// QueueClaimBatch queues qClaimBatch (first in the transaction) and, with prune, qPruneBatches.
func (t *ResultsTx) QueueClaimBatch(id string, prune bool) {
	t.b.Queue(qClaimBatch, id)
	if prune {
		t.b.Queue(qPruneBatches)
	}
}

// BatchCommitted reports whether err is qClaimBatch's key violation: the batch was written
// by an earlier attempt whose COMMIT's answer was lost.
func BatchCommitted(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505" && pe.ConstraintName == "scheduler_result_batches_pkey"
}

// QueueFence queues qFenceLeases: held gets the generation of every lease of units that
// holder still holds.
func (t *ResultsTx) QueueFence(holder string, units []string, held map[string]int64) {
	t.b.Queue(qFenceLeases, holder, units).Query(func(rows pgx.Rows) error {
		var u string
		var g int64
		_, err := pgx.ForEachRow(rows, []any{&u, &g}, func() error { held[u] = g; return nil })
		return err
	})
}

// Confirm is qConfirmResults' arguments: the repeating results (C*) and every sample (S*).
type Confirm struct {
	CIDs, CHealth, CClass []string
	CReason               []*string
	CAt                   []time.Time
	CObs                  []*time.Time
	CRuns                 []int32
	SChecks, SNames       []string
	SValues               []float64
	SAts                  []time.Time
}

// QueueConfirm queues qConfirmResults; samples and confirmed get its answer.
func (t *ResultsTx) QueueConfirm(c Confirm, samples *int64, confirmed *[]string) {
	t.b.Queue(qConfirmResults, c.CIDs, c.CHealth, c.CClass, c.CReason, c.CAt, c.CObs, c.SChecks, c.SNames, c.SValues, c.SAts, c.CRuns).
		QueryRow(func(row pgx.Row) error { return row.Scan(samples, confirmed) })
}

// QueueUpsert queues qUpsertResults; fn gets every check that still exists, its target and
// whether its row was written.
func (t *ResultsTx) QueueUpsert(ids, healths, reasons, classes, summaries []string, ats []time.Time, obs []*time.Time, runs []int32,
	fn func(id, target string, wrote bool)) {
	t.b.Queue(qUpsertResults, ids, healths, reasons, classes, summaries, ats, obs, runs).Query(func(rows pgx.Rows) error {
		var id, target string
		var wrote bool
		_, err := pgx.ForEachRow(rows, []any{&id, &target, &wrote}, func() error {
			fn(id, target, wrote)
			return nil
		})
		return err
	})
}

// QueueEnsureStatus queues qEnsureStatus for the targets of checks.
func (t *ResultsTx) QueueEnsureStatus(checks []string) { t.b.Queue(qEnsureStatus, checks) }

// QueueLockStatus queues qLockStatus for the targets of checks; fn gets each status row.
func (t *ResultsTx) QueueLockStatus(checks []string, fn func(id, health, reason, slug string)) {
	t.b.Queue(qLockStatus, checks).Query(func(rows pgx.Rows) error {
		var id, health, reason, slug string
		_, err := pgx.ForEachRow(rows, []any{&id, &health, &reason, &slug}, func() error {
			fn(id, health, reason, slug)
			return nil
		})
		return err
	})
}

// CheckState is the latest result of one enabled check of a target.
type CheckState struct {
	Slug       string
	Kind       string
	Health     string
	Reason     string
	Class      string
	Summary    map[string]any
	At         time.Time
	ObservedAt *time.Time
}

// QueueTargetStates queues qTargetStates for the targets of checks; fn gets each state.
func (t *ResultsTx) QueueTargetStates(checks []string, fn func(target string, s CheckState)) {
	t.b.Queue(qTargetStates, checks).Query(func(rows pgx.Rows) error {
		var (
			tid string
			s   CheckState
		)
		_, err := pgx.ForEachRow(rows, []any{&tid, &s.Slug, &s.Kind, &s.Health, &s.Reason, &s.Class, &s.Summary, &s.At, &s.ObservedAt}, func() error {
			fn(tid, s)
			s = CheckState{}
			return nil
		})
		return err
	})
}

// QueueUpdateStatuses queues qUpdateStatuses.
func (t *ResultsTx) QueueUpdateStatuses(ids, healths, reasons, summaries []string, last []*time.Time, now time.Time) {
	t.b.Queue(qUpdateStatuses, ids, healths, reasons, summaries, last, now)
}

// QueueEvent queues an outbox append (eventbus.Queue).
func (t *ResultsTx) QueueEvent(e eventbus.Event, payload any) error {
	return eventbus.Queue(t.b, e, payload, nil)
}

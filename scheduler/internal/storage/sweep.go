package storage

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/checks"
)

const qTryXactLock = `SELECT pg_try_advisory_xact_lock($1)`

// InTxLocked runs fn in a transaction holding the transaction-level advisory lock key, or
// returns busy when another session holds it (the sweep passes: one runs fleet-wide).
func (s *Store) InTxLocked(ctx context.Context, key int64, busy error, fn func(tx *Store) error) error {
	return s.InTx(ctx, func(tx *Store) error {
		var got bool
		if err := tx.db.QueryRow(ctx, qTryXactLock, key).Scan(&got); err != nil {
			return fmtErr("advisory lock", err)
		}
		if !got {
			return busy
		}
		return fn(tx)
	})
}

const qSweepEntities = `SELECT id::text, slug, type, name, state, attributes FROM entities WHERE type <> $1`

// EntitiesExcept reads every entity whose type is not typ, as check targets.
func (s *Store) EntitiesExcept(ctx context.Context, typ string) ([]checks.Target, error) {
	rows, err := s.db.Query(ctx, qSweepEntities, typ)
	if err != nil {
		return nil, err
	}
	var out []checks.Target
	var t checks.Target
	if _, err := pgx.ForEachRow(rows, []any{&t.ID, &t.Slug, &t.Type, &t.Name, &t.State, &t.Attributes}, func() error {
		out = append(out, t)
		t = checks.Target{}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// Edge is one live relationship.
type Edge struct{ Type, Source, Target string }

const qSweepEdges = `SELECT type, source_id::text, target_id::text FROM relationships
WHERE valid_to IS NULL AND type IN ('hosts', 'backs-up-to') ORDER BY valid_from`

// HostsAndBackupEdges reads the live hosts and backs-up-to relationships, oldest first.
func (s *Store) HostsAndBackupEdges(ctx context.Context) ([]Edge, error) {
	rows, err := s.db.Query(ctx, qSweepEdges)
	if err != nil {
		return nil, err
	}
	var out []Edge
	var e Edge
	if _, err := pgx.ForEachRow(rows, []any{&e.Type, &e.Source, &e.Target}, func() error {
		out = append(out, e)
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

const qEnabledCheckCounts = `SELECT target_id::text, count(*) FROM check_defs WHERE enabled GROUP BY target_id`

// EnabledCheckCounts is the number of enabled checks per target id.
func (s *Store) EnabledCheckCounts(ctx context.Context) (map[string]int, error) {
	stored := map[string]int{}
	rows, err := s.db.Query(ctx, qEnabledCheckCounts)
	if err != nil {
		return nil, err
	}
	var id string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { stored[id] = n; return nil }); err != nil {
		return nil, err
	}
	return stored, nil
}

// GoneSignal is an unresolved signal whose cause is gone, and why.
type GoneSignal struct{ Key, Why string }

const qGoneSignals = `
SELECT s.dedup_key,
       CASE WHEN e.state = 'destroyed' THEN 'the entity it is about was destroyed'
            WHEN s.kind IN ($1, $2) AND s.check_id IS NULL THEN 'the check it is about was deleted'
            ELSE 'the check it is about was disabled' END
FROM signals s
LEFT JOIN entities e ON e.id = s.entity_id
LEFT JOIN check_defs cd ON cd.id = s.check_id
WHERE s.status <> 'resolved'
  AND (e.state = 'destroyed'
       OR (s.kind IN ($1, $2) AND (s.check_id IS NULL OR NOT cd.enabled)))
ORDER BY s.dedup_key`

// GoneSignals lists the unresolved signals about a destroyed entity, or (of the kinds
// kind1 and kind2) about a deleted or disabled check.
func (s *Store) GoneSignals(ctx context.Context, kind1, kind2 string) ([]GoneSignal, error) {
	rows, err := s.db.Query(ctx, qGoneSignals, kind1, kind2)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (GoneSignal, error) {
		var g GoneSignal
		err := r.Scan(&g.Key, &g.Why)
		return g, err
	})
}

const qDeleteOldSamples = `
DELETE FROM metric_samples WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM metric_samples WHERE at < $1 LIMIT $2))`

// DeleteSamplesBefore deletes up to limit metric samples older than cutoff, in one short
// statement, and returns how many it deleted.
func (s *Store) DeleteSamplesBefore(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	tag, err := s.db.Exec(ctx, qDeleteOldSamples, cutoff, limit)
	return tag.RowsAffected(), err
}

// FailingResult is the latest result of an enabled check of a live target, down or unknown.
type FailingResult struct {
	CheckID, CheckSlug, TargetID, TargetSlug, Health, Reason, Class string
	Since                                                           time.Time
}

const qFailingResults = `
SELECT cd.id::text, cd.slug, cr.target_id::text, e.slug, cr.health, cr.reason, cr.error_class, cr.since
FROM check_results cr
JOIN check_defs cd ON cd.id = cr.check_id AND cd.enabled
JOIN entities e ON e.id = cr.target_id AND e.state NOT IN ('destroyed', 'deprecated')
WHERE cr.health IN ('down', 'unknown')
ORDER BY cd.slug`

// FailingResults lists the latest results that are down or unknown, of enabled checks of
// live targets, by check slug.
func (s *Store) FailingResults(ctx context.Context) ([]FailingResult, error) {
	rows, err := s.db.Query(ctx, qFailingResults)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (FailingResult, error) {
		var x FailingResult
		err := r.Scan(&x.CheckID, &x.CheckSlug, &x.TargetID, &x.TargetSlug, &x.Health, &x.Reason, &x.Class, &x.Since)
		return x, err
	})
}

// StaleCandidate is an entity whose data is older than its staleness bound.
type StaleCandidate struct {
	ID, Slug, Health string
	LastObs          time.Time
	LastCheckAt      *time.Time
	After            time.Duration
}

const qStaleCandidates = `
WITH fastest AS (
    SELECT target_id,
           min(interval_seconds) FILTER (WHERE enabled) AS enabled_secs,
           min(interval_seconds) AS any_secs
    FROM check_defs GROUP BY target_id
), firsts AS (
    SELECT target_id, min(first_at) AS first_at FROM check_results GROUP BY target_id
)
SELECT es.entity_id::text, e.slug, es.health, es.last_check_at,
       coalesce(es.last_check_at, fr.first_at) AS last_obs,
       greatest(3 * coalesce(f.enabled_secs, f.any_secs), $2::float8) AS after_secs
FROM entity_status es
JOIN entities e ON e.id = es.entity_id
LEFT JOIN fastest f ON f.target_id = es.entity_id
LEFT JOIN firsts fr ON fr.target_id = es.entity_id
WHERE es.health <> 'stale' AND e.type <> 'check' AND e.state <> 'destroyed'
  AND coalesce(es.last_check_at, fr.first_at) IS NOT NULL
  AND coalesce(es.last_check_at, fr.first_at)
      < $1::timestamptz - make_interval(secs => greatest(3 * coalesce(f.enabled_secs, f.any_secs), $2::float8))
ORDER BY es.entity_id`

// StaleCandidates lists the entities (not checks, not destroyed) whose last observation is
// older at now than 3× their fastest check interval, at least floorSecs.
func (s *Store) StaleCandidates(ctx context.Context, now time.Time, floorSecs float64) ([]StaleCandidate, error) {
	rows, err := s.db.Query(ctx, qStaleCandidates, now, floorSecs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleCandidate, error) {
		var c StaleCandidate
		var secs float64
		err := r.Scan(&c.ID, &c.Slug, &c.Health, &c.LastCheckAt, &c.LastObs, &secs)
		c.After = time.Duration(secs * float64(time.Second))
		return c, err
	})
}

const qMarkStale = `UPDATE entity_status SET health = 'stale', reason = $2, changed_at = $3
WHERE entity_id = $1 AND health = $4 AND last_check_at IS NOT DISTINCT FROM $5`

// MarkStale marks entity id stale, guarded on what was read (health and last_check_at): a
// result written meanwhile wins over the sweep. It returns the rows changed.
func (s *Store) MarkStale(ctx context.Context, id, reason string, at time.Time, health string, lastCheckAt *time.Time) (int64, error) {
	tag, err := s.db.Exec(ctx, qMarkStale, id, reason, at, health, lastCheckAt)
	return tag.RowsAffected(), err
}

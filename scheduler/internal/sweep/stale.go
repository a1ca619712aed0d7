package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
)

// staleCandidate is an entity whose data is older than its staleness bound.
type staleCandidate struct {
	id, slug, health string
	lastObs          time.Time
	lastCheckAt      *time.Time
	after            time.Duration
}

type stalePayload struct {
	EntityID          string    `json:"entity_id"`
	Slug              string    `json:"slug"`
	From              string    `json:"from"`
	To                string    `json:"to"`
	LastObservation   time.Time `json:"last_observation"`
	StaleAfterSeconds float64   `json:"stale_after_seconds"`
	Reason            string    `json:"reason"`
}

// Staleness marks stale every entity whose last observation (last_check_at, else the first
// result any of its checks produced) is older than 3× its fastest enabled check interval,
// with StaleFloor as the lower bound; an entity with no enabled check left uses the fastest
// of its disabled ones. Check entities and destroyed entities are skipped. It returns the
// slugs marked.
func (s *Sweeper) Staleness(ctx context.Context) ([]string, error) {
	now := s.opts.Clock()
	floor := s.opts.StaleFloor.Seconds()
	var marked []string
	err := s.locked(ctx, lockStale, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
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
ORDER BY es.entity_id`, now, floor)
		if err != nil {
			return fmt.Errorf("staleness: find candidates: %w", err)
		}
		cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (staleCandidate, error) {
			var c staleCandidate
			var secs float64
			err := r.Scan(&c.id, &c.slug, &c.health, &c.lastCheckAt, &c.lastObs, &secs)
			c.after = time.Duration(secs * float64(time.Second))
			return c, err
		})
		if err != nil {
			return fmt.Errorf("staleness: find candidates: %w", err)
		}
		for _, c := range cands {
			reason := fmt.Sprintf("no observation since %s (stale after %s: 3× the fastest check interval, at least %s)",
				c.lastObs.UTC().Format(time.RFC3339), c.after, s.opts.StaleFloor)
			// Guarded on what was read: a result written meanwhile wins over the sweep.
			tag, err := tx.Exec(ctx, `UPDATE entity_status SET health = 'stale', reason = $2, changed_at = $3
WHERE entity_id = $1 AND health = $4 AND last_check_at IS NOT DISTINCT FROM $5`,
				c.id, reason, now, c.health, c.lastCheckAt)
			if err != nil {
				return fmt.Errorf("staleness: mark %s: %w", c.slug, err)
			}
			if tag.RowsAffected() == 0 {
				continue
			}
			_, err = eventbus.Append(ctx, tx, eventbus.Event{Type: EventStale, EntityID: c.id, Actor: "scheduler"}, stalePayload{
				EntityID: c.id, Slug: c.slug, From: c.health, To: "stale", LastObservation: c.lastObs.UTC(),
				StaleAfterSeconds: c.after.Seconds(), Reason: reason,
			})
			if err != nil {
				return fmt.Errorf("staleness: %w", err)
			}
			marked = append(marked, c.slug)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(marked) > 0 {
		s.m.staleMarked.Add(float64(len(marked)))
		s.log.Info().Strs("entities", marked).Msg("marked stale: no recent observation")
	}
	return marked, nil
}

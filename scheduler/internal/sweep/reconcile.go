package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reconcile resolves unresolved signals whose cause is gone for a reason the other passes
// cannot see: the entity they are about is destroyed, or the check they are about was
// deleted or disabled. It returns how many it resolved.
func (s *Sweeper) Reconcile(ctx context.Context) (int, error) {
	n := 0
	err := s.locked(ctx, lockReconcile, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
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
ORDER BY s.dedup_key`, KindProbeStuck, KindCheckMisconfigured)
		if err != nil {
			return fmt.Errorf("reconcile: find signals: %w", err)
		}
		type gone struct{ key, why string }
		list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (gone, error) {
			var g gone
			err := r.Scan(&g.key, &g.why)
			return g, err
		})
		if err != nil {
			return fmt.Errorf("reconcile: find signals: %w", err)
		}
		for _, g := range list {
			ok, err := s.sig.Resolve(ctx, tx, g.key, g.why)
			if err != nil {
				return fmt.Errorf("reconcile: %w", err)
			}
			if ok {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.m.reconciled.Add(float64(n))
	}
	return n, nil
}

// Retention deletes metric samples older than Retention in batches of RetentionBatch, each
// its own short statement, so a large backlog never holds one long transaction. It returns
// how many rows it deleted.
func (s *Sweeper) Retention(ctx context.Context) (int64, error) {
	cutoff := s.opts.Clock().Add(-s.opts.Retention)
	var total int64
	err := s.locked(ctx, lockRetention, func(tx pgx.Tx) error {
		// The lock transaction only serialises the pass; the deletes commit on their own.
		for ctx.Err() == nil {
			tag, err := s.opts.Pool.Exec(ctx, `
DELETE FROM metric_samples WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM metric_samples WHERE at < $1 LIMIT $2))`, cutoff, s.opts.RetentionBatch)
			if err != nil {
				return fmt.Errorf("retention: delete samples older than %s: %w", cutoff.Format(time.RFC3339), err)
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < int64(s.opts.RetentionBatch) {
				return nil
			}
		}
		return ctx.Err()
	})
	if err != nil {
		return total, err
	}
	if total > 0 {
		s.m.samplesDeleted.Add(float64(total))
		s.log.Info().Int64("deleted", total).Time("older_than", cutoff).Msg("metric retention")
	}
	return total, nil
}

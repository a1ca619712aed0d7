package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
)

// Reconcile resolves unresolved signals whose cause is gone for a reason the other passes
// cannot see: the entity they are about is destroyed, or the check they are about was
// deleted or disabled. It returns how many it resolved.
func (s *Sweeper) Reconcile(ctx context.Context) (int, error) {
	n := 0
	err := s.locked(ctx, lockReconcile, func(tx *storage.Store) error {
		list, err := tx.GoneSignals(ctx, KindProbeStuck, KindCheckMisconfigured)
		if err != nil {
			return fmt.Errorf("reconcile: find signals: %w", err)
		}
		for _, g := range list {
			ok, err := tx.ResolveSignal(ctx, s.sig, g.Key, g.Why)
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
	err := s.locked(ctx, lockRetention, func(tx *storage.Store) error {
		// The lock transaction only serialises the pass; the deletes commit on their own.
		for ctx.Err() == nil {
			n, err := s.st.DeleteSamplesBefore(ctx, cutoff, s.opts.RetentionBatch)
			if err != nil {
				return fmt.Errorf("retention: delete samples older than %s: %w", cutoff.Format(time.RFC3339), err)
			}
			total += n
			if n < int64(s.opts.RetentionBatch) {
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

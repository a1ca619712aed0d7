package sweep

import (
	"context"
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/scheduler/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

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
	err := s.locked(ctx, lockStale, func(tx *storage.Store) error {
		cands, err := tx.StaleCandidates(ctx, now, floor)
		if err != nil {
			return fmt.Errorf("staleness: find candidates: %w", err)
		}
		for _, c := range cands {
			reason := fmt.Sprintf("no observation since %s (stale after %s: 3× the fastest check interval, at least %s)",
				c.LastObs.UTC().Format(time.RFC3339), c.After, s.opts.StaleFloor)
			// Guarded on what was read: a result written meanwhile wins over the sweep.
			n, err := tx.MarkStale(ctx, c.ID, reason, now, c.Health, c.LastCheckAt)
			if err != nil {
				return fmt.Errorf("staleness: mark %s: %w", c.Slug, err)
			}
			if n == 0 {
				continue
			}
			_, err = tx.AppendEvent(ctx, eventbus.Event{Type: EventStale, EntityID: c.ID, Actor: "scheduler"}, stalePayload{
				EntityID: c.ID, Slug: c.Slug, From: c.Health, To: "stale", LastObservation: c.LastObs.UTC(),
				StaleAfterSeconds: c.After.Seconds(), Reason: reason,
			})
			if err != nil {
				return fmt.Errorf("staleness: %w", err)
			}
			marked = append(marked, c.Slug)
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

package graphstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage/checksync"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// SyncChecks re-derives and writes the checks of the targets (api/internal/storage/checksync)
// without announcing them, so a caller can append its own event first (AnnounceChecks).
func (s *Store) SyncChecks(ctx context.Context, o *ontology.Ontology, ts ...checks.Target) (checksync.Changes, error) {
	var all checksync.Changes
	for _, t := range ts {
		ch, err := s.check.Sync(ctx, s.db, o, t)
		if err != nil {
			return checksync.Changes{}, fmt.Errorf("derive checks of %s: %w", t.Slug, err)
		}
		all.Merge(ch)
	}
	return all, nil
}

// SyncChecksMany re-derives the checks of many targets with one read of the graph facts
// derivation needs (checksync.Syncer.SyncMany).
func (s *Store) SyncChecksMany(ctx context.Context, o *ontology.Ontology, ts []checks.Target) (checksync.Changes, error) {
	return s.check.SyncMany(ctx, s.db, o, ts)
}

// maxListedChecks bounds the slugs a checks.changed event lists; a first seed changes
// thousands and SSE clients only need to know that they should reload.
const maxListedChecks = 200

// checksChanged is the payload of a checks.changed event.
type checksChanged struct {
	Added     int      `json:"added"`
	Updated   int      `json:"updated"`
	Disabled  int      `json:"disabled"`
	Checks    []string `json:"checks"`
	Targets   []string `json:"targets"`
	Truncated bool     `json:"truncated,omitempty"`
}

// AnnounceChecks appends e (a checks.changed event: its Type, EntityID, CorrelationID and
// Actor) with ch's payload and NOTIFYs oikos_checks (delivered at commit), only when
// definitions changed: the scheduler reloads on it, so a no-op must stay silent.
func (s *Store) AnnounceChecks(ctx context.Context, e eventbus.Event, ch checksync.Changes) error {
	p, note, ok, err := checksChangedEvent(ch)
	if err != nil || !ok {
		return err
	}
	if err := s.AppendEvent(ctx, e, p); err != nil {
		return err
	}
	if err := eventbus.Notify(ctx, s.db, eventbus.ChannelChecks, note); err != nil {
		return fmt.Errorf("notify oikos_checks: %w", err)
	}
	return nil
}

// queueChecksChanged is AnnounceChecks for a batch: the NOTIFY, then the event.
func queueChecksChanged(b *pgx.Batch, e eventbus.Event, ch checksync.Changes) error {
	p, note, ok, err := checksChangedEvent(ch)
	if err != nil || !ok {
		return err
	}
	eventbus.QueueNotify(b, eventbus.ChannelChecks, note)
	return eventbus.Queue(b, e, p, nil)
}

// checksChangedEvent is the checks.changed payload and the oikos_checks NOTIFY payload for
// ch; ok is false when no definition changed.
func checksChangedEvent(ch checksync.Changes) (p checksChanged, note string, ok bool, err error) {
	if !ch.Changed() {
		return p, "", false, nil
	}
	slices.Sort(ch.Targets)
	ch.Targets = slices.Compact(ch.Targets)
	p = checksChanged{Added: len(ch.Added), Updated: len(ch.Updated), Disabled: len(ch.Disabled)}
	p.Checks = slices.Concat(ch.Added, ch.Updated, ch.Disabled)
	p.Targets = ch.Targets
	if len(p.Checks) > maxListedChecks {
		p.Checks, p.Truncated = p.Checks[:maxListedChecks], true
	}
	if len(p.Targets) > maxListedChecks {
		p.Targets, p.Truncated = p.Targets[:maxListedChecks], true
	}
	b, err := json.Marshal(map[string]int{"changed": ch.Count()})
	if err != nil {
		return p, "", false, fmt.Errorf("notify oikos_checks: %w", err)
	}
	return p, string(b), true, nil
}

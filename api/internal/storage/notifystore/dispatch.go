package notifystore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// The dispatcher's queries: its cursor in the outbox (notification_cursor), the rules it
// matches, and the deliveries it queues.

const (
	qInsertCursor = `INSERT INTO notification_cursor (name, last_event_id) VALUES ($1, $2)
			ON CONFLICT (name) DO NOTHING`
	qCursor = `SELECT last_event_id FROM notification_cursor WHERE name = $1`
	// The row lock serialises two apis' dispatchers: each batch is read once.
	qCursorForUpdate = qCursor + ` FOR UPDATE`
	qAdvanceCursor   = `UPDATE notification_cursor SET last_event_id = $2, updated_at = now() WHERE name = $1`
	qEntityType      = `SELECT type FROM entities WHERE id = $1`
	qEnabledRules    = `SELECT ` + ruleColumns + ` FROM notification_rules r JOIN notification_channels c ON c.id = r.channel_id
		WHERE r.enabled AND c.enabled ORDER BY c.name, r.created_at, r.id`
	// The channels a target-health notification goes to: enabled, not failing, not its subject.
	qHealthyChannels = `SELECT id::text FROM notification_channels
		WHERE enabled AND failing_since IS NULL AND id <> $1::uuid ORDER BY name`
	qInsertDelivery = `INSERT INTO notification_deliveries (id, idempotency_key, channel_id, rule_id, event_id, event_type, event_at,
		entity_id, kind, severity, title, body, link, payload, next_attempt_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15)
		ON CONFLICT (idempotency_key) DO NOTHING`
)

// PositionCursor returns the cursor name's position, creating it on the first start ever at
// the newest event of the outbox (history is not notified).
func (s *Store) PositionCursor(ctx context.Context, name string) (int64, error) {
	var cursor int64
	err := s.InTx(ctx, func(tx *Store) error {
		last, err := eventbus.LastID(ctx, tx.db)
		if err != nil {
			return err
		}
		if _, err := tx.db.Exec(ctx, qInsertCursor, name, last); err != nil {
			return err
		}
		return tx.db.QueryRow(ctx, qCursor, name).Scan(&cursor)
	})
	return cursor, err
}

// LockCursor reads the cursor name and locks its row until the transaction ends.
func (s *Store) LockCursor(ctx context.Context, name string) (int64, error) {
	var cursor int64
	if err := s.db.QueryRow(ctx, qCursorForUpdate, name).Scan(&cursor); err != nil {
		return 0, fmt.Errorf("read cursor: %w", err)
	}
	return cursor, nil
}

// EventsAfter reads up to limit outbox events of the given types after the id after
// (eventbus.ReadAfter).
func (s *Store) EventsAfter(ctx context.Context, after int64, limit int, types []string) ([]eventbus.Event, error) {
	return eventbus.ReadAfter(ctx, s.db, after, limit, types)
}

// EnabledRules lists the enabled rules of the enabled channels, by channel name, oldest
// first.
func (s *Store) EnabledRules(ctx context.Context) ([]Rule, error) {
	rows, err := s.db.Query(ctx, qEnabledRules)
	if err != nil {
		return nil, fmt.Errorf("load notification rules: %w", err)
	}
	return pgx.CollectRows(rows, collectRule)
}

// EntityType returns the type of the entity id, "" when there is none.
func (s *Store) EntityType(ctx context.Context, id string) (string, error) {
	var typ string
	err := s.db.QueryRow(ctx, qEntityType, id).Scan(&typ)
	if storage.IsNoRows(err) {
		return "", nil
	}
	return typ, err
}

// HealthyChannels lists the ids of the enabled channels that are not failing, except the
// channel except.
func (s *Store) HealthyChannels(ctx context.Context, except string) ([]string, error) {
	rows, err := s.db.Query(ctx, qHealthyChannels, except)
	if err != nil {
		return nil, fmt.Errorf("list healthy channels: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// NewDelivery is a delivery to queue: the event it is about, the channel and rule it goes
// to, its message, and when it is due.
type NewDelivery struct {
	// Key is the idempotency key; a delivery whose key exists already is not queued again.
	Key                         string
	ChannelID, RuleID           string
	Event                       eventbus.Event
	Kind, Severity, Title, Body string
	Link                        string
	Due                         time.Time
}

// QueueDeliveries inserts the deliveries (each at most once, by its key) and moves the
// cursor name to last, in one round trip.
func (s *Store) QueueDeliveries(ctx context.Context, ds []NewDelivery, cursor string, last int64) error {
	b := &pgx.Batch{}
	for _, d := range ds {
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		var entity *string
		if d.Event.EntityID != "" {
			entity = &d.Event.EntityID
		}
		payload := d.Event.Payload
		if len(payload) == 0 {
			payload = []byte(`{}`)
		}
		var rule *string // a target-health notification follows no rule
		if d.RuleID != "" {
			rule = &d.RuleID
		}
		b.Queue(qInsertDelivery, id, d.Key, d.ChannelID, rule, d.Event.ID, d.Event.Type, d.Event.At, entity, d.Kind,
			d.Severity, d.Title, d.Body, d.Link, []byte(payload), d.Due)
	}
	b.Queue(qAdvanceCursor, cursor, last)
	return s.db.SendBatch(ctx, b).Close()
}

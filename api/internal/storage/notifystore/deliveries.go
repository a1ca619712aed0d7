package notifystore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Delivery is one notification of one event to one channel, as the api shows it.
type Delivery struct {
	ID             string     `json:"id"`
	IdempotencyKey string     `json:"idempotency_key"`
	ChannelID      string     `json:"channel_id"`
	Channel        string     `json:"channel"`
	RuleID         *string    `json:"rule_id"`
	EventID        int64      `json:"event_id"`
	EventType      string     `json:"event_type"`
	Kind           string     `json:"kind"`
	Severity       string     `json:"severity"`
	Title          string     `json:"title"`
	Body           string     `json:"body"`
	Link           string     `json:"link"`
	Status         string     `json:"status"`
	AttemptCount   int        `json:"attempt_count"`
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	CreatedAt      time.Time  `json:"created_at"`
	SentAt         *time.Time `json:"sent_at"`
	LastError      *string    `json:"last_error"`
	Attempts       []Attempt  `json:"attempts"`
}

// Attempt is one try at sending a delivery.
type Attempt struct {
	At         time.Time `json:"at"`
	OK         bool      `json:"ok"`
	StatusCode *int      `json:"status_code"`
	Error      *string   `json:"error"`
	DurationMS int       `json:"duration_ms"`
}

// DeliveryFilter selects deliveries: of a channel (id or name), in some statuses, newest
// first, Limit of them after the delivery id After (a page's cursor).
type DeliveryFilter struct {
	Channel  string
	Statuses []string
	Limit    int
	After    string
}

const (
	// Ids are uuid v7, so their order is the order of creation.
	qDeliveries = `SELECT d.id::text, d.idempotency_key, d.channel_id::text, c.name, d.rule_id::text,
		d.event_id, d.event_type, d.kind, d.severity, d.title, d.body, d.link, d.status, d.attempts,
		CASE WHEN d.status = 'pending' THEN d.next_attempt_at END, d.created_at, d.sent_at, d.last_error
		FROM notification_deliveries d JOIN notification_channels c ON c.id = d.channel_id
		WHERE ($1 = '' OR d.channel_id::text = $1) AND (cardinality($2::text[]) = 0 OR d.status = ANY($2))
		  AND ($3 = '' OR d.id < $3::uuid)
		ORDER BY d.id DESC LIMIT $4`
	qAttempts = `SELECT delivery_id::text, at, ok, status_code, error, duration_ms
		FROM notification_attempts WHERE delivery_id = ANY($1::uuid[]) ORDER BY id`
)

// Deliveries lists deliveries newest first, each with its attempts in order; next is the
// cursor of the following page ("" on the last).
func (s *Store) Deliveries(ctx context.Context, f DeliveryFilter) (items []Delivery, next string, err error) {
	if f.Channel != "" {
		c, err := s.Channel(ctx, f.Channel, false)
		if err != nil {
			return nil, "", err
		}
		f.Channel = c.ID
	}
	if f.Statuses == nil {
		f.Statuses = []string{}
	}
	rows, err := s.db.Query(ctx, qDeliveries, f.Channel, f.Statuses, f.After, f.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list notification deliveries: %w", err)
	}
	items, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := r.Scan(&d.ID, &d.IdempotencyKey, &d.ChannelID, &d.Channel, &d.RuleID, &d.EventID, &d.EventType, &d.Kind,
			&d.Severity, &d.Title, &d.Body, &d.Link, &d.Status, &d.AttemptCount, &d.NextAttemptAt, &d.CreatedAt, &d.SentAt,
			&d.LastError)
		d.Attempts = []Attempt{}
		return d, err
	})
	if err != nil {
		return nil, "", fmt.Errorf("list notification deliveries: %w", err)
	}
	if len(items) > f.Limit {
		items = items[:f.Limit]
		next = items[len(items)-1].ID
	}
	if len(items) == 0 {
		return []Delivery{}, "", nil
	}
	ids := make([]string, len(items))
	at := make(map[string]int, len(items))
	for i, d := range items {
		ids[i], at[d.ID] = d.ID, i
	}
	rows, err = s.db.Query(ctx, qAttempts, ids)
	if err != nil {
		return nil, "", fmt.Errorf("list notification attempts: %w", err)
	}
	var id string
	var a Attempt
	_, err = pgx.ForEachRow(rows, []any{&id, &a.At, &a.OK, &a.StatusCode, &a.Error, &a.DurationMS}, func() error {
		d := &items[at[id]]
		d.Attempts = append(d.Attempts, a)
		a = Attempt{}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("list notification attempts: %w", err)
	}
	return items, next, nil
}

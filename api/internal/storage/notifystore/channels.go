package notifystore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Channel is a channel as the api shows it: never its URL or secret, only their references
// and the URL's scheme and host.
type Channel struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Kind       string     `json:"kind"`
	URL        string     `json:"url"`
	URLRef     string     `json:"url_ref"`
	SecretRef  *string    `json:"secret_ref"`
	QuietStart *string    `json:"quiet_start"`
	QuietEnd   *string    `json:"quiet_end"`
	Timezone   string     `json:"timezone"`
	Enabled    bool       `json:"enabled"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	LastOKAt   *time.Time `json:"last_ok_at"`
	LastError  *string    `json:"last_error"`
	// Health: State is "failing" from the attempt that made ConsecutiveFailures reach the
	// api's threshold (OIKOS_NOTIFY_FAILING_AFTER) until the next success, else "ok".
	State               string     `json:"state"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	FailingSince        *time.Time `json:"failing_since"`
	Rules               []Rule     `json:"rules"`
}

// Channel states.
const (
	StateOK      = "ok"
	StateFailing = "failing"
)

// Rule says which notifications go to its channel: any of its kinds, at least min_severity,
// and, when they are not empty, an entity type among entity_types and a tag among tags
// (notify.Matches decides).
type Rule struct {
	ID          string    `json:"id"`
	ChannelID   string    `json:"channel_id"`
	Channel     string    `json:"channel"`
	Kinds       []string  `json:"kinds"`
	MinSeverity string    `json:"min_severity"`
	EntityTypes []string  `json:"entity_types"`
	Tags        []string  `json:"tags"`
	Enabled     bool      `json:"enabled"`
	CreatedAt   time.Time `json:"created_at"`
}

// ChannelRow is what a channel's row is written with: checked values and the references
// to store (an inline value is stored first, StoreSecret, and its reference written here).
type ChannelRow struct {
	Name, Kind, URLRef, URLRedacted string
	SecretRef, QuietStart, QuietEnd *string
	Timezone                        string
	Enabled                         bool
}

// RuleRow is what a rule's row is written with.
type RuleRow struct {
	Kinds       []string
	MinSeverity string
	EntityTypes []string
	Tags        []string
	Enabled     bool
}

const channelColumns = `c.id::text, c.name, c.kind, c.url_redacted, c.url_ref, c.secret_ref,
	to_char(c.quiet_start, 'HH24:MI'), to_char(c.quiet_end, 'HH24:MI'), c.timezone, c.enabled,
	c.created_at, c.updated_at, c.last_ok_at, c.last_error, c.consecutive_failures, c.last_failure_at, c.failing_since`

func scanChannel(row pgx.Row) (Channel, error) {
	var c Channel
	err := row.Scan(&c.ID, &c.Name, &c.Kind, &c.URL, &c.URLRef, &c.SecretRef, &c.QuietStart, &c.QuietEnd, &c.Timezone,
		&c.Enabled, &c.CreatedAt, &c.UpdatedAt, &c.LastOKAt, &c.LastError, &c.ConsecutiveFailures, &c.LastFailureAt,
		&c.FailingSince)
	c.Rules = []Rule{}
	c.State = StateOK
	if c.FailingSince != nil {
		c.State = StateFailing
	}
	return c, err
}

const ruleColumns = `r.id::text, r.channel_id::text, c.name, r.kinds, r.min_severity, r.entity_types, r.tags,
	r.enabled, r.created_at`

func scanRule(row pgx.Row) (Rule, error) {
	var r Rule
	err := row.Scan(&r.ID, &r.ChannelID, &r.Channel, &r.Kinds, &r.MinSeverity, &r.EntityTypes, &r.Tags, &r.Enabled,
		&r.CreatedAt)
	return r, err
}

func collectRule(row pgx.CollectableRow) (Rule, error) { return scanRule(row) }

// qChannel matches a channel by id or by name.
const (
	qChannel          = `SELECT ` + channelColumns + ` FROM notification_channels c WHERE (c.id::text = $1 OR c.name = $1)`
	qChannelForUpdate = qChannel + ` FOR UPDATE`
	qChannels         = `SELECT ` + channelColumns + ` FROM notification_channels c ORDER BY c.name`
	qRules            = `SELECT ` + ruleColumns + ` FROM notification_rules r JOIN notification_channels c ON c.id = r.channel_id
		WHERE $1 = '' OR r.channel_id::text = $1 ORDER BY c.name, r.created_at, r.id`
	qInsertChannel = `INSERT INTO notification_channels
			(id, name, kind, url_ref, url_redacted, secret_ref, quiet_start, quiet_end, timezone, enabled, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7::time, $8::time, $9, $10, $11, $11)`
	qUpdateChannel = `UPDATE notification_channels SET name = $2, url_ref = $3, url_redacted = $4, secret_ref = $5,
			quiet_start = $6::time, quiet_end = $7::time, timezone = $8, enabled = $9, updated_at = $10 WHERE id = $1`
	qDeleteChannel = `DELETE FROM notification_channels WHERE id = $1`
	qInsertRule    = `WITH r AS (
		INSERT INTO notification_rules (id, channel_id, kinds, min_severity, entity_types, tags, enabled, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *)
		SELECT ` + ruleColumns + ` FROM r JOIN notification_channels c ON c.id = r.channel_id`
	qDeleteRule = `WITH r AS (DELETE FROM notification_rules WHERE id::text = $1 RETURNING *)
			SELECT ` + ruleColumns + ` FROM r JOIN notification_channels c ON c.id = r.channel_id`
)

// Channel reads one channel by id or name, with its rules; lock takes the row for update
// (inside InTx). apierr.ErrNotFound when there is none.
func (s *Store) Channel(ctx context.Context, ref string, lock bool) (Channel, error) {
	q := qChannel
	if lock {
		q = qChannelForUpdate
	}
	c, err := scanChannel(s.db.QueryRow(ctx, q, ref))
	if storage.IsNoRows(err) {
		return Channel{}, fmt.Errorf("%w: notification channel %q", apierr.ErrNotFound, ref)
	}
	if err != nil {
		return Channel{}, fmt.Errorf("read notification channel: %w", err)
	}
	rules, err := s.Rules(ctx, c.ID)
	if err != nil {
		return Channel{}, err
	}
	c.Rules = rules
	return c, nil
}

// Channels lists every channel, by name, with its rules.
func (s *Store) Channels(ctx context.Context) ([]Channel, error) {
	rows, err := s.db.Query(ctx, qChannels)
	if err != nil {
		return nil, fmt.Errorf("list notification channels: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Channel, error) { return scanChannel(r) })
	if err != nil {
		return nil, fmt.Errorf("list notification channels: %w", err)
	}
	rules, err := s.Rules(ctx, "")
	if err != nil {
		return nil, err
	}
	for i := range out {
		for _, r := range rules {
			if r.ChannelID == out[i].ID {
				out[i].Rules = append(out[i].Rules, r)
			}
		}
	}
	return out, nil
}

// Rules lists the rules of the channel with id channelID, or of all ("").
func (s *Store) Rules(ctx context.Context, channelID string) ([]Rule, error) {
	rows, err := s.db.Query(ctx, qRules, channelID)
	if err != nil {
		return nil, fmt.Errorf("list notification rules: %w", err)
	}
	out, err := pgx.CollectRows(rows, collectRule)
	if err != nil {
		return nil, fmt.Errorf("list notification rules: %w", err)
	}
	if out == nil {
		out = []Rule{}
	}
	return out, nil
}

// nameTaken is a channel name's unique violation as the api answers it.
func nameTaken(err error, name string) error {
	if pg.IsUniqueViolation(err, "notification_channels_name_key") {
		return &apierr.FieldError{Field: "name", Reason: fmt.Sprintf("a channel named %q exists already", name), Err: apierr.ErrDuplicate}
	}
	return nil
}

// InsertChannel creates a channel's row, created and updated at now, and returns its id.
// A name taken is an *apierr.FieldError (ErrDuplicate) naming the field.
func (s *Store) InsertChannel(ctx context.Context, c ChannelRow, now time.Time) (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", err
	}
	_, err = s.db.Exec(ctx, qInsertChannel,
		id, c.Name, c.Kind, c.URLRef, c.URLRedacted, c.SecretRef, c.QuietStart, c.QuietEnd, c.Timezone, c.Enabled, now)
	if err := nameTaken(err, c.Name); err != nil {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("create notification channel: %w", err)
	}
	return id.String(), nil
}

// UpdateChannel rewrites the channel id's row, updated at now. Errors as InsertChannel's.
func (s *Store) UpdateChannel(ctx context.Context, id string, c ChannelRow, now time.Time) error {
	_, err := s.db.Exec(ctx, qUpdateChannel,
		id, c.Name, c.URLRef, c.URLRedacted, c.SecretRef, c.QuietStart, c.QuietEnd, c.Timezone, c.Enabled, now)
	if err := nameTaken(err, c.Name); err != nil {
		return err
	}
	if err != nil {
		return fmt.Errorf("update notification channel: %w", err)
	}
	return nil
}

// DeleteChannel deletes the channel id's row (its rules and deliveries go with it).
func (s *Store) DeleteChannel(ctx context.Context, id string) error {
	if _, err := s.db.Exec(ctx, qDeleteChannel, id); err != nil {
		return fmt.Errorf("delete notification channel: %w", err)
	}
	return nil
}

// InsertRule adds a rule to the channel channelID, created at now.
func (s *Store) InsertRule(ctx context.Context, channelID string, in RuleRow, now time.Time) (Rule, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return Rule{}, err
	}
	r, err := scanRule(s.db.QueryRow(ctx, qInsertRule,
		id, channelID, in.Kinds, in.MinSeverity, in.EntityTypes, in.Tags, in.Enabled, now))
	if err != nil {
		return Rule{}, fmt.Errorf("create notification rule: %w", err)
	}
	return r, nil
}

// DeleteRule deletes a rule and returns it. apierr.ErrNotFound when there is none.
func (s *Store) DeleteRule(ctx context.Context, id string) (Rule, error) {
	r, err := scanRule(s.db.QueryRow(ctx, qDeleteRule, id))
	if storage.IsNoRows(err) {
		return Rule{}, fmt.Errorf("%w: notification rule %q", apierr.ErrNotFound, id)
	}
	if err != nil {
		return Rule{}, fmt.Errorf("delete notification rule: %w", err)
	}
	return r, nil
}

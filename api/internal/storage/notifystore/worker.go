package notifystore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage"
)

// The worker's queries: due deliveries claimed under a lease, and what an attempt writes.

// ErrLost is a claim another claimer took over after its lease ran out, or a delivery
// deleted with its channel: a leased write that found no row.
var ErrLost = errors.New("the delivery's lease ran out and another claimer has it")

// leased is the condition of every write after a claim: the delivery is still pending and
// still ours ($1 its id, $2 the lease).
const leased = `id = $1 AND status = 'pending' AND next_attempt_at = $2`

const (
	qNextDue = `SELECT min(next_attempt_at) FROM notification_deliveries
		WHERE status = 'pending' AND NOT (channel_id = ANY($1::uuid[]))`
	qDue = `SELECT id::text, channel_id::text FROM notification_deliveries
			WHERE status = 'pending' AND next_attempt_at <= $1 AND NOT (channel_id = ANY($2::uuid[]))
			ORDER BY next_attempt_at, id LIMIT 100 FOR UPDATE SKIP LOCKED`
	qLease = `UPDATE notification_deliveries d SET next_attempt_at = $2
			FROM notification_channels c WHERE d.id = ANY($1::uuid[]) AND c.id = d.channel_id
			RETURNING d.id::text, d.idempotency_key, d.channel_id::text, c.name, d.kind, d.severity, d.title, d.body, d.link,
				d.payload, d.event_id, d.event_type, d.event_at, coalesce(d.entity_id::text, ''), d.attempts,
				c.kind, c.url_ref, c.secret_ref, to_char(c.quiet_start, 'HH24:MI'), to_char(c.quiet_end, 'HH24:MI'),
				c.timezone, c.enabled`
	qDefer      = `UPDATE notification_deliveries SET next_attempt_at = $3 WHERE ` + leased
	qSuppress   = `UPDATE notification_deliveries SET status = 'suppressed', last_error = $3 WHERE ` + leased
	qMarkSent   = `UPDATE notification_deliveries SET status = 'sent', attempts = $3, sent_at = $4, last_error = NULL WHERE ` + leased
	qMarkRetry  = `UPDATE notification_deliveries SET attempts = $3, next_attempt_at = $4, last_error = $5 WHERE ` + leased
	qMarkFailed = `UPDATE notification_deliveries SET status = 'failed', attempts = $3, last_error = $4 WHERE ` + leased
	qAttempt    = `INSERT INTO notification_attempts (delivery_id, at, ok, status_code, error, duration_ms)
			VALUES ($1, $2, $3, $4, $5, $6)`
	qChannelOK     = `UPDATE notification_channels SET last_ok_at = $2, last_error = NULL WHERE id = $1`
	qChannelFailed = `UPDATE notification_channels SET last_error = $2 WHERE id = $1`
	qIncident      = `SELECT status, muted_until FROM signals WHERE id = $1::uuid`
)

// NextDue is when the next pending delivery of a channel not in busy is due; nil when none
// is pending.
func (s *Store) NextDue(ctx context.Context, busy []string) (*time.Time, error) {
	var due *time.Time
	err := s.db.QueryRow(ctx, qNextDue, busy).Scan(&due)
	return due, err
}

// Due is a pending delivery due now, locked until the transaction ends.
type Due struct {
	ID, ChannelID string
}

// DueDeliveries locks up to 100 pending deliveries due at now of channels not in busy,
// oldest due first, skipping those another claimer holds (inside InTx).
func (s *Store) DueDeliveries(ctx context.Context, now time.Time, busy []string) ([]Due, error) {
	rows, err := s.db.Query(ctx, qDue, now, busy)
	if err != nil {
		return nil, err
	}
	var out []Due
	var d Due
	_, err = pgx.ForEachRow(rows, []any{&d.ID, &d.ChannelID}, func() error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// Claimed is a delivery leased for one attempt, with its channel.
type Claimed struct {
	ID, Key, ChannelID, Channel, Kind, Severity, Title, Body, Link string
	Payload                                                        json.RawMessage
	EventID                                                        int64
	EventType                                                      string
	EventAt                                                        time.Time
	EntityID                                                       string
	Attempts                                                       int
	ChannelKind, URLRef                                            string
	SecretRef, QuietStart, QuietEnd                                *string
	Timezone                                                       string
	Enabled                                                        bool
	// Lease is the claim's token: every later write names it (ErrLost when it changed).
	Lease time.Time
}

// Lease leases the deliveries ids until lease and returns them with their channels. The
// lease doubles as the claim's token: an update that finds another next_attempt_at lost
// the delivery to another claimer after the lease ran out.
func (s *Store) Lease(ctx context.Context, ids []string, lease time.Time) ([]Claimed, error) {
	rows, err := s.db.Query(ctx, qLease, ids, lease)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Claimed, error) {
		c := Claimed{Lease: lease}
		err := r.Scan(&c.ID, &c.Key, &c.ChannelID, &c.Channel, &c.Kind, &c.Severity, &c.Title, &c.Body, &c.Link,
			&c.Payload, &c.EventID, &c.EventType, &c.EventAt, &c.EntityID, &c.Attempts,
			&c.ChannelKind, &c.URLRef, &c.SecretRef, &c.QuietStart, &c.QuietEnd, &c.Timezone, &c.Enabled)
		return c, err
	})
}

// guarded runs one leased write of c (args after the id and the lease); ErrLost when it
// found no row.
func (s *Store) guarded(ctx context.Context, sql string, c Claimed, args ...any) error {
	tag, err := s.db.Exec(ctx, sql, append([]any{c.ID, c.Lease}, args...)...)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrLost
	}
	return err
}

// Defer makes c due again at at, without an attempt counted (quiet hours, a send cut short).
func (s *Store) Defer(ctx context.Context, c Claimed, at time.Time) error {
	return s.guarded(ctx, qDefer, c, at)
}

// Suppress settles c as suppressed, with its reason: recorded, never sent.
func (s *Store) Suppress(ctx context.Context, c Claimed, reason string) error {
	return s.guarded(ctx, qSuppress, c, reason)
}

// MarkSent records c as sent at at after attempts attempts.
func (s *Store) MarkSent(ctx context.Context, c Claimed, attempts int, at time.Time) error {
	return s.guarded(ctx, qMarkSent, c, attempts, at)
}

// MarkRetry records c's failed attempt (its count and error) and makes it due again at next.
func (s *Store) MarkRetry(ctx context.Context, c Claimed, attempts int, next time.Time, errMsg string) error {
	return s.guarded(ctx, qMarkRetry, c, attempts, next, errMsg)
}

// MarkFailed records c as failed after its last attempt.
func (s *Store) MarkFailed(ctx context.Context, c Claimed, attempts int, errMsg string) error {
	return s.guarded(ctx, qMarkFailed, c, attempts, errMsg)
}

// AttemptRow is one attempt as notification_attempts keeps it.
type AttemptRow struct {
	DeliveryID string
	At         time.Time
	OK         bool
	// StatusCode is the HTTP status when the sender knows it; Error nil on a success.
	StatusCode *int
	Error      *string
	Duration   time.Duration
}

// InsertAttempt records an attempt.
func (s *Store) InsertAttempt(ctx context.Context, a AttemptRow) error {
	_, err := s.db.Exec(ctx, qAttempt, a.DeliveryID, a.At, a.OK, a.StatusCode, a.Error, a.Duration.Milliseconds())
	return err
}

// ChannelOK records the channel id's success at at (and clears its last error).
func (s *Store) ChannelOK(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.Exec(ctx, qChannelOK, id, at)
	return err
}

// ChannelFailed records the channel id's last error.
func (s *Store) ChannelFailed(ctx context.Context, id, errMsg string) error {
	_, err := s.db.Exec(ctx, qChannelFailed, id, errMsg)
	return err
}

// Incident returns the status and the mute of the incident (signal) id; found is false when
// there is none.
func (s *Store) Incident(ctx context.Context, id string) (status string, mutedUntil *time.Time, found bool, err error) {
	err = s.db.QueryRow(ctx, qIncident, id).Scan(&status, &mutedUntil)
	if storage.IsNoRows(err) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	return status, mutedUntil, true, nil
}

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
	// A channel's pending deliveries go out in the order of their events: only its head (the
	// oldest pending) may be claimed, so a later one never overtakes one that is backing off,
	// and a target that was down gets its backlog in order once it answers again.
	qHeads = `SELECT DISTINCT ON (channel_id) id, channel_id, next_attempt_at FROM notification_deliveries
		WHERE status = 'pending' AND NOT (channel_id = ANY($1::uuid[])) ORDER BY channel_id, event_id, id`
	qNextDue = `SELECT min(next_attempt_at) FROM (` + qHeads + `) h`
	// A head another claimer holds locked is skipped, and nothing behind it is taken instead.
	qDue = `SELECT d.id::text, d.channel_id::text FROM notification_deliveries d
			JOIN (` + qHeads + `) h ON h.id = d.id
			WHERE d.status = 'pending' AND d.next_attempt_at <= $2
			ORDER BY d.next_attempt_at, d.id LIMIT 100 FOR UPDATE OF d SKIP LOCKED`
	qLease = `UPDATE notification_deliveries d SET next_attempt_at = $2
			FROM notification_channels c WHERE d.id = ANY($1::uuid[]) AND c.id = d.channel_id
			RETURNING d.id::text, d.idempotency_key, d.channel_id::text, c.name, d.kind, d.severity, d.title, d.body, d.link,
				d.payload, d.event_id, d.event_type, d.event_at, coalesce(d.entity_id::text, ''), d.attempts, d.created_at,
				c.kind, c.url_ref, c.secret_ref, to_char(c.quiet_start, 'HH24:MI'), to_char(c.quiet_end, 'HH24:MI'),
				c.timezone, c.enabled`
	qDefer      = `UPDATE notification_deliveries SET next_attempt_at = $3 WHERE ` + leased
	qSuppress   = `UPDATE notification_deliveries SET status = 'suppressed', last_error = $3 WHERE ` + leased
	qMarkSent   = `UPDATE notification_deliveries SET status = 'sent', attempts = $3, sent_at = $4, last_error = NULL WHERE ` + leased
	qMarkRetry  = `UPDATE notification_deliveries SET attempts = $3, next_attempt_at = $4, last_error = $5 WHERE ` + leased
	qMarkFailed = `UPDATE notification_deliveries SET status = 'failed', attempts = $3, last_error = $4 WHERE ` + leased
	qAttempt    = `INSERT INTO notification_attempts (delivery_id, at, ok, status_code, error, duration_ms)
			VALUES ($1, $2, $3, $4, $5, $6)`
	// The channel's row is locked first, so two apis recording attempts of one channel count
	// its failures one after the other, and the old failing_since says whether this attempt
	// ended a failing episode (or began one).
	qChannelOK = `WITH old AS (SELECT id, failing_since FROM notification_channels WHERE id = $1 FOR UPDATE)
		UPDATE notification_channels c SET last_ok_at = $2, last_error = NULL, consecutive_failures = 0, failing_since = NULL
		FROM old WHERE c.id = old.id
		RETURNING c.name, old.failing_since`
	qChannelFailed = `WITH old AS (SELECT id, failing_since FROM notification_channels WHERE id = $1 FOR UPDATE)
		UPDATE notification_channels c SET last_error = $2, last_failure_at = $3,
			consecutive_failures = c.consecutive_failures + 1,
			failing_since = CASE WHEN old.failing_since IS NULL AND c.consecutive_failures + 1 >= $4 THEN $3
				ELSE old.failing_since END
		FROM old WHERE c.id = old.id
		RETURNING c.name, c.consecutive_failures, old.failing_since IS NULL AND c.failing_since IS NOT NULL`
	qIncident = `SELECT status, muted_until FROM signals WHERE id = $1::uuid`
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
	rows, err := s.db.Query(ctx, qDue, busy, now)
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
	// CreatedAt is when the delivery was queued: one older than the give-up age fails at its
	// next failed attempt.
	CreatedAt                       time.Time
	ChannelKind, URLRef             string
	SecretRef, QuietStart, QuietEnd *string
	Timezone                        string
	Enabled                         bool
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
			&c.Payload, &c.EventID, &c.EventType, &c.EventAt, &c.EntityID, &c.Attempts, &c.CreatedAt,
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

// Health is what an attempt's record did to its channel's health.
type Health struct {
	// Channel is the channel's name; Failures its consecutive failed attempts now.
	Channel  string
	Failures int
	// Failing: this failure made the channel failing (the threshold was reached, and it was
	// not failing already): the start of a failing episode, reported once.
	Failing bool
	// Recovered: this success ended a failing episode that began at FailingSince.
	Recovered    bool
	FailingSince *time.Time
}

// ChannelOK records the channel id's success at at: its last error and failure count
// cleared, and whether that ended a failing episode.
func (s *Store) ChannelOK(ctx context.Context, id string, at time.Time) (Health, error) {
	var h Health
	err := s.db.QueryRow(ctx, qChannelOK, id, at).Scan(&h.Channel, &h.FailingSince)
	if storage.IsNoRows(err) {
		return Health{}, ErrLost
	}
	h.Recovered = h.FailingSince != nil
	return h, err
}

// ChannelFailed records the channel id's failed attempt at at with its error, and whether
// its consecutive failures reached threshold for the first time in this episode.
func (s *Store) ChannelFailed(ctx context.Context, id, errMsg string, at time.Time, threshold int) (Health, error) {
	var h Health
	err := s.db.QueryRow(ctx, qChannelFailed, id, errMsg, at, threshold).Scan(&h.Channel, &h.Failures, &h.Failing)
	if storage.IsNoRows(err) {
		return Health{}, ErrLost
	}
	return h, err
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

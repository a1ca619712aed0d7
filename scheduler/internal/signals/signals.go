// Package signals is the scheduler's small store of signals (BEHAVIOURS S6): conditions an
// operator should hear about, raised by the sweeps and resolved by them when their cause
// clears.
//
// A signal is identified by its dedup key, which names its cause ("unmonitored:<entity id>",
// "probe_stuck:<check id>"). Raising a cause that already has an unresolved signal bumps that
// signal's occurrence count and last_seen instead of adding a row, so a condition that
// persists for a week is one signal with many occurrences, not thousands of rows (the original
// system had an `unmonitored` signal with 18,000 occurrences, which is the point: one row).
// Resolving closes the signal whatever its state: an acknowledgement or a mute silences
// notifications about a cause, it does not keep the cause's signal alive once the cause is
// gone, so the next occurrence starts a fresh, unacknowledged signal.
//
// Writes run in the caller's transaction and append signal.raised / signal.resolved to the
// outbox in it. Only a new signal and a resolution produce events; an occurrence bump does
// not, or a persistent condition would flood the event stream. The api's acknowledge, mute
// and resolve endpoints write the same table; this package never writes audit rows (audit is
// for operator mutations through the api).
package signals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Event types appended by the store.
const (
	EventRaised   = "signal.raised"
	EventResolved = "signal.resolved"
)

// Severities.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// Actor is recorded on the store's events and as resolved_by of an automatic resolution.
const Actor = "scheduler"

// ErrInvalid is returned for a signal that lacks its kind or dedup key.
var ErrInvalid = errors.New("invalid signal")

// Signal is one cause to raise.
type Signal struct {
	Kind     string
	DedupKey string
	// EntityID and CheckID are optional (empty: none).
	EntityID string
	CheckID  string
	Severity string // default warning
	Summary  string
	Details  map[string]any
}

// Raised says what Raise did.
type Raised struct {
	ID          string
	Created     bool  // a new signal (an event was appended); false: an occurrence bump
	Occurrences int64 // after this raise
}

// Store raises and resolves signals. It holds only a clock, so one Store serves every sweep.
type Store struct {
	now func() time.Time
}

// New returns a Store stamping times with now (time.Now when nil).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now}
}

type raisedPayload struct {
	SignalID    string `json:"signal_id"`
	Kind        string `json:"kind"`
	DedupKey    string `json:"dedup_key"`
	Severity    string `json:"severity"`
	Summary     string `json:"summary"`
	EntityID    string `json:"entity_id,omitempty"`
	CheckID     string `json:"check_id,omitempty"`
	Occurrences int64  `json:"occurrences"`
}

type resolvedPayload struct {
	SignalID    string `json:"signal_id"`
	Kind        string `json:"kind"`
	DedupKey    string `json:"dedup_key"`
	Reason      string `json:"reason"`
	ResolvedBy  string `json:"resolved_by"`
	Occurrences int64  `json:"occurrences"`
	// PreviousStatus is open, acknowledged or muted: an acknowledged signal resolves too.
	PreviousStatus string `json:"previous_status"`
	EntityID       string `json:"entity_id,omitempty"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Raise records one occurrence of s's cause in q's transaction: a new open signal (with a
// signal.raised event) when the cause has none unresolved, else an occurrence bump. A muted
// signal whose mute has expired is reopened.
func (st *Store) Raise(ctx context.Context, q pg.Querier, s Signal) (Raised, error) {
	if s.Kind == "" || s.DedupKey == "" {
		return Raised{}, fmt.Errorf("%w: kind and dedup key are required (kind %q, key %q)", ErrInvalid, s.Kind, s.DedupKey)
	}
	if s.Severity == "" {
		s.Severity = SeverityWarning
	}
	details := s.Details
	if details == nil {
		details = map[string]any{}
	}
	raw, err := json.Marshal(details)
	if err != nil {
		return Raised{}, fmt.Errorf("signal %s: marshal details: %w", s.DedupKey, err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return Raised{}, fmt.Errorf("signal id: %w", err)
	}
	now := st.now()
	var r Raised
	err = q.QueryRow(ctx, `
INSERT INTO signals (id, kind, entity_id, check_id, dedup_key, severity, summary, details, first_seen, last_seen)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
ON CONFLICT (dedup_key) WHERE status <> 'resolved' DO UPDATE SET
    occurrences = signals.occurrences + 1,
    last_seen   = EXCLUDED.last_seen,
    severity    = EXCLUDED.severity,
    summary     = EXCLUDED.summary,
    details     = EXCLUDED.details,
    status      = CASE WHEN signals.status = 'muted' AND signals.muted_until IS NOT NULL
                            AND signals.muted_until <= EXCLUDED.last_seen
                       THEN 'open' ELSE signals.status END
RETURNING id::text, occurrences, id = $1`,
		id.String(), s.Kind, nullable(s.EntityID), nullable(s.CheckID), s.DedupKey, s.Severity, s.Summary, raw, now,
	).Scan(&r.ID, &r.Occurrences, &r.Created)
	if err != nil {
		return Raised{}, fmt.Errorf("raise signal %s: %w", s.DedupKey, err)
	}
	if !r.Created {
		return r, nil
	}
	_, err = eventbus.Append(ctx, q, eventbus.Event{Type: EventRaised, EntityID: s.EntityID, Actor: Actor}, raisedPayload{
		SignalID: r.ID, Kind: s.Kind, DedupKey: s.DedupKey, Severity: s.Severity, Summary: s.Summary,
		EntityID: s.EntityID, CheckID: s.CheckID, Occurrences: r.Occurrences,
	})
	if err != nil {
		return Raised{}, fmt.Errorf("raise signal %s: %w", s.DedupKey, err)
	}
	return r, nil
}

// Resolve closes the unresolved signal of dedupKey (open, acknowledged or muted) because its
// cause is gone, with a signal.resolved event. It reports whether there was one.
func (st *Store) Resolve(ctx context.Context, q pg.Querier, dedupKey, reason string) (bool, error) {
	var (
		id, kind, prev, entity string
		occ                    int64
	)
	err := q.QueryRow(ctx, `
WITH old AS (SELECT id, status FROM signals WHERE dedup_key = $1 AND status <> 'resolved' FOR UPDATE)
UPDATE signals s SET status = 'resolved', resolved_at = $2, resolved_by = $3
FROM old WHERE s.id = old.id
RETURNING s.id::text, s.kind, old.status, coalesce(s.entity_id::text, ''), s.occurrences`,
		dedupKey, st.now(), Actor).Scan(&id, &kind, &prev, &entity, &occ)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resolve signal %s: %w", dedupKey, err)
	}
	_, err = eventbus.Append(ctx, q, eventbus.Event{Type: EventResolved, EntityID: entity, Actor: Actor}, resolvedPayload{
		SignalID: id, Kind: kind, DedupKey: dedupKey, Reason: reason, ResolvedBy: Actor, Occurrences: occ,
		PreviousStatus: prev, EntityID: entity,
	})
	if err != nil {
		return false, fmt.Errorf("resolve signal %s: %w", dedupKey, err)
	}
	return true, nil
}

// Open lists the dedup keys of kind's unresolved signals.
func (st *Store) Open(ctx context.Context, q pg.Querier, kind string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT dedup_key FROM signals WHERE kind = $1 AND status <> 'resolved' ORDER BY dedup_key`, kind)
	if err != nil {
		return nil, fmt.Errorf("open %s signals: %w", kind, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("open %s signals: %w", kind, err)
	}
	return keys, nil
}

// Sync makes kind's unresolved signals exactly want: every cause in want is raised (a new
// signal or an occurrence), every unresolved signal of kind whose cause is not in want is
// resolved with clearedReason. Each Signal in want must have Kind == kind. It is how a sweep
// that recomputes all causes of its kind both raises and auto-resolves in one pass.
func (st *Store) Sync(ctx context.Context, q pg.Querier, kind string, want []Signal, clearedReason string) (raised, created, resolved int, err error) {
	keep := make(map[string]bool, len(want))
	for _, s := range want {
		if s.Kind != kind {
			return 0, 0, 0, fmt.Errorf("%w: sync %s given a %s signal (%s)", ErrInvalid, kind, s.Kind, s.DedupKey)
		}
		keep[s.DedupKey] = true
	}
	// Deterministic order, so two passes never lock rows in different orders.
	sorted := append([]Signal(nil), want...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].DedupKey < sorted[j].DedupKey })
	for _, s := range sorted {
		r, err := st.Raise(ctx, q, s)
		if err != nil {
			return raised, created, resolved, err
		}
		raised++
		if r.Created {
			created++
		}
	}
	open, err := st.Open(ctx, q, kind)
	if err != nil {
		return raised, created, resolved, err
	}
	for _, key := range open {
		if keep[key] {
			continue
		}
		ok, err := st.Resolve(ctx, q, key, clearedReason)
		if err != nil {
			return raised, created, resolved, err
		}
		if ok {
			resolved++
		}
	}
	return raised, created, resolved, nil
}

// Package signals is the one writer of signals (docs/behaviours.md S6): conditions an operator should
// hear about, raised by the scheduler (its sweeps, the SSH host-key pinning) and resolved by
// it when their cause clears, and decided by an operator through the api (acknowledge, mute
// until a time, resolve).
//
// A signal is identified by its dedup key, which names its cause ("unmonitored:<entity id>",
// "probe_stuck:<check id>", "host_key_changed:<ip:port>"). Raising a cause that already has an
// unresolved signal bumps that signal's occurrence count and last_seen instead of adding a row,
// so a condition that persists for a week is one signal with many occurrences, not thousands
// of rows (the original system had an `unmonitored` signal with 18,000 occurrences, which is
// the point: one row). A raise of a muted signal whose mute has run out reopens it. Resolving
// closes the signal whatever its state: an acknowledgement or a mute silences notifications
// about a cause, it does not keep the cause's signal alive once the cause is gone, so the next
// occurrence starts a fresh, unacknowledged signal.
//
// Every change of a signal's status writes its audit row and appends its event in the
// caller's transaction: an opening (a new signal, or an expired mute reopened) appends
// signal.raised, a resolution signal.resolved, an operator's decision signal.acknowledged,
// signal.muted or signal.resolved. An occurrence bump changes no status and writes neither, or
// a persistent condition would flood the event stream and the audit log.
package signals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ids"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Event types.
const (
	EventRaised       = "signal.raised"
	EventResolved     = "signal.resolved"
	EventAcknowledged = "signal.acknowledged"
	EventMuted        = "signal.muted"
)

// Audit actions.
const (
	ActionRaise   = "signal.raise"
	ActionReopen  = "signal.reopen"
	ActionResolve = "signal.resolve"
	ActionAck     = "signal.ack"
	ActionMute    = "signal.mute"
)

// Severities.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// Statuses a signal may be in.
var Statuses = []string{"open", "acknowledged", "muted", "resolved"}

// Actor is who a Store's raises and automatic resolutions are recorded as (audit rows,
// events, resolved_by) unless As names another daemon.
const Actor = "scheduler"

var (
	// ErrInvalid is returned for a signal that lacks its kind or dedup key.
	ErrInvalid = errors.New("invalid signal")
	// ErrNotFound: no signal with that id.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the signal is in a status the decision does not apply to.
	ErrConflict = errors.New("conflict")
)

// FieldError says which parameter of a decision is wrong and why.
type FieldError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Signal is one cause to raise.
type Signal struct {
	Kind     string
	DedupKey string
	// EntityID and CheckID are optional (empty: none). A repeat attaches a signal raised
	// without an entity to the one it names.
	EntityID string
	CheckID  string
	Severity string // default warning
	Summary  string
	Details  map[string]any
}

// Raised says what Raise did.
type Raised struct {
	ID string
	// Created: a new signal. Reopened: a muted signal whose mute had run out is open again.
	// Either appended signal.raised; neither is an occurrence bump.
	Created, Reopened bool
	Occurrences       int64 // after this raise
}

// Row is a signal as stored, and as the api shows it.
type Row struct {
	ID             string          `json:"id"`
	Kind           string          `json:"kind"`
	EntityID       *string         `json:"entity_id"`
	Entity         *string         `json:"entity"`
	CheckID        *string         `json:"check_id"`
	DedupKey       string          `json:"dedup_key"`
	Severity       string          `json:"severity"`
	Status         string          `json:"status"`
	Summary        string          `json:"summary"`
	Details        json.RawMessage `json:"details"`
	Occurrences    int64           `json:"occurrences"`
	FirstSeen      time.Time       `json:"first_seen"`
	LastSeen       time.Time       `json:"last_seen"`
	MutedUntil     *time.Time      `json:"muted_until"`
	AcknowledgedBy *string         `json:"acknowledged_by"`
	AcknowledgedAt *time.Time      `json:"acknowledged_at"`
	// AckNote is what the operator said when acknowledging ("rebooting atlas").
	AckNote    string     `json:"ack_note"`
	ResolvedAt *time.Time `json:"resolved_at"`
	ResolvedBy *string    `json:"resolved_by"`
}

func (r Row) entityID() string {
	if r.EntityID == nil {
		return ""
	}
	return *r.EntityID
}

// columnsOf lists a Row's columns of the signals row aliased a (the entity's slug is e.slug).
func columnsOf(a string) string {
	cols := []string{"id::text", "kind", "entity_id::text", "", "check_id::text", "dedup_key", "severity", "status",
		"summary", "details", "occurrences", "first_seen", "last_seen", "muted_until", "acknowledged_by",
		"acknowledged_at", "ack_note", "resolved_at", "resolved_by"}
	for i, c := range cols {
		if c == "" {
			cols[i] = "e.slug"
		} else {
			cols[i] = a + "." + c
		}
	}
	return strings.Join(cols, ", ")
}

// Columns and From select Rows (scan them with Scan): signals as sg, LEFT JOINed to its
// entity as e.
var (
	Columns = columnsOf("sg")
	From    = ` FROM signals sg LEFT JOIN entities e ON e.id = sg.entity_id`
)

func (r *Row) dest() []any {
	return []any{&r.ID, &r.Kind, &r.EntityID, &r.Entity, &r.CheckID, &r.DedupKey, &r.Severity, &r.Status,
		&r.Summary, &r.Details, &r.Occurrences, &r.FirstSeen, &r.LastSeen, &r.MutedUntil, &r.AcknowledgedBy,
		&r.AcknowledgedAt, &r.AckNote, &r.ResolvedAt, &r.ResolvedBy}
}

// Scan reads a Row selected with Columns.
func Scan(row pgx.Row) (Row, error) {
	var r Row
	err := row.Scan(r.dest()...)
	return r, err
}

// Store raises, resolves and decides signals. It holds only a clock, so one Store serves
// every caller.
type Store struct {
	now   func() time.Time
	actor string
}

// New returns a Store stamping times with now (time.Now when nil).
func New(now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{now: now, actor: Actor}
}

// As returns a Store that records its raises and resolutions as actor (the api raises the
// signals of its own failures, a notification channel that stopped answering).
func (st *Store) As(actor string) *Store { return &Store{now: st.now, actor: actor} }

type raisedPayload struct {
	SignalID    string `json:"signal_id"`
	Kind        string `json:"kind"`
	DedupKey    string `json:"dedup_key"`
	Severity    string `json:"severity"`
	Summary     string `json:"summary"`
	EntityID    string `json:"entity_id,omitempty"`
	CheckID     string `json:"check_id,omitempty"`
	Occurrences int64  `json:"occurrences"`
	// Reopened: an expired mute reopened the signal (it is not new).
	Reopened bool `json:"reopened,omitempty"`
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

// decidedPayload is the payload of an operator's decision.
type decidedPayload struct {
	SignalID       string     `json:"signal_id"`
	Kind           string     `json:"kind"`
	Status         string     `json:"status"`
	PreviousStatus string     `json:"previous_status"`
	Entity         *string    `json:"entity"`
	MutedUntil     *time.Time `json:"muted_until"`
	Note           string     `json:"note,omitempty"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// record writes a status change's audit row and event in q's transaction, in one round trip.
func record(ctx context.Context, q pg.Querier, a audit.Row, e eventbus.Event, payload any) error {
	b := &pgx.Batch{}
	if err := audit.Queue(b, a); err != nil {
		return err
	}
	if err := eventbus.Queue(b, e, payload, nil); err != nil {
		return err
	}
	return q.SendBatch(ctx, b).Close()
}

// reopenSQL opens the muted signal of $1 whose mute ended by $2, returning it as it was.
var reopenSQL = `
WITH old AS (SELECT * FROM signals WHERE dedup_key = $1 AND status = 'muted' AND muted_until <= $2 FOR UPDATE),
reopened AS (UPDATE signals s SET status = 'open', muted_until = NULL FROM old WHERE s.id = old.id RETURNING s.id)
SELECT ` + Columns + ` FROM old sg JOIN reopened r ON r.id = sg.id LEFT JOIN entities e ON e.id = sg.entity_id`

// raiseSQL inserts a signal or bumps the unresolved one of its dedup key, returning it.
var raiseSQL = `
WITH sg AS (
    INSERT INTO signals (id, kind, entity_id, check_id, dedup_key, severity, summary, details, first_seen, last_seen)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9)
    ON CONFLICT (dedup_key) WHERE status <> 'resolved' DO UPDATE SET
        occurrences = signals.occurrences + 1,
        last_seen   = EXCLUDED.last_seen,
        severity    = EXCLUDED.severity,
        summary     = EXCLUDED.summary,
        details     = EXCLUDED.details,
        entity_id   = coalesce(signals.entity_id, EXCLUDED.entity_id)
    RETURNING *)
SELECT ` + Columns + ` FROM sg LEFT JOIN entities e ON e.id = sg.entity_id`

// Raise records one occurrence of s's cause in q's transaction: a new open signal when the
// cause has none unresolved, else an occurrence bump; a muted signal whose mute has run out
// is reopened first. A new or reopened signal gets its audit row and signal.raised; a bump
// writes nothing else. Raising twice is one signal and one event.
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
	var before, after Row
	reopened := false
	b := &pgx.Batch{}
	b.Queue(reopenSQL, s.DedupKey, now).QueryRow(func(row pgx.Row) error {
		err := row.Scan(before.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		reopened = err == nil
		return err
	})
	b.Queue(raiseSQL, id.String(), s.Kind, nullable(s.EntityID), nullable(s.CheckID), s.DedupKey, s.Severity, s.Summary, raw, now).
		QueryRow(func(row pgx.Row) error { return row.Scan(after.dest()...) })
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return Raised{}, fmt.Errorf("raise signal %s: %w", s.DedupKey, err)
	}
	r := Raised{ID: after.ID, Created: after.ID == id.String(), Reopened: reopened, Occurrences: after.Occurrences}
	if !r.Created && !r.Reopened {
		return r, nil
	}
	row := audit.Row{Actor: st.actor, Action: ActionRaise, EntityID: after.entityID(), After: after}
	if r.Reopened {
		row.Action, row.Before = ActionReopen, before
	}
	checkID := ""
	if after.CheckID != nil {
		checkID = *after.CheckID
	}
	err = record(ctx, q, row, eventbus.Event{Type: EventRaised, EntityID: after.entityID(), Actor: st.actor}, raisedPayload{
		SignalID: r.ID, Kind: after.Kind, DedupKey: after.DedupKey, Severity: after.Severity, Summary: after.Summary,
		EntityID: after.entityID(), CheckID: checkID, Occurrences: r.Occurrences, Reopened: r.Reopened,
	})
	if err != nil {
		return Raised{}, fmt.Errorf("raise signal %s: %w", s.DedupKey, err)
	}
	return r, nil
}

// resolveSQL resolves the unresolved signal of $1, returning it before and after.
var resolveSQL = `
WITH old AS (SELECT * FROM signals WHERE dedup_key = $1 AND status <> 'resolved' FOR UPDATE),
resolved AS (UPDATE signals s SET status = 'resolved', resolved_at = $2, resolved_by = $3
    FROM old WHERE s.id = old.id RETURNING s.*)
SELECT ` + columnsOf("o") + `, ` + columnsOf("sg") + `
FROM old o JOIN resolved sg ON sg.id = o.id LEFT JOIN entities e ON e.id = sg.entity_id`

// Resolve closes the unresolved signal of dedupKey (open, acknowledged or muted) because its
// cause is gone, with its audit row and a signal.resolved event. It reports whether there was
// one.
func (st *Store) Resolve(ctx context.Context, q pg.Querier, dedupKey, reason string) (bool, error) {
	var before, after Row
	err := q.QueryRow(ctx, resolveSQL, dedupKey, st.now(), st.actor).Scan(append(before.dest(), after.dest()...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("resolve signal %s: %w", dedupKey, err)
	}
	entity := after.entityID()
	err = record(ctx, q, audit.Row{Actor: st.actor, Action: ActionResolve, EntityID: entity, Before: before, After: after},
		eventbus.Event{Type: EventResolved, EntityID: entity, Actor: st.actor}, resolvedPayload{
			SignalID: after.ID, Kind: after.Kind, DedupKey: dedupKey, Reason: reason, ResolvedBy: st.actor,
			Occurrences: after.Occurrences, PreviousStatus: before.Status, EntityID: entity,
		})
	if err != nil {
		return false, fmt.Errorf("resolve signal %s: %w", dedupKey, err)
	}
	return true, nil
}

// Describe replaces what the unresolved signal of dedupKey says — severity, summary,
// details — and moves its last_seen, without counting an occurrence or changing its status.
// It is for a cause whose description changes while it lasts (an incident that gains
// affected entities); the caller appends the event that says what changed. It reports
// whether there was such a signal.
func (st *Store) Describe(ctx context.Context, q pg.Querier, dedupKey, severity, summary string, details map[string]any) (bool, error) {
	if details == nil {
		details = map[string]any{}
	}
	raw, err := json.Marshal(details)
	if err != nil {
		return false, fmt.Errorf("signal %s: marshal details: %w", dedupKey, err)
	}
	tag, err := q.Exec(ctx, `UPDATE signals SET severity = $2, summary = $3, details = $4, last_seen = $5
		WHERE dedup_key = $1 AND status <> 'resolved'`, dedupKey, severity, summary, raw, st.now())
	if err != nil {
		return false, fmt.Errorf("describe signal %s: %w", dedupKey, err)
	}
	return tag.RowsAffected() > 0, nil
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

// By says who decides and through which request, for the audit row and the event.
type By struct {
	Name string
	// Note goes with an acknowledgement (ack_note); other decisions ignore it.
	Note          string
	Method        string
	Path          string
	CorrelationID string
}

// Decisions an operator (or agent) takes on a signal.
const (
	DecisionAck     = "ack"
	DecisionMute    = "mute"
	DecisionResolve = "resolve"
)

// decision describes one transition: the statuses it applies from, the UPDATE's SET list
// (its $2 is the actor, or the mute's until), and the audit action and event type it records.
type decision struct {
	from   []string
	set    string
	action string
	event  string
}

var decisions = map[string]decision{
	DecisionAck: {
		from:   []string{"open", "muted"},
		set:    `status = 'acknowledged', acknowledged_by = $2, acknowledged_at = now(), muted_until = NULL, ack_note = $3`,
		action: ActionAck, event: EventAcknowledged,
	},
	DecisionMute: {
		from:   []string{"open", "acknowledged", "muted"},
		set:    `status = 'muted', muted_until = $2`,
		action: ActionMute, event: EventMuted,
	},
	DecisionResolve: {
		from:   []string{"open", "acknowledged", "muted"},
		set:    `status = 'resolved', resolved_by = $2, resolved_at = now(), muted_until = NULL`,
		action: ActionResolve, event: EventResolved,
	},
}

// Decide applies a decision on the signal id in q's transaction: acknowledge, mute until a
// time (a later raise reopens it once until has passed), or resolve. The row is locked, the
// decision applies only from the statuses it allows (so two concurrent decisions cannot both
// apply), and the change, its audit row and its event commit together. Errors: ErrNotFound,
// ErrConflict (the signal is in a status the decision does not apply to, e.g. already
// resolved), *FieldError (an unknown decision, a mute without a future until).
func (st *Store) Decide(ctx context.Context, q pg.Querier, id, what string, until *time.Time, by By) (Row, error) {
	d, ok := decisions[what]
	if !ok {
		return Row{}, &FieldError{Field: "decision", Reason: fmt.Sprintf("unknown decision %q", what)}
	}
	if what == DecisionMute && (until == nil || !until.After(st.now())) {
		return Row{}, &FieldError{Field: "until", Reason: "mute needs an until time in the future"}
	}
	if !ids.IsUUID(id) {
		return Row{}, fmt.Errorf("%w: signal %q", ErrNotFound, id)
	}
	before, err := Scan(q.QueryRow(ctx, `SELECT `+Columns+From+` WHERE sg.id = $1::uuid FOR UPDATE OF sg`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, fmt.Errorf("%w: signal %q", ErrNotFound, id)
	}
	if err != nil {
		return Row{}, fmt.Errorf("read signal: %w", err)
	}
	allowed := false
	for _, s := range d.from {
		allowed = allowed || s == before.Status
	}
	if !allowed {
		return Row{}, fmt.Errorf("%w: signal %s is %s; %s applies to %v", ErrConflict, id, before.Status, what, d.from)
	}
	args := []any{id, by.Name}
	switch what {
	case DecisionMute:
		args[1] = until
	case DecisionAck:
		args = append(args, by.Note)
	}
	after, err := Scan(q.QueryRow(ctx, `WITH sg AS (UPDATE signals SET `+d.set+` WHERE id = $1::uuid RETURNING *)
		SELECT `+Columns+` FROM sg LEFT JOIN entities e ON e.id = sg.entity_id`, args...))
	if err != nil {
		return Row{}, fmt.Errorf("update signal: %w", err)
	}
	err = record(ctx, q,
		audit.Row{Actor: by.Name, Action: d.action, Method: by.Method, Path: by.Path, CorrelationID: by.CorrelationID,
			EntityID: after.entityID(), Before: before, After: after},
		eventbus.Event{Type: d.event, EntityID: after.entityID(), CorrelationID: by.CorrelationID, Actor: by.Name},
		decidedPayload{SignalID: after.ID, Kind: after.Kind, Status: after.Status, PreviousStatus: before.Status,
			Entity: after.Entity, MutedUntil: after.MutedUntil, Note: by.Note})
	if err != nil {
		return Row{}, fmt.Errorf("record signal decision: %w", err)
	}
	return after, nil
}

// Decide is Store.Decide in a transaction of its own on db, with the wall clock.
func Decide(ctx context.Context, db pg.TxBeginner, id, what string, until *time.Time, by By) (Row, error) {
	var out Row
	err := pg.InTx(ctx, db, func(tx pgx.Tx) error {
		var err error
		out, err = New(nil).Decide(ctx, tx, id, what, until, by)
		return err
	})
	return out, err
}

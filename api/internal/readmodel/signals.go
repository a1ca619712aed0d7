package readmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Signal statuses.
var SignalStatuses = []string{"open", "acknowledged", "muted", "resolved"}

// Signal is a condition the scheduler raised about an entity.
type Signal struct {
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
	ResolvedAt     *time.Time      `json:"resolved_at"`
	ResolvedBy     *string         `json:"resolved_by"`
}

const signalColumns = `sg.id::text, sg.kind, sg.entity_id::text, e.slug, sg.check_id::text, sg.dedup_key, sg.severity, sg.status,
	sg.summary, sg.details, sg.occurrences, sg.first_seen, sg.last_seen, sg.muted_until, sg.acknowledged_by,
	sg.acknowledged_at, sg.resolved_at, sg.resolved_by`

const signalFrom = ` FROM signals sg LEFT JOIN entities e ON e.id = sg.entity_id`

func scanSignal(row pgx.Row) (Signal, error) {
	var s Signal
	err := row.Scan(&s.ID, &s.Kind, &s.EntityID, &s.Entity, &s.CheckID, &s.DedupKey, &s.Severity, &s.Status,
		&s.Summary, &s.Details, &s.Occurrences, &s.FirstSeen, &s.LastSeen, &s.MutedUntil, &s.AcknowledgedBy,
		&s.AcknowledgedAt, &s.ResolvedAt, &s.ResolvedBy)
	return s, err
}

// SignalFilter selects signals.
type SignalFilter struct {
	Statuses []string
	EntityID string
	Kind     string
	After    string
	Limit    int
}

// ListSignals returns a page of signals in id order.
func (r *Reader) ListSignals(ctx context.Context, f SignalFilter) (Page[Signal], error) {
	var a args
	where := "TRUE"
	if len(f.Statuses) > 0 {
		where += " AND sg.status = ANY(" + a.add(f.Statuses) + ")"
	}
	if f.EntityID != "" {
		where += " AND sg.entity_id = " + a.add(f.EntityID) + "::uuid"
	}
	if f.Kind != "" {
		where += " AND sg.kind = " + a.add(f.Kind)
	}
	if f.After != "" {
		where += " AND sg.id > " + a.add(f.After) + "::uuid"
	}
	rows, err := r.db.Query(ctx, `SELECT `+signalColumns+signalFrom+` WHERE `+where+` ORDER BY sg.id LIMIT `+a.add(f.Limit+1), a...)
	if err != nil {
		return Page[Signal]{}, fmt.Errorf("list signals: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Signal, error) { return scanSignal(row) })
	if err != nil {
		return Page[Signal]{}, fmt.Errorf("list signals: %w", err)
	}
	return pageOf(items, f.Limit, func(s Signal) string { return s.ID }), nil
}

// Actor says who decides and through which request, for the audit row and the event.
type Actor struct {
	Name          string
	Method        string
	Path          string
	CorrelationID string
}

// Signal decisions.
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

func (d decision) arg(by Actor, until *time.Time) any {
	if d.action == "signal.mute" {
		return until
	}
	return by.Name
}

var decisions = map[string]decision{
	DecisionAck: {
		from:   []string{"open", "muted"},
		set:    `status = 'acknowledged', acknowledged_by = $2, acknowledged_at = now(), muted_until = NULL`,
		action: "signal.ack", event: "signal.acknowledged",
	},
	DecisionMute: {
		from:   []string{"open", "acknowledged", "muted"},
		set:    `status = 'muted', muted_until = $2`,
		action: "signal.mute", event: "signal.muted",
	},
	DecisionResolve: {
		from:   []string{"open", "acknowledged", "muted"},
		set:    `status = 'resolved', resolved_by = $2, resolved_at = now(), muted_until = NULL`,
		action: "signal.resolve", event: "signal.resolved",
	},
}

// DecideSignal applies an operator's decision to a signal: acknowledge, mute until a time,
// or resolve. The scheduler raises signals and resolves them when their cause clears; the api
// only records these decisions. One conditional UPDATE from the allowed statuses (so two
// concurrent decisions cannot both apply), the audit row and the event commit together.
// Errors: ErrNotFound, ErrConflict (the signal is in a status the decision does not apply
// to, e.g. already resolved), *FieldError (mute without a future until).
func DecideSignal(ctx context.Context, db pg.TxBeginner, id, what string, until *time.Time, by Actor) (Signal, error) {
	d, ok := decisions[what]
	if !ok {
		return Signal{}, &FieldError{Field: "decision", Reason: fmt.Sprintf("unknown decision %q", what)}
	}
	if what == DecisionMute && (until == nil || !until.After(time.Now())) {
		return Signal{}, &FieldError{Field: "until", Reason: "mute needs an until time in the future"}
	}
	if !IsUUID(id) {
		return Signal{}, fmt.Errorf("%w: signal %q", ErrNotFound, id)
	}
	var out Signal
	err := pg.InTx(ctx, db, func(tx pgx.Tx) error {
		before, err := scanSignal(tx.QueryRow(ctx, `SELECT `+signalColumns+signalFrom+` WHERE sg.id = $1::uuid FOR UPDATE OF sg`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: signal %q", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("read signal: %w", err)
		}
		allowed := false
		for _, s := range d.from {
			allowed = allowed || s == before.Status
		}
		if !allowed {
			return fmt.Errorf("%w: signal %s is %s; %s applies to %v", ErrConflict, id, before.Status, what, d.from)
		}
		if _, err := tx.Exec(ctx, `UPDATE signals SET `+d.set+` WHERE id = $1::uuid`, id, d.arg(by, until)); err != nil {
			return fmt.Errorf("update signal: %w", err)
		}
		out, err = scanSignal(tx.QueryRow(ctx, `SELECT `+signalColumns+signalFrom+` WHERE sg.id = $1::uuid`, id))
		if err != nil {
			return fmt.Errorf("read signal: %w", err)
		}
		b, _ := json.Marshal(before)
		a, _ := json.Marshal(out)
		if _, err := tx.Exec(ctx, `INSERT INTO audit_log (actor, action, method, path, correlation_id, entity_id, before, after)
			VALUES ($1, $2, $3, $4, $5, $6::uuid, $7, $8)`,
			by.Name, d.action, by.Method, by.Path, by.CorrelationID, out.EntityID, b, a); err != nil {
			return fmt.Errorf("audit signal decision: %w", err)
		}
		ev := eventbus.Event{Type: d.event, CorrelationID: by.CorrelationID, Actor: by.Name}
		if out.EntityID != nil {
			ev.EntityID = *out.EntityID
		}
		payload := map[string]any{"signal_id": out.ID, "kind": out.Kind, "status": out.Status, "previous_status": before.Status,
			"entity": out.Entity, "muted_until": out.MutedUntil}
		if _, err := eventbus.Append(ctx, tx, ev, payload); err != nil {
			return err
		}
		return nil
	})
	return out, err
}

package readmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
)

const eventColumns = `ev.id, ev.at, ev.type, coalesce(ev.entity_id::text, ''), ev.correlation_id, ev.actor, ev.payload`

func scanEvent(row pgx.Row) (eventbus.Event, error) {
	var e eventbus.Event
	err := row.Scan(&e.ID, &e.At, &e.Type, &e.EntityID, &e.CorrelationID, &e.Actor, &e.Payload)
	return e, err
}

// TypeMatcher matches event types against a list of exact types and prefixes ending in "."
// ("health." matches health.changed and health.stale), as the stream and /events accept.
type TypeMatcher struct {
	exact  map[string]bool
	prefix []string
}

// NewTypeMatcher builds a matcher; no types matches everything.
func NewTypeMatcher(types []string) TypeMatcher {
	m := TypeMatcher{exact: map[string]bool{}}
	for _, t := range types {
		if strings.HasSuffix(t, ".") {
			m.prefix = append(m.prefix, t)
		} else if t != "" {
			m.exact[t] = true
		}
	}
	return m
}

// Empty reports whether the matcher accepts every type.
func (m TypeMatcher) Empty() bool { return len(m.exact) == 0 && len(m.prefix) == 0 }

// Match reports whether t is accepted.
func (m TypeMatcher) Match(t string) bool {
	if m.Empty() || m.exact[t] {
		return true
	}
	for _, p := range m.prefix {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// sql returns a WHERE fragment for the matcher.
func (m TypeMatcher) sql(a *args) string {
	var parts []string
	if len(m.exact) > 0 {
		exact := make([]string, 0, len(m.exact))
		for t := range m.exact {
			exact = append(exact, t)
		}
		parts = append(parts, "ev.type = ANY("+a.add(exact)+")")
	}
	for _, p := range m.prefix {
		parts = append(parts, "starts_with(ev.type, "+a.add(p)+")")
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// EventFilter selects outbox events.
type EventFilter struct {
	Types TypeMatcher
	// EntityID keeps only events about this entity.
	EntityID string
	// After returns events with a larger id, oldest first (catching up).
	After int64
	// Since, when set, keeps the events at or after that time.
	Since time.Time
	// Before, when set, returns events with a smaller id, newest first (a timeline).
	Before int64
	// Newest makes the order newest first; Before continues such a list.
	Newest bool
	Limit  int
}

// qEvents is the head of an event list (eventsSQL adds the filters and the page).
const qEvents = `SELECT ` + eventColumns + ` FROM events ev`

// eventsSQL builds the statement of Events.
func eventsSQL(f EventFilter) (string, args) {
	var a args
	var where []string
	if f.EntityID != "" {
		where = append(where, "ev.entity_id = "+a.add(f.EntityID)+"::uuid")
	}
	if !f.Types.Empty() {
		where = append(where, f.Types.sql(&a))
	}
	order := "ev.id"
	if f.Newest {
		order = "ev.id DESC"
		if f.Before > 0 {
			where = append(where, "ev.id < "+a.add(f.Before))
		}
	} else if f.After > 0 {
		where = append(where, "ev.id > "+a.add(f.After))
	}
	if !f.Since.IsZero() {
		where = append(where, "ev.at >= "+a.add(f.Since))
	}
	q := qEvents
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY " + order + " LIMIT " + a.add(f.Limit+1), a
}

// Events returns a page of outbox events. Oldest first (with After) is the catch-up order
// of /events?since=; newest first (Newest, with Before) is an entity's timeline.
func (r *Reader) Events(ctx context.Context, f EventFilter) (Page[eventbus.Event], error) {
	q, a := eventsSQL(f)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Page[eventbus.Event]{}, fmt.Errorf("list events: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (eventbus.Event, error) { return scanEvent(row) })
	if err != nil {
		return Page[eventbus.Event]{}, fmt.Errorf("list events: %w", err)
	}
	return pageOf(items, f.Limit, func(e eventbus.Event) string { return strconv.FormatInt(e.ID, 10) }), nil
}

// AuditEntry is one row of the audit log.
type AuditEntry struct {
	ID            int64           `json:"id"`
	At            time.Time       `json:"at"`
	Actor         string          `json:"actor"`
	Action        string          `json:"action"`
	Method        string          `json:"method"`
	Path          string          `json:"path"`
	CorrelationID string          `json:"correlation_id"`
	EntityID      *string         `json:"entity_id"`
	Entity        *string         `json:"entity"`
	Before        json.RawMessage `json:"before"`
	After         json.RawMessage `json:"after"`
}

// AuditFilter selects audit rows.
type AuditFilter struct {
	EntityID      string
	Actor         string
	Action        string
	CorrelationID string
	// Before continues a newest-first list.
	Before int64
	Limit  int
}

// qAudit is the head of an audit list (auditSQL adds the filters and the page).
const qAudit = `SELECT al.id, al.at, al.actor, al.action, al.method, al.path, al.correlation_id, al.entity_id::text, e.slug,
		coalesce(al.before, 'null'::jsonb), coalesce(al.after, 'null'::jsonb)
		FROM audit_log al LEFT JOIN entities e ON e.id = al.entity_id`

// auditSQL builds the statement of Audit.
func auditSQL(f AuditFilter) (string, args) {
	var a args
	var where []string
	if f.EntityID != "" {
		where = append(where, "al.entity_id = "+a.add(f.EntityID)+"::uuid")
	}
	if f.Actor != "" {
		where = append(where, "al.actor = "+a.add(f.Actor))
	}
	if f.Action != "" {
		where = append(where, "al.action = "+a.add(f.Action))
	}
	if f.CorrelationID != "" {
		where = append(where, "al.correlation_id = "+a.add(f.CorrelationID))
	}
	if f.Before > 0 {
		where = append(where, "al.id < "+a.add(f.Before))
	}
	q := qAudit
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY al.id DESC LIMIT " + a.add(f.Limit+1), a
}

// Audit returns a page of the audit log, newest first.
func (r *Reader) Audit(ctx context.Context, f AuditFilter) (Page[AuditEntry], error) {
	q, a := auditSQL(f)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Page[AuditEntry]{}, fmt.Errorf("list audit: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditEntry, error) {
		var x AuditEntry
		err := row.Scan(&x.ID, &x.At, &x.Actor, &x.Action, &x.Method, &x.Path, &x.CorrelationID, &x.EntityID, &x.Entity,
			&x.Before, &x.After)
		return x, err
	})
	if err != nil {
		return Page[AuditEntry]{}, fmt.Errorf("list audit: %w", err)
	}
	return pageOf(items, f.Limit, func(x AuditEntry) string { return strconv.FormatInt(x.ID, 10) }), nil
}

package readmodel

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/signals"
)

// Signal statuses.
var SignalStatuses = signals.Statuses

// Signal is a condition the scheduler raised about an entity. Its changes (raise, resolve,
// an operator's decision) are written by shared/signals alone; this package only reads.
type Signal = signals.Row

// SignalFilter selects signals.
type SignalFilter struct {
	Statuses []string
	EntityID string
	Kind     string
	After    string
	Limit    int
}

// qSignals is the head of the signal list (signalsSQL adds shared/signals' columns, the
// filters and the page).
const qSignals = `SELECT `

// signalsSQL builds the statement of ListSignals.
func signalsSQL(f SignalFilter) (string, args) {
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
	return qSignals + signals.Columns + signals.From + ` WHERE ` + where + ` ORDER BY sg.id LIMIT ` + a.add(f.Limit+1), a
}

// ListSignals returns a page of signals in id order.
func (r *Reader) ListSignals(ctx context.Context, f SignalFilter) (Page[Signal], error) {
	q, a := signalsSQL(f)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Page[Signal]{}, fmt.Errorf("list signals: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Signal, error) { return signals.Scan(row) })
	if err != nil {
		return Page[Signal]{}, fmt.Errorf("list signals: %w", err)
	}
	return pageOf(items, f.Limit, func(s Signal) string { return s.ID }), nil
}

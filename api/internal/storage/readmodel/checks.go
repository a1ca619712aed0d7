package readmodel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/ontology"
)

// CheckKinds are the kinds check_defs.kind allows (the ontology's monitoring kinds).
var CheckKinds = []string{ontology.KindSSHScript, ontology.KindHTTP, ontology.KindTCP, ontology.KindBackupFreshness,
	ontology.KindProxmoxGuest}

// CheckHealthStates are the health states of a check's result; a check that has not run yet
// is unknown.
var CheckHealthStates = []string{"up", "degraded", "down", "unknown"}

// Check is a check definition with its latest result and the slug and type of the entity it
// observes.
type Check struct {
	// ID and Slug are the definition's (check_defs); Slug is also its check entity's.
	ID   string `json:"id"`
	Slug string `json:"slug"`
	Kind string `json:"kind"`
	// Target and TargetType are the observed entity's slug and type.
	Target     string `json:"target"`
	TargetType string `json:"target_type"`
	// Config is what the runner reads (script, url, port, ...).
	Config          map[string]any `json:"config"`
	IntervalSeconds int            `json:"interval_seconds"`
	TimeoutSeconds  int            `json:"timeout_seconds"`
	// Enabled is false for a check no longer derived (kept, disabled).
	Enabled bool `json:"enabled"`
	// Source is derived or override.
	Source string `json:"source"`
	// Health, Reason and ErrorClass are the latest result's (check_results); a check that
	// has not run yet is unknown with no reason.
	Health     string `json:"health"`
	Reason     string `json:"reason"`
	ErrorClass string `json:"error_class"`
	// At is the latest run, Since when the current health began; both null before a run.
	At    *time.Time `json:"at"`
	Since *time.Time `json:"since"`
}

// CheckFilter selects checks. Empty fields do not filter.
type CheckFilter struct {
	// TargetID is the observed entity's id (resolve a slug with ResolveEntity).
	TargetID string
	Kinds    []string
	// Health matches the latest result's health; unknown also matches a check not run yet.
	Health []string
	// After is the check slug to continue after; "" starts at the beginning.
	After string
	Limit int
}

// qListChecks is the head of the check list (checksSQL adds the filters and the page).
const qListChecks = `SELECT d.id::text, d.slug, d.kind, t.slug, t.type, d.config, d.interval_seconds, d.timeout_seconds, d.enabled,
			d.source, coalesce(cr.health, 'unknown'), coalesce(cr.reason, ''), coalesce(cr.error_class, ''), cr.at, cr.since
		FROM check_defs d JOIN entities t ON t.id = d.target_id LEFT JOIN check_results cr ON cr.check_id = d.id`

// checksSQL builds the statement of ListChecks.
func checksSQL(f CheckFilter) (string, args) {
	var a args
	var where []string
	if f.TargetID != "" {
		where = append(where, "d.target_id = "+a.add(f.TargetID)+"::uuid")
	}
	if len(f.Kinds) > 0 {
		where = append(where, "d.kind = ANY("+a.add(f.Kinds)+")")
	}
	if len(f.Health) > 0 {
		where = append(where, "coalesce(cr.health, 'unknown') = ANY("+a.add(f.Health)+")")
	}
	if f.After != "" {
		where = append(where, "d.slug > "+a.add(f.After))
	}
	q := qListChecks
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY d.slug LIMIT " + a.add(f.Limit+1), a
}

// ListChecks returns a page of check definitions, each with its latest result, in check
// slug order (a check's slug starts with its target's type and name, so a target's checks
// are listed together).
func (r *Reader) ListChecks(ctx context.Context, f CheckFilter) (Page[Check], error) {
	q, a := checksSQL(f)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Page[Check]{}, fmt.Errorf("list checks: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Check, error) {
		var c Check
		err := row.Scan(&c.ID, &c.Slug, &c.Kind, &c.Target, &c.TargetType, &c.Config, &c.IntervalSeconds, &c.TimeoutSeconds,
			&c.Enabled, &c.Source, &c.Health, &c.Reason, &c.ErrorClass, &c.At, &c.Since)
		if c.Config == nil {
			c.Config = map[string]any{}
		}
		return c, err
	})
	if err != nil {
		return Page[Check]{}, fmt.Errorf("list checks: %w", err)
	}
	return pageOf(items, f.Limit, func(c Check) string { return c.Slug }), nil
}

package readmodel

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// HealthCounts counts monitored entities per health state; every state is always present.
type HealthCounts struct {
	Up       int `json:"up"`
	Degraded int `json:"degraded"`
	Down     int `json:"down"`
	Unknown  int `json:"unknown"`
	Stale    int `json:"stale"`
	// Maintenance counts entities in state maintenance, whatever their health: they keep
	// their checks and show their health, but are counted apart (S11) and open no incident.
	Maintenance int `json:"maintenance"`
}

func (c *HealthCounts) add(health string, n int) {
	switch health {
	case "up":
		c.Up += n
	case "degraded":
		c.Degraded += n
	case "down":
		c.Down += n
	case "unknown":
		c.Unknown += n
	case "stale":
		c.Stale += n
	case "maintenance":
		c.Maintenance += n
	}
}

// HealthEntity is one entity in the health summary.
type HealthEntity struct {
	Node
	Reason      string     `json:"reason"`
	LastCheckAt *time.Time `json:"last_check_at"`
	ChangedAt   time.Time  `json:"changed_at"`
}

// HealthSummary is the fleet rollup of G10.
type HealthSummary struct {
	Counts   HealthCounts   `json:"counts"`
	Entities []HealthEntity `json:"entities"`
}

// healthScope is the population of the rollup: entities with a status row (monitored),
// minus the checks' own bookkeeping entities (their health lands on what they monitor, so
// counting them would count every probe twice) and minus destroyed entities (noise from
// torn-down guests).
const healthScope = `FROM entity_status s JOIN entities e ON e.id = s.entity_id
	WHERE NOT (e.type = ANY($1)) AND e.state <> 'destroyed'`

// The health summary's statements: the counts per health, and the entities worst first (all
// of them, or those in the health states $2).
const (
	qHealthCounts = `SELECT CASE WHEN e.state = 'maintenance' THEN 'maintenance' ELSE s.health END AS h, count(*) ` +
		healthScope + ` GROUP BY h`
	qHealthEntities   = qHealthEntitiesHead + healthOrder
	qHealthEntitiesIn = qHealthEntitiesHead + ` AND s.health = ANY($2)` + healthOrder

	qHealthEntitiesHead = `SELECT e.id::text, e.slug, e.type, e.name, e.state, s.health, s.reason, s.last_check_at, s.changed_at ` +
		healthScope
	healthOrder = ` ORDER BY array_position(ARRAY['down','degraded','stale','unknown','up'], s.health), e.slug`
)

// HealthSummary counts the fleet's health and lists the entities in the requested states
// (all monitored entities when health is empty), worst first, then by slug.
func (r *Reader) HealthSummary(ctx context.Context, health []string) (HealthSummary, error) {
	checks := r.checkTypes()
	out := HealthSummary{Entities: []HealthEntity{}}
	rows, err := r.db.Query(ctx, qHealthCounts, checks)
	if err != nil {
		return out, fmt.Errorf("health counts: %w", err)
	}
	for rows.Next() {
		var h string
		var n int
		if err := rows.Scan(&h, &n); err != nil {
			rows.Close()
			return out, fmt.Errorf("health counts: %w", err)
		}
		out.Counts.add(h, n)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("health counts: %w", err)
	}
	q, qargs := qHealthEntities, []any{checks}
	if len(health) > 0 {
		q, qargs = qHealthEntitiesIn, append(qargs, health)
	}
	rows, err = r.db.Query(ctx, q, qargs...)
	if err != nil {
		return out, fmt.Errorf("health entities: %w", err)
	}
	ents, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (HealthEntity, error) {
		var h HealthEntity
		err := row.Scan(&h.ID, &h.Slug, &h.Type, &h.Name, &h.State, &h.Health, &h.Reason, &h.LastCheckAt, &h.ChangedAt)
		return h, err
	})
	if err != nil {
		return out, fmt.Errorf("health entities: %w", err)
	}
	if ents != nil {
		out.Entities = ents
	}
	return out, nil
}

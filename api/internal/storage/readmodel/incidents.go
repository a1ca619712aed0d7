package readmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
)

// Incident is a health problem grouped by its root cause (scheduler/internal/incidents): a
// signal of kind incident with the entities in it. The scheduler writes it; this package
// reads.
type Incident struct {
	ID             string     `json:"id"`
	Status         string     `json:"status"`
	Severity       string     `json:"severity"`
	Summary        string     `json:"summary"`
	RootID         string     `json:"root_id"`
	Root           string     `json:"root"`
	RootType       string     `json:"root_type"`
	RootHealth     string     `json:"root_health"`
	RootReason     string     `json:"root_reason"`
	AffectedCount  int        `json:"affected_count"`
	OpenedAt       time.Time  `json:"opened_at"`
	LastSeen       time.Time  `json:"last_seen"`
	ResolvedAt     *time.Time `json:"resolved_at"`
	AcknowledgedBy *string    `json:"acknowledged_by"`
	AcknowledgedAt *time.Time `json:"acknowledged_at"`
	AckNote        string     `json:"ack_note"`
	MutedUntil     *time.Time `json:"muted_until"`
	// Affected is filled by GetIncident only.
	Affected []IncidentMember `json:"affected,omitempty"`
}

// IncidentMember is an entity affected through an incident's root, with its own health and
// reason as last evaluated.
type IncidentMember struct {
	EntityID string     `json:"entity_id"`
	Entity   string     `json:"entity"`
	Type     string     `json:"type"`
	Health   string     `json:"health"`
	Reason   string     `json:"reason"`
	JoinedAt time.Time  `json:"joined_at"`
	LeftAt   *time.Time `json:"left_at"`
	// MovedTo is the node a guest runs on now when it left because it moved (HA recovered
	// it, or it was migrated, off the root's node); nil otherwise.
	MovedTo *string `json:"moved_to"`
}

// IncidentFilter selects incidents: by status ("open" means unresolved: open, acknowledged
// or muted; "resolved"; empty: all) and by an entity that is their root or affected.
type IncidentFilter struct {
	Status   string
	EntityID string
	Limit    int
}

// An open incident counts its current members; a resolved one everyone it held.
const qIncidents = `
SELECT sg.id::text, sg.status, sg.severity, sg.summary, e.id::text, e.slug, e.type,
       coalesce(es.health, 'unknown'), coalesce(es.reason, ''),
       (SELECT count(*) FROM incident_members m WHERE m.incident_id = sg.id AND m.role = 'affected'
            AND (m.left_at IS NULL OR sg.status = 'resolved')),
       sg.first_seen, sg.last_seen, sg.resolved_at, sg.acknowledged_by, sg.acknowledged_at, sg.ack_note, sg.muted_until
FROM signals sg JOIN entities e ON e.id = sg.entity_id LEFT JOIN entity_status es ON es.entity_id = e.id
WHERE sg.kind = 'incident'`

func scanIncident(row pgx.Row) (Incident, error) {
	var in Incident
	err := row.Scan(&in.ID, &in.Status, &in.Severity, &in.Summary, &in.RootID, &in.Root, &in.RootType, &in.RootHealth,
		&in.RootReason, &in.AffectedCount, &in.OpenedAt, &in.LastSeen, &in.ResolvedAt, &in.AcknowledgedBy,
		&in.AcknowledgedAt, &in.AckNote, &in.MutedUntil)
	return in, err
}

// incidentsSQL builds the statement of ListIncidents.
func incidentsSQL(f IncidentFilter) (string, args) {
	var a args
	q := qIncidents
	switch f.Status {
	case "open":
		q += ` AND sg.status <> 'resolved'`
	case "resolved":
		q += ` AND sg.status = 'resolved'`
	}
	if f.EntityID != "" {
		p := a.add(f.EntityID)
		q += ` AND (sg.entity_id = ` + p + `::uuid OR EXISTS (SELECT 1 FROM incident_members m WHERE m.incident_id = sg.id AND m.entity_id = ` + p + `::uuid))`
	}
	return q + ` ORDER BY (sg.status = 'resolved'), sg.last_seen DESC, sg.id LIMIT ` + a.add(f.Limit), a
}

// ListIncidents returns incidents, unresolved first, then the most recent.
func (r *Reader) ListIncidents(ctx context.Context, f IncidentFilter) ([]Incident, error) {
	q, a := incidentsSQL(f)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return nil, fmt.Errorf("list incidents: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Incident, error) { return scanIncident(row) })
	if err != nil {
		return nil, fmt.Errorf("list incidents: %w", err)
	}
	if out == nil {
		out = []Incident{}
	}
	return out, nil
}

// qIncident reads the incident $1; qIncidentMembers the entities affected through it.
const (
	qIncident        = qIncidents + ` AND sg.id = $1::uuid`
	qIncidentMembers = `
SELECT m.entity_id::text, e.slug, e.type, m.health, m.reason, m.joined_at, m.left_at, m.moved_to
FROM incident_members m JOIN entities e ON e.id = m.entity_id
WHERE m.incident_id = $1::uuid AND m.role = 'affected'
ORDER BY (m.left_at IS NOT NULL), e.slug`
)

// GetIncident returns one incident with the entities affected through it (current ones
// first; a resolved incident keeps everyone it held).
func (r *Reader) GetIncident(ctx context.Context, id string) (Incident, error) {
	in, err := scanIncident(r.db.QueryRow(ctx, qIncident, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Incident{}, fmt.Errorf("%w: incident %q", apierr.ErrNotFound, id)
	}
	if err != nil {
		return Incident{}, fmt.Errorf("read incident: %w", err)
	}
	rows, err := r.db.Query(ctx, qIncidentMembers, id)
	if err != nil {
		return Incident{}, fmt.Errorf("read incident members: %w", err)
	}
	in.Affected, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (IncidentMember, error) {
		var m IncidentMember
		err := row.Scan(&m.EntityID, &m.Entity, &m.Type, &m.Health, &m.Reason, &m.JoinedAt, &m.LeftAt, &m.MovedTo)
		return m, err
	})
	if err != nil {
		return Incident{}, fmt.Errorf("read incident members: %w", err)
	}
	if in.Affected == nil {
		in.Affected = []IncidentMember{}
	}
	return in, nil
}

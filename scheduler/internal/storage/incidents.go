package storage

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// qIncidentNodes reads the entities with a problem, and the roots of unresolved incidents
// whatever their health (a root's recovery resolves its incident).
const qIncidentNodes = `
SELECT e.id::text, e.slug, e.type, e.state, e.attributes->'tags', e.attributes->'failure_threshold',
       e.attributes->'success_threshold', es.health, es.reason, es.changed_at
FROM entity_status es JOIN entities e ON e.id = es.entity_id
WHERE es.health IN ('down', 'degraded', 'unknown', 'stale') AND e.type <> 'check' AND e.state NOT IN ('destroyed', 'deprecated')
UNION
SELECT e.id::text, e.slug, e.type, e.state, e.attributes->'tags', e.attributes->'failure_threshold',
       e.attributes->'success_threshold', coalesce(es.health, 'unknown'), coalesce(es.reason, ''),
       coalesce(es.changed_at, e.created_at)
FROM signals sg JOIN entities e ON e.id = sg.entity_id LEFT JOIN entity_status es ON es.entity_id = e.id
WHERE sg.kind = $1 AND sg.status <> 'resolved'`

// qIncidentChecks, qDependencyEdges and qIncidentMembers take arrays of ids whose length varies from run to
// run: they run unprepared (pgx.QueryExecModeExec), planned for the array at hand. A
// cached statement's generic plan, which Postgres switches to after five executions, scans
// every relationship (14 ms instead of 1 on the 20 × 100 fleet).

// qIncidentChecks reads the enabled checks of those entities with their streaks.
const qIncidentChecks = `
SELECT cr.target_id::text, cd.kind, cr.health, cr.streak, cd.interval_seconds, cr.at
FROM check_results cr JOIN check_defs cd ON cd.id = cr.check_id AND cd.enabled AND cd.target_id = cr.target_id
WHERE cr.target_id = ANY($1::text[]::uuid[])`

// qDependencyEdges reads the current dependency edges between those entities.
const qDependencyEdges = `
SELECT type, source_id::text, target_id::text FROM relationships
WHERE valid_to IS NULL AND (type = ANY($2) OR type = ANY($3))
  AND source_id = ANY($1::text[]::uuid[]) AND target_id = ANY($1::text[]::uuid[])`

const qOpenIncidents = `
SELECT sg.id::text, sg.dedup_key, sg.entity_id::text, sg.status, sg.severity, sg.first_seen
FROM signals sg WHERE sg.kind = $1 AND sg.status <> 'resolved' AND sg.entity_id IS NOT NULL ORDER BY sg.first_seen`

const qIncidentMembers = `
SELECT m.incident_id::text, m.entity_id::text, e.slug, m.role, m.health, m.reason
FROM incident_members m JOIN entities e ON e.id = m.entity_id
WHERE m.left_at IS NULL AND m.incident_id = ANY($1::text[]::uuid[])`

// qReleasedMembers reads when each of these entities last stopped being affected through an
// incident's root ($2, now, while it still is): its failure was explained by that root, and
// its streak counts the root's outage.
const qReleasedMembers = `
SELECT m.entity_id::text, max(coalesce(m.left_at, $2))
FROM incident_members m
WHERE m.role = 'affected' AND m.entity_id = ANY($1::text[]::uuid[])
GROUP BY m.entity_id`

// IncidentNode is a row of qIncidentNodes: tags and the thresholds are raw JSON.
type IncidentNode struct {
	ID, Slug, Type, State      string
	Tags, FailureTh, SuccessTh []byte
	Health, Reason             string
	ChangedAt                  time.Time
}

// IncidentNodes reads the entities with a problem, and the roots of unresolved incidents of
// kind whatever their health.
func (s *Store) IncidentNodes(ctx context.Context, kind string) ([]IncidentNode, error) {
	rows, err := s.db.Query(ctx, qIncidentNodes, kind)
	if err != nil {
		return nil, err
	}
	var out []IncidentNode
	for rows.Next() {
		var n IncidentNode
		if err := rows.Scan(&n.ID, &n.Slug, &n.Type, &n.State, &n.Tags, &n.FailureTh, &n.SuccessTh, &n.Health, &n.Reason, &n.ChangedAt); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// IncidentCheck is an enabled check of a problem entity, with its streak.
type IncidentCheck struct {
	Target, Kind, Health string
	Streak, IntervalSec  int
	At                   time.Time
}

// IncidentChecks reads the enabled checks of the entities ids (unprepared, see above).
func (s *Store) IncidentChecks(ctx context.Context, ids []string) ([]IncidentCheck, error) {
	rows, err := s.db.Query(ctx, qIncidentChecks, pgx.QueryExecModeExec, ids)
	if err != nil {
		return nil, err
	}
	var out []IncidentCheck
	var c IncidentCheck
	_, err = pgx.ForEachRow(rows, []any{&c.Target, &c.Kind, &c.Health, &c.Streak, &c.IntervalSec, &c.At}, func() error {
		out = append(out, c)
		return nil
	})
	return out, err
}

// ReleasedMembers reads when each of the entities ids last stopped being affected through
// an incident's root (now while it still is); unprepared, see above.
func (s *Store) ReleasedMembers(ctx context.Context, ids []string, now time.Time) (map[string]time.Time, error) {
	rows, err := s.db.Query(ctx, qReleasedMembers, pgx.QueryExecModeExec, ids, now)
	if err != nil {
		return nil, err
	}
	released := map[string]time.Time{}
	var target string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&target, &at}, func() error {
		released[target] = at
		return nil
	})
	return released, err
}

// DependencyEdges reads the current edges of the types forward or reverse between the
// entities ids (unprepared, see above).
func (s *Store) DependencyEdges(ctx context.Context, ids, forward, reverse []string) ([]Edge, error) {
	rows, err := s.db.Query(ctx, qDependencyEdges, pgx.QueryExecModeExec, ids, forward, reverse)
	if err != nil {
		return nil, err
	}
	var out []Edge
	var e Edge
	_, err = pgx.ForEachRow(rows, []any{&e.Type, &e.Source, &e.Target}, func() error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// OpenIncident is an unresolved incident signal.
type OpenIncident struct {
	ID, DedupKey, RootID, Status, Severity string
	OpenedAt                               time.Time
}

// OpenIncidents reads the unresolved signals of kind that are about an entity, oldest first.
func (s *Store) OpenIncidents(ctx context.Context, kind string) ([]OpenIncident, error) {
	rows, err := s.db.Query(ctx, qOpenIncidents, kind)
	if err != nil {
		return nil, err
	}
	var out []OpenIncident
	var in OpenIncident
	_, err = pgx.ForEachRow(rows, []any{&in.ID, &in.DedupKey, &in.RootID, &in.Status, &in.Severity, &in.OpenedAt}, func() error {
		out = append(out, in)
		return nil
	})
	return out, err
}

// IncidentMember is a current member row of an incident.
type IncidentMember struct {
	IncidentID, EntityID, Slug, Role, Health, Reason string
}

// IncidentMembers reads the current members of the incidents ids (unprepared, see above).
func (s *Store) IncidentMembers(ctx context.Context, ids []string) ([]IncidentMember, error) {
	rows, err := s.db.Query(ctx, qIncidentMembers, pgx.QueryExecModeExec, ids)
	if err != nil {
		return nil, err
	}
	var out []IncidentMember
	var m IncidentMember
	_, err = pgx.ForEachRow(rows, []any{&m.IncidentID, &m.EntityID, &m.Slug, &m.Role, &m.Health, &m.Reason}, func() error {
		out = append(out, m)
		return nil
	})
	return out, err
}

const qCloseIncidentMembers = `UPDATE incident_members SET left_at = $2 WHERE incident_id = $1 AND left_at IS NULL`

// CloseIncidentMembers marks every current member of incident id as having left at at.
func (s *Store) CloseIncidentMembers(ctx context.Context, id string, at time.Time) error {
	_, err := s.db.Exec(ctx, qCloseIncidentMembers, id, at)
	return err
}

const qUpsertIncidentMembers = `
INSERT INTO incident_members (incident_id, entity_id, role, health, reason, joined_at)
SELECT $1::uuid, u.e, u.r, u.h, u.rs, $2 FROM unnest($3::text[]::uuid[], $4::text[], $5::text[], $6::text[]) AS u(e, r, h, rs)
ON CONFLICT (incident_id, entity_id) DO UPDATE SET role = EXCLUDED.role, health = EXCLUDED.health, reason = EXCLUDED.reason,
    joined_at = CASE WHEN incident_members.left_at IS NULL THEN incident_members.joined_at ELSE EXCLUDED.joined_at END,
    left_at = NULL, moved_to = NULL
WHERE incident_members.left_at IS NOT NULL OR incident_members.role <> EXCLUDED.role
   OR incident_members.health <> EXCLUDED.health OR incident_members.reason <> EXCLUDED.reason`

const qLeaveIncidentMembers = `UPDATE incident_members SET left_at = $2 WHERE incident_id = $1::uuid AND left_at IS NULL AND entity_id <> ALL($3::text[]::uuid[])`

// WriteIncidentMembers makes incident id's current rows exactly ids (with their roles,
// healths and reasons, index by index), in one batch: new ones join at at, known ones take
// the given health and reason, the others leave at at.
func (s *Store) WriteIncidentMembers(ctx context.Context, id string, at time.Time, ids, roles, healths, reasons []string) error {
	b := &pgx.Batch{}
	b.Queue(qUpsertIncidentMembers, id, at, ids, roles, healths, reasons)
	b.Queue(qLeaveIncidentMembers, id, at, ids)
	return s.db.SendBatch(ctx, b).Close()
}

package storage

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/remote"
)

// qClusterPeers reads the clusters the machine $1 (a slug) is a current member of, and every
// live member of each, the machine itself included: where a check asks for a guest that is
// not on the node the graph says (scheduler/internal/checkrun, moved.go).
const qClusterPeers = `
SELECT c.slug, m.id::text, m.slug, m.type, m.name, m.attributes
FROM entities h
JOIN relationships r ON r.source_id = h.id AND r.type = 'member-of' AND r.valid_to IS NULL
JOIN entities c ON c.id = r.target_id AND c.type = 'cluster' AND c.state <> 'destroyed'
JOIN relationships rm ON rm.target_id = c.id AND rm.type = 'member-of' AND rm.valid_to IS NULL
JOIN entities m ON m.id = rm.source_id AND m.state NOT IN ('destroyed', 'planned')
WHERE h.slug = $1
ORDER BY c.slug, m.slug`

// ClusterPeers is a cluster and its members.
type ClusterPeers struct {
	Cluster string // the cluster entity's slug
	Members []remote.Entity
}

// ClusterPeersOf reads the clusters the machine slug is a member of, each with its live
// members (the machine included), by cluster slug; none when it is in no cluster.
func (s *Store) ClusterPeersOf(ctx context.Context, slug string) ([]ClusterPeers, error) {
	rows, err := s.db.Query(ctx, qClusterPeers, slug)
	if err != nil {
		return nil, err
	}
	var out []ClusterPeers
	var cluster string
	var e remote.Entity
	_, err = pgx.ForEachRow(rows, []any{&cluster, &e.ID, &e.Slug, &e.Type, &e.Name, &e.Attributes}, func() error {
		if e.Attributes == nil {
			e.Attributes = map[string]any{}
		}
		if len(out) == 0 || out[len(out)-1].Cluster != cluster {
			out = append(out, ClusterPeers{Cluster: cluster})
		}
		out[len(out)-1].Members = append(out[len(out)-1].Members, e)
		e = remote.Entity{}
		return nil
	})
	return out, err
}

// qMovedGuests finds which of the entities $1 moved off the machine $3 (slug $2): a check of
// the guest itself found it running on another node of its cluster (its result's summary
// carries moved.guest = the entity, moved.from = the machine), or the graph already followed
// (its hosts edge from the machine closed, one from another machine open). Unprepared: the
// array's length varies (see qIncidentChecks).
const qMovedGuests = `
SELECT DISTINCT ON (x.id) x.id, x.moved_to FROM (
    SELECT cr.target_id::text AS id, cr.summary->'moved'->>'to' AS moved_to, 0 AS pref, cr.at
    FROM check_results cr JOIN entities g ON g.id = cr.target_id
    JOIN check_defs cd ON cd.id = cr.check_id AND cd.enabled
    WHERE cr.target_id = ANY($1::text[]::uuid[]) AND cr.summary->'moved'->>'from' = $2
      AND cr.summary->'moved'->>'guest' = g.slug AND coalesce(cr.summary->'moved'->>'to', '') <> ''
    UNION ALL
    SELECT r.target_id::text, h.slug, 1, r.valid_from
    FROM relationships r JOIN entities h ON h.id = r.source_id
    WHERE r.type = 'hosts' AND r.valid_to IS NULL AND r.target_id = ANY($1::text[]::uuid[]) AND r.source_id <> $3::uuid
      AND EXISTS (SELECT 1 FROM relationships o WHERE o.type = 'hosts' AND o.source_id = $3::uuid
                  AND o.target_id = r.target_id AND o.valid_to IS NOT NULL)
) x
ORDER BY x.id, x.pref, x.at DESC`

// MovedGuests returns, of the entities ids, those that moved off the machine fromID (slug
// from) and the slug of the machine each runs on now (unprepared, see above).
func (s *Store) MovedGuests(ctx context.Context, ids []string, from, fromID string) (map[string]string, error) {
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, qMovedGuests, pgx.QueryExecModeExec, ids, from, fromID)
	if err != nil {
		return nil, err
	}
	var id, to string
	_, err = pgx.ForEachRow(rows, []any{&id, &to}, func() error {
		out[id] = to
		return nil
	})
	return out, err
}

// qMarkMoved records on the rows of members that left incident $1 where each went ($3, by
// entity $2) and the health and reason they have there.
const qMarkMoved = `
UPDATE incident_members m SET moved_to = u.t, health = u.h, reason = u.r
FROM unnest($2::text[]::uuid[], $3::text[], $4::text[], $5::text[]) AS u(e, t, h, r)
WHERE m.incident_id = $1::uuid AND m.entity_id = u.e AND m.left_at IS NOT NULL`

// MarkMoved records that the entities ids left incident id by moving to the machines to
// (index by index), with the health and reason they have there.
func (s *Store) MarkMoved(ctx context.Context, id string, ids, to, healths, reasons []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := s.db.Exec(ctx, qMarkMoved, id, ids, to, healths, reasons)
	return err
}

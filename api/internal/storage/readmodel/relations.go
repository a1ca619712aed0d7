package readmodel

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// Directions of RelationsFilter.
const (
	DirectionOut  = "out"
	DirectionIn   = "in"
	DirectionBoth = "both"
)

// RelationsFilter selects the edges of one entity.
type RelationsFilter struct {
	// Types keeps only these relationship types (the noisy targets/involves edges of
	// executions can be left out this way); empty keeps all.
	Types []string
	// Direction is out (entity is the source), in (entity is the target) or both.
	Direction string
	// IncludeEnded also returns edges whose valid_to is set.
	IncludeEnded bool
	After        string
	Limit        int
}

// qRelations is the head of an entity's edge list (relationsSQL adds the filters).
const qRelations = `SELECT ` + storage.RelationshipColumns + storage.RelationshipFrom + `WHERE `

// relationsSQL builds the statement of Relations.
func relationsSQL(entityID string, f RelationsFilter) (string, args) {
	var a args
	id := a.add(entityID)
	var where []string
	switch f.Direction {
	case DirectionOut:
		where = append(where, "r.source_id = "+id+"::uuid")
	case DirectionIn:
		where = append(where, "r.target_id = "+id+"::uuid")
	default:
		where = append(where, "(r.source_id = "+id+"::uuid OR r.target_id = "+id+"::uuid)")
	}
	if len(f.Types) > 0 {
		where = append(where, "r.type = ANY("+a.add(f.Types)+")")
	}
	if !f.IncludeEnded {
		where = append(where, "r.valid_to IS NULL")
	}
	if f.After != "" {
		where = append(where, "r.id > "+a.add(f.After)+"::uuid")
	}
	return qRelations + strings.Join(where, " AND ") + ` ORDER BY r.id LIMIT ` + a.add(f.Limit+1), a
}

// Relations returns a page of the edges of the entity with id entityID, in id order.
func (r *Reader) Relations(ctx context.Context, entityID string, f RelationsFilter) (Page[storage.Relationship], error) {
	q, a := relationsSQL(entityID, f)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Page[storage.Relationship]{}, fmt.Errorf("list relations: %w", err)
	}
	items, err := pgx.CollectRows(rows, storage.CollectRelationship)
	if err != nil {
		return Page[storage.Relationship]{}, fmt.Errorf("list relations: %w", err)
	}
	return pageOf(items, f.Limit, func(x storage.Relationship) string { return x.ID }), nil
}

// Node is an entity in a graph view, and the summary of an entity in the other reads that
// list many (a blast radius, the health summary) without their attributes.
type Node struct {
	ID     string `json:"id"`
	Slug   string `json:"slug"`
	Type   string `json:"type"`
	Name   string `json:"name"`
	State  string `json:"state"`
	Health string `json:"health"`
}

// Edge is a current relationship in a graph view.
type Edge struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Source string `json:"source"`
	Target string `json:"target"`
}

// Graph is a snapshot of nodes and the current edges between them.
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
	// Truncated is true when more nodes matched than the limit allowed.
	Truncated bool `json:"truncated"`
}

// GraphFilter selects a graph view.
type GraphFilter struct {
	// Types keeps nodes of these (expanded) entity types; empty keeps all.
	Types []string
	// RelTypes keeps edges of these relationship types; empty keeps all.
	RelTypes []string
	// IncludeDestroyed keeps destroyed entities, which are left out by default.
	IncludeDestroyed bool
	// Limit caps the nodes, in slug order.
	Limit int
}

// qGraphNodes and qGraphEdges are the heads of a graph view's two statements
// (graphNodesSQL and graphEdgesSQL add the filters).
const (
	qGraphNodes = `SELECT e.id::text, e.slug, e.type, e.name, e.state, coalesce(s.health, '')
		FROM entities e LEFT JOIN entity_status s ON s.entity_id = e.id`
	qGraphEdges = `SELECT r.id::text, r.type, se.slug, te.slug FROM relationships r
		JOIN entities se ON se.id = r.source_id JOIN entities te ON te.id = r.target_id
		WHERE r.valid_to IS NULL AND r.source_id = ANY($1::uuid[]) AND r.target_id = ANY($2::uuid[])`
)

// graphNodesSQL builds the node statement of GraphView.
func graphNodesSQL(f GraphFilter) (string, args) {
	var a args
	var where []string
	if len(f.Types) > 0 {
		where = append(where, "e.type = ANY("+a.add(f.Types)+")")
	}
	if !f.IncludeDestroyed {
		where = append(where, "e.state <> 'destroyed'")
	}
	q := qGraphNodes
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY e.slug LIMIT " + a.add(f.Limit+1), a
}

// graphEdgesSQL builds the edge statement of GraphView: the current edges between ids.
func graphEdgesSQL(ids []string, relTypes []string) (string, args) {
	b := args{ids, ids}
	eq := qGraphEdges
	if len(relTypes) > 0 {
		eq += " AND r.type = ANY(" + b.add(relTypes) + ")"
	}
	return eq + " ORDER BY r.id", b
}

// GraphView returns nodes matching the filter and the current edges whose both ends are
// among them.
func (r *Reader) GraphView(ctx context.Context, f GraphFilter) (Graph, error) {
	q, a := graphNodesSQL(f)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Graph{}, fmt.Errorf("graph nodes: %w", err)
	}
	nodes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Node, error) {
		var n Node
		err := row.Scan(&n.ID, &n.Slug, &n.Type, &n.Name, &n.State, &n.Health)
		return n, err
	})
	if err != nil {
		return Graph{}, fmt.Errorf("graph nodes: %w", err)
	}
	g := Graph{Nodes: nodes, Edges: []Edge{}}
	if len(nodes) > f.Limit {
		g.Nodes, g.Truncated = nodes[:f.Limit], true
	}
	if g.Nodes == nil {
		g.Nodes = []Node{}
	}
	ids := make([]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[i] = n.ID
	}
	eq, b := graphEdgesSQL(ids, f.RelTypes)
	rows, err = r.db.Query(ctx, eq, b...)
	if err != nil {
		return Graph{}, fmt.Errorf("graph edges: %w", err)
	}
	edges, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Edge, error) {
		var x Edge
		err := row.Scan(&x.ID, &x.Type, &x.Source, &x.Target)
		return x, err
	})
	if err != nil {
		return Graph{}, fmt.Errorf("graph edges: %w", err)
	}
	if edges != nil {
		g.Edges = edges
	}
	return g, nil
}

// Blast radius walks the graph's dependency edges (shared/ontology.DependsForward and
// DependsReverse), the same ones incidents are grouped by.
var (
	// BlastForward are edge types whose source depends on their target.
	BlastForward = ontology.DependsForward
	// BlastReverse are edge types whose target depends on their source.
	BlastReverse = ontology.DependsReverse
)

// Affected is an entity in a blast radius: a summary (the radius of a busy host can hold
// thousands of entities; their attributes are one GET away), with the fewest dependency
// hops from the root.
type Affected struct {
	Node
	Depth int `json:"depth"`
}

// qBlastRadius is BlastRadius's breadth-first walk ($1 root, $2 forward and $3 reverse edge
// types, $4 the depth).
const qBlastRadius = `WITH RECURSIVE bfs(depth, frontier, seen) AS (
			SELECT 0, ARRAY[$1::uuid], ARRAY[$1::uuid]
		UNION ALL
			SELECT b.depth + 1, n.next, b.seen || n.next
			FROM bfs b, LATERAL (
				SELECT array_agg(DISTINCT x.d) AS next FROM (
					SELECT r.source_id AS d FROM relationships r
					WHERE r.target_id = ANY(b.frontier) AND r.valid_to IS NULL AND r.type = ANY($2)
					UNION ALL
					SELECT r.target_id FROM relationships r
					WHERE r.source_id = ANY(b.frontier) AND r.valid_to IS NULL AND r.type = ANY($3)
				) x WHERE x.d <> ALL(b.seen)
			) n
			WHERE b.depth < $4 AND n.next IS NOT NULL
		), hit AS (
			SELECT unnest(frontier) AS id, depth FROM bfs WHERE depth > 0
		)
		SELECT e.id::text, e.slug, e.type, e.name, e.state, coalesce(s.health, ''), h.depth
		FROM hit h JOIN entities e ON e.id = h.id LEFT JOIN entity_status s ON s.entity_id = e.id
		ORDER BY h.depth, e.slug`

// BlastRadius returns everything that transitively depends on the entity with id rootID, up
// to maxDepth hops, nearest first. One recursive query doing a breadth-first walk: each
// step carries the frontier and the set already seen, so every entity is expanded once, at
// its smallest depth, and cycles end the walk instead of repeating it (a per-row recursion
// re-expands an entity once for every depth it is reached at). It runs as an unnamed
// statement so that every call is planned for its root. The api walks in memory instead
// (api/internal/topology, then AffectedEntities); this query answers when the graph is too
// large for that, and is the reference the index is tested against.
func (r *Reader) BlastRadius(ctx context.Context, rootID string, maxDepth int) ([]Affected, error) {
	rows, err := r.db.Query(ctx, qBlastRadius, pgx.QueryExecModeExec, rootID, BlastForward, BlastReverse, maxDepth)
	if err != nil {
		return nil, fmt.Errorf("blast radius: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Affected, error) {
		var x Affected
		err := row.Scan(&x.ID, &x.Slug, &x.Type, &x.Name, &x.State, &x.Health, &x.Depth)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("blast radius: %w", err)
	}
	if out == nil {
		out = []Affected{}
	}
	return out, nil
}

// AffectedEntities returns the summaries of a blast radius walked elsewhere (the api's
// in-memory topology index): ids[i] was first reached after depths[i] hops. The order is
// BlastRadius's, depth then slug, sorted here so that slugs compare in the database's
// collation exactly as the recursive query orders them. Ids without an entity row are left
// out, as the recursive query's join leaves them out.
//
// It also returns topology_version.changes, read in the same round trip just before the
// rows: a caller that walked an in-memory copy of the edges at version v knows the walk
// missed nothing committed before this call when the returned version is at most v.
func (r *Reader) AffectedEntities(ctx context.Context, ids [][16]byte, depths []int32) ([]Affected, int64, error) {
	_, _, items, version, err := r.affected(ctx, "", ids, depths)
	return items, version, err
}

// RootAndAffected is AffectedEntities with the root entity read in the same round trip, for
// a caller that already knows the root's id (a blast radius whose slug it resolved before:
// slugs and ids never change). found is false when no entity has that id any more.
func (r *Reader) RootAndAffected(ctx context.Context, rootID string, ids [][16]byte, depths []int32) (root storage.Entity, found bool, items []Affected, version int64, err error) {
	return r.affected(ctx, rootID, ids, depths)
}

// qTopologyVersion reads the count of topology changes (topology_version.changes).
const qTopologyVersion = `SELECT changes FROM topology_version`

// qAffected reads the summaries of the ids $1 reached after $2 hops. The id = ANY filter is
// what the plan needs: with only the join to unnest, the planner hashes all of entities (a
// sequential scan) instead of looking ids up by key.
const qAffected = `SELECT e.id::text, e.slug, e.type, e.name, e.state, coalesce(s.health, ''), h.depth
			FROM entities e JOIN unnest($1::uuid[], $2::int[]) AS h(id, depth) ON h.id = e.id
			LEFT JOIN entity_status s ON s.entity_id = e.id
			WHERE e.id = ANY($1::uuid[])
			ORDER BY h.depth, e.slug`

// affected sends the root's read (when rootID is set), the topology version and the
// affected rows as one batch.
func (r *Reader) affected(ctx context.Context, rootID string, ids [][16]byte, depths []int32) (root storage.Entity, found bool, out []Affected, version int64, err error) {
	if len(ids) != len(depths) {
		return storage.Entity{}, false, nil, 0, fmt.Errorf("affected entities: %d ids but %d depths", len(ids), len(depths))
	}
	b := &pgx.Batch{}
	if rootID != "" {
		b.Queue(storage.EntitySQL(rootID, false, ""), rootID)
	}
	b.Queue(qTopologyVersion)
	if len(ids) > 0 {
		b.Queue(qAffected, ids, depths)
	}
	br := r.db.SendBatch(ctx, b)
	defer func() { _ = br.Close() }()
	if rootID != "" {
		root, err = storage.ScanEntity(br.QueryRow())
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return storage.Entity{}, false, nil, 0, fmt.Errorf("affected entities: root %s: %w", rootID, err)
		default:
			found = true
		}
	}
	if err := br.QueryRow().Scan(&version); err != nil {
		return storage.Entity{}, false, nil, 0, fmt.Errorf("affected entities: topology version: %w", err)
	}
	out = make([]Affected, 0, len(ids))
	if len(ids) > 0 {
		rows, err := br.Query()
		if err != nil {
			return storage.Entity{}, false, nil, 0, fmt.Errorf("affected entities: %w", err)
		}
		var x Affected
		_, err = pgx.ForEachRow(rows, []any{&x.ID, &x.Slug, &x.Type, &x.Name, &x.State, &x.Health, &x.Depth}, func() error {
			out = append(out, x)
			return nil
		})
		if err != nil {
			return storage.Entity{}, false, nil, 0, fmt.Errorf("affected entities: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return storage.Entity{}, false, nil, 0, fmt.Errorf("affected entities: %w", err)
	}
	return root, found, out, version, nil
}

// Package fleet reads the entity graph that the api maintains (entities, relationships and
// the is-a tree in entity_types) so the scheduler can find where a command or a check runs.
// It implements remote.Graph over Postgres and wraps remote.Resolver, so the executor and the
// check runner resolve targets the same way, live on every call: an edited address, user or
// `hosts` edge takes effect without a restart.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/remote"
)

// DefaultTypeTTL is how long the is-a tree read from entity_types is reused. Types change
// only when the ontology is re-ingested, and the tree is read on the hot path of every
// execution, so a short cache saves a query without letting a change go unnoticed for long.
const DefaultTypeTTL = 30 * time.Second

// Options configure a Graph.
type Options struct {
	Logger zerolog.Logger
	// GuestExecTimeout is what `qm guest exec --timeout` waits by default; zero means
	// remote.DefaultGuestExecTimeout. Callers with their own deadline re-wrap VM targets.
	GuestExecTimeout time.Duration
	// TypeTTL overrides DefaultTypeTTL.
	TypeTTL time.Duration
}

// Graph is a remote.Graph over the Oikos schema. Safe for concurrent use.
type Graph struct {
	db   *pgxpool.Pool
	opts Options

	mu       sync.Mutex
	parents  map[string]string
	loadedAt time.Time
}

var _ remote.Graph = (*Graph)(nil)

// New builds a Graph on pool.
func New(pool *pgxpool.Pool, opts Options) *Graph {
	if opts.TypeTTL <= 0 {
		opts.TypeTTL = DefaultTypeTTL
	}
	return &Graph{db: pool, opts: opts}
}

const entityColumns = `e.id::text, e.slug, e.type, e.name, e.attributes`

func scanEntity(row pgx.Row) (remote.Entity, error) {
	var e remote.Entity
	err := row.Scan(&e.ID, &e.Slug, &e.Type, &e.Name, &e.Attributes)
	if e.Attributes == nil {
		e.Attributes = map[string]any{}
	}
	return e, err
}

func notFound(err error, format string, args ...any) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), remote.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), err)
}

// EntityBySlug returns the entity with that slug ("lxc:jellyfin").
func (g *Graph) EntityBySlug(ctx context.Context, slug string) (remote.Entity, error) {
	e, err := scanEntity(g.db.QueryRow(ctx, `SELECT `+entityColumns+` FROM entities e WHERE e.slug = $1`, slug))
	if err != nil {
		return remote.Entity{}, notFound(err, "entity %s", slug)
	}
	return e, nil
}

// EntityByID returns the entity with that id.
func (g *Graph) EntityByID(ctx context.Context, id string) (remote.Entity, error) {
	if _, err := uuid.Parse(id); err != nil {
		return remote.Entity{}, fmt.Errorf("entity %q: not an id: %w", id, remote.ErrNotFound)
	}
	e, err := scanEntity(g.db.QueryRow(ctx, `SELECT `+entityColumns+` FROM entities e WHERE e.id = $1`, id))
	if err != nil {
		return remote.Entity{}, notFound(err, "entity %s", id)
	}
	return e, nil
}

// EntityByName finds the entity called name whose type is one of types or descends from
// one of them. A destroyed entity is returned only when no live one has that name; two
// live ones of different types are ambiguous and refused rather than guessed.
func (g *Graph) EntityByName(ctx context.Context, types []string, name string) (remote.Entity, error) {
	rows, err := g.db.Query(ctx, `
WITH RECURSIVE t(name) AS (
    SELECT unnest($1::text[])
    UNION
    SELECT et.name FROM entity_types et JOIN t ON et.parent = t.name
)
SELECT `+entityColumns+`, e.state = 'destroyed' FROM entities e
WHERE e.name = $2 AND e.type IN (SELECT name FROM t)
ORDER BY (e.state = 'destroyed'), e.slug
LIMIT 2`, types, name)
	if err != nil {
		return remote.Entity{}, fmt.Errorf("entity named %q (%v): %w", name, types, err)
	}
	found, err := pgx.CollectRows(rows, scanHit)
	if err != nil {
		return remote.Entity{}, fmt.Errorf("entity named %q (%v): %w", name, types, err)
	}
	return pickNamed(types, name, found)
}

// hit is a candidate entity and whether it is destroyed.
type hit struct {
	e         remote.Entity
	destroyed bool
}

func scanHit(r pgx.CollectableRow) (hit, error) {
	var h hit
	err := r.Scan(&h.e.ID, &h.e.Slug, &h.e.Type, &h.e.Name, &h.e.Attributes, &h.destroyed)
	if h.e.Attributes == nil {
		h.e.Attributes = map[string]any{}
	}
	return h, err
}

// pickNamed chooses among up to two candidates ordered live first: none is not found, a
// second live one is ambiguous.
func pickNamed(types []string, name string, found []hit) (remote.Entity, error) {
	switch {
	case len(found) == 0:
		return remote.Entity{}, fmt.Errorf("entity named %q of type %v: %w", name, types, remote.ErrNotFound)
	case len(found) > 1 && !found[1].destroyed:
		return remote.Entity{}, fmt.Errorf("entity named %q of type %v is ambiguous (%s, %s): name it by its full slug",
			name, types, found[0].e.Slug, found[1].e.Slug)
	}
	return found[0].e, nil
}

// HostOf follows the current `hosts` edge backwards from a guest to its Proxmox host.
func (g *Graph) HostOf(ctx context.Context, guestID string) (remote.Entity, error) {
	e, err := scanEntity(g.db.QueryRow(ctx, `
SELECT `+entityColumns+` FROM relationships r JOIN entities e ON e.id = r.source_id
WHERE r.target_id = $1 AND r.type = 'hosts' AND r.valid_to IS NULL
ORDER BY (e.state = 'destroyed'), r.valid_from DESC
LIMIT 1`, guestID))
	if err != nil {
		return remote.Entity{}, notFound(err, "hosts edge into %s", guestID)
	}
	return e, nil
}

// Lookup returns the entity named by a slug or an id.
func (g *Graph) Lookup(ctx context.Context, slugOrID string) (remote.Entity, error) {
	if _, err := uuid.Parse(slugOrID); err == nil {
		return g.EntityByID(ctx, slugOrID)
	}
	return g.EntityBySlug(ctx, slugOrID)
}

// Resolve looks up the entity named by slugOrID and turns it into a Target (docs/behaviours.md S2).
// A missing entity or a missing fact is a *remote.ResolutionError (errors.Is
// remote.ErrResolution), logged as a configuration problem; a failed query is returned as
// is, so a broken config is never mistaken for an outage (S8).
//
// The entity and every candidate owning host (by `host` attribute, as slug or as name, and
// by `hosts` edge) are read in one query, so resolving a guest costs one round trip; the
// rules that choose among them stay in remote.Resolver.
func (g *Graph) Resolve(ctx context.Context, slugOrID string) (remote.Target, remote.Entity, error) {
	view, err := g.prefetch(ctx, slugOrID)
	if errors.Is(err, remote.ErrNotFound) {
		rerr := &remote.ResolutionError{Entity: slugOrID, Reason: "no such entity in the graph", Err: remote.ErrNotFound}
		g.opts.Logger.Warn().Err(rerr).Str("entity", slugOrID).
			Msg("target resolution failed: the graph is missing a fact (configuration problem, not an outage)")
		return remote.Target{}, remote.Entity{}, rerr
	}
	if err != nil {
		return remote.Target{}, remote.Entity{}, fmt.Errorf("resolve %s: %w", slugOrID, err)
	}
	e := view.self
	isA, err := g.isA(ctx)
	if err != nil {
		return remote.Target{}, e, fmt.Errorf("resolve %s: read entity types: %w", e.Slug, err)
	}
	r := remote.Resolver{Graph: view, IsA: isA, Logger: g.opts.Logger, GuestExecTimeout: g.opts.GuestExecTimeout}
	t, err := r.Resolve(ctx, e)
	if err != nil {
		return remote.Target{}, e, err
	}
	return t, e, nil
}

// RunsOn lists what the entity with id runs on, following current runs-on edges
// transitively (at most eight hops), nearest first; destroyed entities are skipped.
func (g *Graph) RunsOn(ctx context.Context, id string) ([]string, error) {
	rows, err := g.db.Query(ctx, `
WITH RECURSIVE chain(id, slug, depth) AS (
    SELECT e.id, e.slug, 1
    FROM relationships r JOIN entities e ON e.id = r.target_id
    WHERE r.source_id = $1 AND r.type = 'runs-on' AND r.valid_to IS NULL AND e.state <> 'destroyed'
    UNION
    SELECT e.id, e.slug, c.depth + 1
    FROM chain c JOIN relationships r ON r.source_id = c.id AND r.type = 'runs-on' AND r.valid_to IS NULL
    JOIN entities e ON e.id = r.target_id
    WHERE c.depth < 8 AND e.state <> 'destroyed'
)
SELECT slug FROM chain GROUP BY slug ORDER BY min(depth), slug`, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ResolveRunsOn finds where a command about the entity slugOrID runs: on the entity itself
// when it is a machine or a guest, else on the nearest entity it runs on (a service on an
// LXC, a container on a docker host on an LXC) that is — the host fallback through the
// graph of S1. Errors are Resolve's; when nothing along the runs-on edges can run a
// command either, the resolution error says what was tried.
func (g *Graph) ResolveRunsOn(ctx context.Context, slugOrID string) (remote.Target, error) {
	t, e, err := g.Resolve(ctx, slugOrID)
	if err == nil || !errors.Is(err, remote.ErrResolution) || e.ID == "" {
		return t, err
	}
	chain, qerr := g.RunsOn(ctx, e.ID)
	if qerr != nil {
		return remote.Target{}, fmt.Errorf("%w; and following its runs-on edges failed: %w", err, qerr)
	}
	if len(chain) == 0 {
		return remote.Target{}, err
	}
	for _, slug := range chain {
		t, _, err = g.Resolve(ctx, slug)
		if err == nil || !errors.Is(err, remote.ErrResolution) {
			return t, err
		}
	}
	return remote.Target{}, fmt.Errorf("%s runs on %s, none of which can run a command: %w", e.Slug, strings.Join(chain, " → "), err)
}

// sqlPrefetch reads an entity (%s is the WHERE condition on e) with its candidate hosts,
// each row tagged with its role. The name candidates follow EntityByName for proxmox-host.
const sqlPrefetch = `
WITH RECURSIVE ph(name) AS (
    SELECT 'proxmox-host'::text
    UNION
    SELECT et.name FROM entity_types et JOIN ph ON et.parent = ph.name
), t AS (
    SELECT * FROM entities e WHERE %s
)
SELECT 'self', t.id::text, t.slug, t.type, t.name, t.attributes, t.state = 'destroyed' FROM t
UNION ALL
(SELECT 'edge', s.id::text, s.slug, s.type, s.name, s.attributes, s.state = 'destroyed'
 FROM t JOIN relationships r ON r.target_id = t.id AND r.type = 'hosts' AND r.valid_to IS NULL
        JOIN entities s ON s.id = r.source_id
 ORDER BY (s.state = 'destroyed'), r.valid_from DESC LIMIT 1)
UNION ALL
(SELECT 'slug', a.id::text, a.slug, a.type, a.name, a.attributes, a.state = 'destroyed'
 FROM t JOIN entities a ON a.slug = t.attributes->>'host' LIMIT 1)
UNION ALL
(SELECT 'name', a.id::text, a.slug, a.type, a.name, a.attributes, a.state = 'destroyed'
 FROM t JOIN entities a ON a.name = t.attributes->>'host' AND a.type IN (SELECT name FROM ph)
 ORDER BY (a.state = 'destroyed'), a.slug LIMIT 2)`

var (
	sqlPrefetchByID   = fmt.Sprintf(sqlPrefetch, `e.id = $1`)
	sqlPrefetchBySlug = fmt.Sprintf(sqlPrefetch, `e.slug = $1`)
)

// prefetch reads the entity and its host candidates; ErrNotFound when there is no entity.
func (g *Graph) prefetch(ctx context.Context, slugOrID string) (*view, error) {
	q := sqlPrefetchBySlug
	if _, err := uuid.Parse(slugOrID); err == nil {
		q = sqlPrefetchByID
	}
	rows, err := g.db.Query(ctx, q, slugOrID)
	if err != nil {
		return nil, err
	}
	v := &view{g: g, bySlug: map[string]remote.Entity{}}
	found := false
	var role string
	defer rows.Close()
	for rows.Next() {
		var h hit
		if err := rows.Scan(&role, &h.e.ID, &h.e.Slug, &h.e.Type, &h.e.Name, &h.e.Attributes, &h.destroyed); err != nil {
			return nil, err
		}
		if h.e.Attributes == nil {
			h.e.Attributes = map[string]any{}
		}
		switch role {
		case "self":
			v.self, found = h.e, true
		case "edge":
			e := h.e
			v.edge = &e
		case "slug":
			v.bySlug[h.e.Slug] = h.e
		case "name":
			v.named = append(v.named, h)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("entity %s: %w", slugOrID, remote.ErrNotFound)
	}
	v.hostAttr, _ = v.self.Attributes["host"].(string)
	return v, nil
}

// view is a remote.Graph that answers the resolver's questions about one entity from what
// prefetch read, and anything else from the database.
type view struct {
	g        *Graph
	self     remote.Entity
	edge     *remote.Entity
	bySlug   map[string]remote.Entity
	hostAttr string
	named    []hit
}

// EntityBySlug answers from the prefetched `host` slug, else the database.
func (v *view) EntityBySlug(ctx context.Context, slug string) (remote.Entity, error) {
	if e, ok := v.bySlug[slug]; ok {
		return e, nil
	}
	return v.g.EntityBySlug(ctx, slug)
}

// EntityByName answers the owning-host question from the prefetched candidates, else the
// database.
func (v *view) EntityByName(ctx context.Context, types []string, name string) (remote.Entity, error) {
	if v.hostAttr != "" && name == v.hostAttr && len(types) == 1 && types[0] == "proxmox-host" {
		return pickNamed(types, name, v.named)
	}
	return v.g.EntityByName(ctx, types, name)
}

// HostOf answers for the prefetched entity from its edge, else the database.
func (v *view) HostOf(ctx context.Context, guestID string) (remote.Entity, error) {
	if guestID == v.self.ID {
		if v.edge == nil {
			return remote.Entity{}, fmt.Errorf("hosts edge into %s: %w", guestID, remote.ErrNotFound)
		}
		return *v.edge, nil
	}
	return v.g.HostOf(ctx, guestID)
}

// isA returns the is-a test over the type tree, reading entity_types when the cached copy is
// older than TypeTTL.
func (g *Graph) isA(ctx context.Context) (func(typ, ancestor string) bool, error) {
	g.mu.Lock()
	parents, fresh := g.parents, time.Since(g.loadedAt) < g.opts.TypeTTL
	g.mu.Unlock()
	if parents == nil || !fresh {
		rows, err := g.db.Query(ctx, `SELECT name, coalesce(parent, '') FROM entity_types`)
		if err != nil {
			return nil, err
		}
		next := map[string]string{}
		var name, parent string
		_, err = pgx.ForEachRow(rows, []any{&name, &parent}, func() error {
			next[name] = parent
			return nil
		})
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		g.parents, g.loadedAt = next, time.Now()
		g.mu.Unlock()
		parents = next
	}
	return func(typ, ancestor string) bool { return IsA(parents, typ, ancestor) }, nil
}

// IsA walks parents (type → parent type) up from typ and reports whether it meets ancestor.
// A cycle, which the ontology parser forbids, ends the walk instead of looping.
func IsA(parents map[string]string, typ, ancestor string) bool {
	for i := 0; typ != "" && i <= len(parents); i++ {
		if typ == ancestor {
			return true
		}
		typ = parents[typ]
	}
	return false
}

package storage

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/remote"
)

// The entity columns every fleet query reads: e.id::text, e.slug, e.type, e.name,
// e.attributes (scanEntity's order).

func scanEntity(row pgx.Row) (remote.Entity, error) {
	var e remote.Entity
	err := row.Scan(&e.ID, &e.Slug, &e.Type, &e.Name, &e.Attributes)
	if e.Attributes == nil {
		e.Attributes = map[string]any{}
	}
	return e, err
}

const qEntityBySlug = `SELECT e.id::text, e.slug, e.type, e.name, e.attributes FROM entities e WHERE e.slug = $1`

// EntityBySlug returns the entity with that slug; ErrNotFound when there is none.
func (s *Store) EntityBySlug(ctx context.Context, slug string) (remote.Entity, error) {
	e, err := scanEntity(s.db.QueryRow(ctx, qEntityBySlug, slug))
	return e, notFound(err)
}

const qEntityByID = `SELECT e.id::text, e.slug, e.type, e.name, e.attributes FROM entities e WHERE e.id = $1`

// EntityByID returns the entity with that id (a uuid); ErrNotFound when there is none.
func (s *Store) EntityByID(ctx context.Context, id string) (remote.Entity, error) {
	e, err := scanEntity(s.db.QueryRow(ctx, qEntityByID, id))
	return e, notFound(err)
}

// Hit is a candidate entity and whether it is destroyed.
type Hit struct {
	Entity    remote.Entity
	Destroyed bool
}

const qEntityByName = `
WITH RECURSIVE t(name) AS (
    SELECT unnest($1::text[])
    UNION
    SELECT et.name FROM entity_types et JOIN t ON et.parent = t.name
)
SELECT e.id::text, e.slug, e.type, e.name, e.attributes, e.state = 'destroyed' FROM entities e
WHERE e.name = $2 AND e.type IN (SELECT name FROM t)
ORDER BY (e.state = 'destroyed'), e.slug
LIMIT 2`

// EntitiesByName reads up to two entities called name whose type is one of types or
// descends from one of them, live ones first.
func (s *Store) EntitiesByName(ctx context.Context, types []string, name string) ([]Hit, error) {
	rows, err := s.db.Query(ctx, qEntityByName, types, name)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanHit)
}

func scanHit(r pgx.CollectableRow) (Hit, error) {
	var h Hit
	err := r.Scan(&h.Entity.ID, &h.Entity.Slug, &h.Entity.Type, &h.Entity.Name, &h.Entity.Attributes, &h.Destroyed)
	if h.Entity.Attributes == nil {
		h.Entity.Attributes = map[string]any{}
	}
	return h, err
}

const qHostOf = `
SELECT e.id::text, e.slug, e.type, e.name, e.attributes FROM relationships r JOIN entities e ON e.id = r.source_id
WHERE r.target_id = $1 AND r.type = 'hosts' AND r.valid_to IS NULL
ORDER BY (e.state = 'destroyed'), r.valid_from DESC
LIMIT 1`

// HostOf follows the current `hosts` edge backwards from a guest; ErrNotFound when there is
// none.
func (s *Store) HostOf(ctx context.Context, guestID string) (remote.Entity, error) {
	e, err := scanEntity(s.db.QueryRow(ctx, qHostOf, guestID))
	return e, notFound(err)
}

const qRunsOn = `
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
SELECT slug FROM chain GROUP BY slug ORDER BY min(depth), slug`

// RunsOn lists the slugs of what the entity with id runs on, following current runs-on
// edges transitively (at most eight hops), nearest first; destroyed entities are skipped.
func (s *Store) RunsOn(ctx context.Context, id string) ([]string, error) {
	rows, err := s.db.Query(ctx, qRunsOn, id)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// qPrefetchHosts is the CTE of proxmox-host and its subtypes (the WITH RECURSIVE is the
// query's own, so that this fragment does not read as a statement of its own).
const qPrefetchHosts = `ph(name) AS (
    SELECT 'proxmox-host'::text
    UNION
    SELECT et.name FROM entity_types et JOIN ph ON et.parent = ph.name
), t AS (
    SELECT * FROM entities e WHERE `

// qPrefetchTail is the rest of the query after t's WHERE condition.
const qPrefetchTail = `
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

// qPrefetchByID and qPrefetchBySlug read an entity (by id, by slug) with its candidate
// hosts, each row tagged with its role. The name candidates follow EntitiesByName for
// proxmox-host. The two differ only in t's WHERE condition, between qPrefetchHosts and
// qPrefetchTail.
const (
	qPrefetchByID   = "\nWITH RECURSIVE " + qPrefetchHosts + "e.id = $1" + qPrefetchTail
	qPrefetchBySlug = "\nWITH RECURSIVE " + qPrefetchHosts + "e.slug = $1" + qPrefetchTail
)

// Prefetched is one row of Prefetch: the entity itself ("self") or a candidate host found
// by its hosts edge ("edge"), its `host` attribute as a slug ("slug") or as a name ("name").
type Prefetched struct {
	Role string
	Hit
}

// Prefetch reads the entity (by id when byID, else by slug) and its host candidates in one
// query; no "self" row means there is no such entity.
func (s *Store) Prefetch(ctx context.Context, byID bool, slugOrID string) ([]Prefetched, error) {
	q := qPrefetchBySlug
	if byID {
		q = qPrefetchByID
	}
	rows, err := s.db.Query(ctx, q, slugOrID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Prefetched
	for rows.Next() {
		var p Prefetched
		h := &p.Entity
		if err := rows.Scan(&p.Role, &h.ID, &h.Slug, &h.Type, &h.Name, &h.Attributes, &p.Destroyed); err != nil {
			return nil, err
		}
		if h.Attributes == nil {
			h.Attributes = map[string]any{}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

const qTypeParents = `SELECT name, coalesce(parent, '') FROM entity_types`

// TypeParents reads the is-a tree: entity type → parent type ("" at a root).
func (s *Store) TypeParents(ctx context.Context) (map[string]string, error) {
	rows, err := s.db.Query(ctx, qTypeParents)
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
	return next, nil
}

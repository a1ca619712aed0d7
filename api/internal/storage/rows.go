// Package storage is the api's one layer of rows: the types every surface answers with
// (Entity, Relationship, Knowledge), the one column list and scanner of each, and the lookups
// by ref that the reads (api/internal/storage/readmodel, metricsapi through it) and the
// graph's mutation path (api/internal/storage/graphstore, inside its transactions, with row
// locks) share. An
// entity is read the same way, into the same struct, whoever reads it.
//
// Every statement is a named, parameterised function or constant here or in a package below;
// handler packages hold no SQL. docs/adr/0007-store-layer.md says why and how to add a query.
//
// Failures are the api's sentinels (api/internal/apierr): a missing row is ErrNotFound,
// wrapped with what was asked for.
package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/shared/pg"
)

// Entity is one node of the graph, with the health the scheduler recorded for it: the shape
// of an entity in every answer of the api.
type Entity struct {
	// ID is a uuid v7.
	ID string `json:"id"`
	// Slug is "<type>:<name>", unique.
	Slug string `json:"slug"`
	// Type is the ontology entity type.
	Type string `json:"type"`
	// Name is unique within the type.
	Name string `json:"name"`
	// State is one of the type's lifecycle states.
	State string `json:"state"`
	// Attributes are the entity's facts (JSON numbers decode as float64); never nil.
	Attributes map[string]any `json:"attributes"`
	// Version increases with every change; PATCH and state changes may expect it.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Health is from entity_status; "" when the entity has no status row (not monitored).
	Health string `json:"health"`
	// HealthReason explains Health (from entity_status.reason).
	HealthReason string `json:"health_reason"`
	// LastCheckAt is when a check last reported on the entity.
	LastCheckAt *time.Time `json:"last_check_at"`
}

// EntityColumns are the columns ScanEntity reads, in its order: e is entities, st the
// entity_status row EntityFrom joins (absent for an entity nobody monitors).
const EntityColumns = `e.id::text, e.slug, e.type, e.name, e.state, e.attributes, e.version, e.created_at, e.updated_at,
	coalesce(st.health, ''), coalesce(st.reason, ''), st.last_check_at`

// EntityFrom is the FROM clause EntityColumns needs, with spaces on both sides.
const EntityFrom = ` FROM entities e LEFT JOIN entity_status st ON st.entity_id = e.id `

// ScanEntity scans EntityColumns and then into extra (columns a caller appended).
func ScanEntity(row pgx.Row, extra ...any) (Entity, error) {
	var e Entity
	err := row.Scan(append([]any{&e.ID, &e.Slug, &e.Type, &e.Name, &e.State, &e.Attributes, &e.Version, &e.CreatedAt,
		&e.UpdatedAt, &e.Health, &e.HealthReason, &e.LastCheckAt}, extra...)...)
	if e.Attributes == nil {
		e.Attributes = map[string]any{}
	}
	return e, err
}

// CollectEntity is ScanEntity for pgx.CollectRows.
func CollectEntity(row pgx.CollectableRow) (Entity, error) { return ScanEntity(row) }

// RefWhere is the condition matching the entity (alias e) that ref names, an id or a slug,
// bound to placeholder $n.
func RefWhere(ref string, n int) string {
	if ids.IsUUID(ref) {
		return fmt.Sprintf("e.id = $%d::uuid", n)
	}
	return fmt.Sprintf("e.slug = $%d", n)
}

// EntitySQL is the SELECT of the entity ref names ($1) with EntityColumns and extra (more
// columns, starting with a comma); with lock the row is locked FOR NO KEY UPDATE, which,
// unlike FOR UPDATE, does not block edges being inserted that reference it.
func EntitySQL(ref string, lock bool, extra string) string {
	sql := `SELECT ` + EntityColumns + extra + EntityFrom + `WHERE ` + RefWhere(ref, 1)
	if lock {
		sql += ` FOR NO KEY UPDATE OF e`
	}
	return sql
}

// EntityReadError maps a failed read of the entity ref names: no row is ErrNotFound.
func EntityReadError(ref string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: entity %q", apierr.ErrNotFound, ref)
	}
	if err != nil {
		return fmt.Errorf("read entity %q: %w", ref, err)
	}
	return nil
}

// GetEntity reads the entity ref names (slug or id) with its health, locked with lock (see
// EntitySQL).
func GetEntity(ctx context.Context, q pg.Querier, ref string, lock bool) (Entity, error) {
	e, err := ScanEntity(q.QueryRow(ctx, EntitySQL(ref, lock, ""), ref))
	if err := EntityReadError(ref, err); err != nil {
		return Entity{}, err
	}
	return e, nil
}

// EntityRef is an entity's id and slug.
type EntityRef struct {
	ID   string
	Slug string
}

// ResolveEntity returns the id and slug of the entity ref names (slug or id).
func ResolveEntity(ctx context.Context, q pg.Querier, ref string) (EntityRef, error) {
	var r EntityRef
	err := q.QueryRow(ctx, `SELECT e.id::text, e.slug FROM entities e WHERE `+RefWhere(ref, 1), ref).Scan(&r.ID, &r.Slug)
	if err := EntityReadError(ref, err); err != nil {
		return EntityRef{}, err
	}
	return r, nil
}

// Relationship is one edge with both ends' ids and slugs; ValidTo is set once it has ended.
type Relationship struct {
	// ID is a uuid v7.
	ID string `json:"id"`
	// Type is the ontology relationship type.
	Type string `json:"type"`
	// SourceID / SourceSlug and TargetID / TargetSlug are the ends, source -type-> target.
	SourceID   string `json:"source_id"`
	SourceSlug string `json:"source_slug"`
	TargetID   string `json:"target_id"`
	TargetSlug string `json:"target_slug"`
	// Attributes of the edge itself; never nil.
	Attributes map[string]any `json:"attributes"`
	// ValidFrom is when the edge was created; ValidTo when it ended (nil while current).
	ValidFrom time.Time  `json:"valid_from"`
	ValidTo   *time.Time `json:"valid_to"`
}

// RelationshipColumns are the columns ScanRelationship reads; r is relationships, se and te
// the ends RelationshipFrom joins.
const RelationshipColumns = `r.id::text, r.type, r.source_id::text, se.slug, r.target_id::text, te.slug, r.attributes,
	r.valid_from, r.valid_to`

// RelationshipFrom is the FROM clause RelationshipColumns needs, with spaces on both sides.
const RelationshipFrom = ` FROM relationships r JOIN entities se ON se.id = r.source_id JOIN entities te ON te.id = r.target_id `

// ScanRelationship scans RelationshipColumns.
func ScanRelationship(row pgx.Row) (Relationship, error) {
	var r Relationship
	err := row.Scan(&r.ID, &r.Type, &r.SourceID, &r.SourceSlug, &r.TargetID, &r.TargetSlug, &r.Attributes, &r.ValidFrom, &r.ValidTo)
	if r.Attributes == nil {
		r.Attributes = map[string]any{}
	}
	return r, err
}

// CollectRelationship is ScanRelationship for pgx.CollectRows.
func CollectRelationship(row pgx.CollectableRow) (Relationship, error) { return ScanRelationship(row) }

// KnowledgeKinds are the kinds a knowledge entity may have; each is also its entity type.
var KnowledgeKinds = []string{"document", "investigation", "runbook"}

// AboutEdge is the relationship type from knowledge to what it is about.
const AboutEdge = "about"

// Knowledge is a document, investigation or runbook with its whole body: the entity (the
// same shape as everywhere else) plus its text and the slugs of what it is about.
type Knowledge struct {
	Entity
	// Kind is document, investigation or runbook (also the entity type).
	Kind string `json:"kind"`
	// Title, Body (markdown) and Tags are what search indexes.
	Title string   `json:"title"`
	Body  string   `json:"body"`
	Tags  []string `json:"tags"`
	// About lists the slugs of the entities it is about (current about edges), in order.
	About []string `json:"about"`
}

// knowledgeSQL reads a knowledge entity with its text and about slugs in one statement. The
// knowledge row is LEFT JOINed so that the mutation path finds, and completes, an entity of a
// knowledge type whose row is missing.
const knowledgeSQL = `SELECT ` + EntityColumns + `, coalesce(k.kind, ''), coalesce(k.title, ''), coalesce(k.body, ''),
	coalesce(k.tags, '{}'), coalesce((SELECT array_agg(t.slug ORDER BY t.slug) FROM relationships ab
		JOIN entities t ON t.id = ab.target_id
		WHERE ab.source_id = e.id AND ab.type = '` + AboutEdge + `' AND ab.valid_to IS NULL), '{}')` +
	EntityFrom + `LEFT JOIN knowledge_entities k ON k.entity_id = e.id WHERE `

// GetKnowledge reads the knowledge entity ref names (slug or id), locked with lock (see
// EntitySQL). An entity that is not of a knowledge kind is ErrNotFound.
func GetKnowledge(ctx context.Context, q pg.Querier, ref string, lock bool) (Knowledge, error) {
	sql := knowledgeSQL + RefWhere(ref, 1)
	if lock {
		sql += ` FOR NO KEY UPDATE OF e`
	}
	var k Knowledge
	e, err := ScanEntity(q.QueryRow(ctx, sql, ref), &k.Kind, &k.Title, &k.Body, &k.Tags, &k.About)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !slices.Contains(KnowledgeKinds, e.Type)) {
		return Knowledge{}, fmt.Errorf("%w: knowledge %q", apierr.ErrNotFound, ref)
	}
	if err != nil {
		return Knowledge{}, fmt.Errorf("read knowledge %q: %w", ref, err)
	}
	k.Entity = e
	if k.Tags == nil {
		k.Tags = []string{}
	}
	if k.About == nil {
		k.About = []string{}
	}
	return k, nil
}

package readmodel

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/storage"
)

// AttrMatch is one attribute filter: the attribute's value, as text, equals Value
// (attr.vmid=101 matches the number 101, attr.onboot=true the boolean).
type AttrMatch struct {
	Key   string
	Value string
}

// EntityFilter selects entities. Types must already be expanded (ExpandTypes).
type EntityFilter struct {
	Types []string
	// NotTypes are left out (expanded like Types): the dashboard hides the check
	// bookkeeping entities unless asked.
	NotTypes []string
	States   []string
	Health   []string
	Attrs    []AttrMatch
	// Q matches name or slug, case-insensitive substring.
	Q string
	// After is the slug to continue after; "" starts at the beginning.
	After string
	Limit int
}

// ListEntities returns a page of entities in slug order.
func (r *Reader) ListEntities(ctx context.Context, f EntityFilter) (Page[storage.Entity], error) {
	q, a := entityListSQL(f, "")
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Page[storage.Entity]{}, fmt.Errorf("list entities: %w", err)
	}
	items, err := pgx.CollectRows(rows, storage.CollectEntity)
	if err != nil {
		return Page[storage.Entity]{}, fmt.Errorf("list entities: %w", err)
	}
	return pageOf(items, f.Limit, func(e storage.Entity) string { return e.Slug }), nil
}

// AuditedEntity is an entity of a list asked for with=last_audited.
type AuditedEntity struct {
	storage.Entity
	// LastAuditedAt is when the newest knowledge about the entity that records an audit or an
	// update was last written (see lastAuditedSQL); null when there is none.
	LastAuditedAt *time.Time `json:"last_audited_at"`
}

// lastAuditedSQL is the time of the newest knowledge entry (its updated_at) with a current
// about edge to the entity e that is tagged audit or update, or whose title contains "audit"
// or "update", case-insensitive; NULL when there is none. A subquery per listed row, in the
// list's one statement: it walks the about edges into e (relationships_target_idx), so a page
// costs one round trip however many entities it holds.
const lastAuditedSQL = `(SELECT max(k.updated_at) FROM relationships ab
		JOIN knowledge_entities k ON k.entity_id = ab.source_id
		WHERE ab.target_id = e.id AND ab.type = '` + storage.AboutEdge + `' AND ab.valid_to IS NULL
		  AND (lower(k.title) LIKE '%audit%' OR lower(k.title) LIKE '%update%'
		       OR EXISTS (SELECT 1 FROM unnest(k.tags) AS tag WHERE lower(tag) IN ('audit', 'update'))))`

// ListEntitiesAudited is ListEntities with each entity's LastAuditedAt, in the same one query.
func (r *Reader) ListEntitiesAudited(ctx context.Context, f EntityFilter) (Page[AuditedEntity], error) {
	q, a := entityListSQL(f, ", "+lastAuditedSQL)
	rows, err := r.db.Query(ctx, q, a...)
	if err != nil {
		return Page[AuditedEntity]{}, fmt.Errorf("list entities: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AuditedEntity, error) {
		var x AuditedEntity
		var err error
		x.Entity, err = storage.ScanEntity(row, &x.LastAuditedAt)
		return x, err
	})
	if err != nil {
		return Page[AuditedEntity]{}, fmt.Errorf("list entities: %w", err)
	}
	return pageOf(items, f.Limit, func(e AuditedEntity) string { return e.Slug }), nil
}

// qListEntities is the head of the entity list (entityListSQL adds the extra columns, the
// FROM, the filters and the page).
const qListEntities = `SELECT ` + storage.EntityColumns

// entityListSQL builds the entity list's statement for f, with extra columns (starting with a
// comma) after storage.EntityColumns.
func entityListSQL(f EntityFilter, extra string) (string, args) {
	var a args
	var where []string
	if len(f.Types) > 0 {
		where = append(where, "e.type = ANY("+a.add(f.Types)+")")
	}
	if len(f.NotTypes) > 0 {
		where = append(where, "NOT (e.type = ANY("+a.add(f.NotTypes)+"))")
	}
	if len(f.States) > 0 {
		where = append(where, "e.state = ANY("+a.add(f.States)+")")
	}
	if len(f.Health) > 0 {
		where = append(where, "st.health = ANY("+a.add(f.Health)+")")
	}
	for _, m := range f.Attrs {
		where = append(where, "e.attributes ->> "+a.add(m.Key)+" = "+a.add(m.Value))
	}
	if f.Q != "" {
		p := a.add(likePattern(f.Q))
		where = append(where, "(lower(e.name) LIKE "+p+" OR lower(e.slug) LIKE "+p+")")
	}
	if f.After != "" {
		where = append(where, "e.slug > "+a.add(f.After))
	}
	q := qListEntities + extra + storage.EntityFrom
	if len(where) > 0 {
		q += "WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY e.slug LIMIT " + a.add(f.Limit+1)
	return q, a
}

// pageOf trims a limit+1 result to limit and sets Next when the extra row existed.
func pageOf[T any](items []T, limit int, key func(T) string) Page[T] {
	p := Page[T]{Items: items}
	if len(items) > limit {
		p.Items = items[:limit]
		p.Next = key(items[limit-1])
	}
	if p.Items == nil {
		p.Items = []T{}
	}
	return p
}

// GetEntity returns one entity by slug or id, with its health.
func (r *Reader) GetEntity(ctx context.Context, ref string) (storage.Entity, error) {
	return storage.GetEntity(ctx, r.db, ref, false)
}

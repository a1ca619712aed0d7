package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
)

// The bulk path applies thousands of changes (the seed ingest) in the caller's transaction
// with the same validation, audit rows and events as the one-at-a-time methods, but with
// set-based reads, COPY and pipelined batches instead of several round trips per row.

// NewEntity is an entity to create in bulk.
type NewEntity struct {
	// Type, Name and State as in CreateEntityInput ("" state: the type's default).
	Type, Name, State string
	// Attributes; nil values are dropped.
	Attributes map[string]any
}

// AttributePatch sets attributes of an existing entity in bulk (keys not named are kept).
type AttributePatch struct {
	// Slug of the entity.
	Slug string
	// Set are the keys to write; nil values are ignored (a bulk patch never deletes).
	Set map[string]any
}

// NewEdge is a relationship to create in bulk, between slugs.
type NewEdge struct {
	// Type is the relationship type; Source and Target are slugs.
	Type, Source, Target string
}

// KnowledgeWrite creates or updates a knowledge entity in bulk (about edges are NewEdges).
type KnowledgeWrite struct {
	// Slug, Kind, Title and Body as in KnowledgeInput.
	Slug, Kind, Title, Body string
	// Tags help search.
	Tags []string
}

// BulkPlan is a set of changes for ApplyBulk.
type BulkPlan struct {
	// Creates are applied first, so Edges may point at them.
	Creates []NewEntity
	// Patches merge into existing entities.
	Patches []AttributePatch
	// Knowledge is created or updated in place by slug.
	Knowledge []KnowledgeWrite
	// Edges are created last; an existing current edge is skipped.
	Edges []NewEdge
}

// BulkResult counts what ApplyBulk wrote.
type BulkResult struct {
	// Created and Updated count entities; the Knowledge* fields documents.
	Created, Updated, KnowledgeCreated, KnowledgeUpdated int
	// EdgesCreated counts new relationships.
	EdgesCreated int
}

// ApplyBulk validates and applies p in tx: entities are created, patched (a value equal to
// the stored one is not written), knowledge upserted, and edges created when no current
// edge exists. Every write gets its own audit row and event, as on the single path. Checks
// are not derived here; call SyncChecksBulk afterwards with the entities concerned.
func (s *Service) ApplyBulk(ctx context.Context, tx storage.DB, m Meta, o *ontology.Ontology, p BulkPlan) (BulkResult, error) {
	var res BulkResult
	if err := checkMeta(m); err != nil {
		return res, err
	}
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return res, fmt.Errorf("bulk: %w", err)
	}
	out := &outbox{m: m}
	var err error
	if res.Created, err = s.bulkCreate(ctx, tx, o, p.Creates, out); err != nil {
		return res, err
	}
	if res.Updated, err = s.bulkPatch(ctx, tx, o, p.Patches, out); err != nil {
		return res, err
	}
	if res.KnowledgeCreated, res.KnowledgeUpdated, err = s.bulkKnowledge(ctx, tx, o, p.Knowledge, out); err != nil {
		return res, err
	}
	if res.EdgesCreated, err = s.bulkEdges(ctx, tx, o, p.Edges, now, out); err != nil {
		return res, err
	}
	return res, out.flush(ctx, tx)
}

func pgID(u uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: u, Valid: true} }

func parseID(s string) (pgtype.UUID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return pgtype.UUID{}, fmt.Errorf("bad id %q: %w", s, err)
	}
	return pgID(u), nil
}

func (s *Service) bulkCreate(ctx context.Context, tx storage.DB, o *ontology.Ontology, creates []NewEntity, out *outbox) (int, error) {
	if len(creates) == 0 {
		return 0, nil
	}
	rows := make([][]any, 0, len(creates))
	for _, c := range creates {
		in := CreateEntityInput{Type: c.Type, Name: c.Name, State: c.State, Attributes: dropNil(c.Attributes)}
		slug := c.Type + ":" + c.Name
		state, err := validateCreate(o, in)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", slug, err)
		}
		attrs, err := normalizeAttrs(in.Attributes)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", slug, err)
		}
		raw, err := json.Marshal(attrs)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", slug, err)
		}
		u, err := uuid.NewV7()
		if err != nil {
			return 0, fmt.Errorf("generate id: %w", err)
		}
		rows = append(rows, []any{pgID(u), slug, c.Type, c.Name, state, raw})
		sn := snap(Entity{ID: u.String(), Slug: slug, Type: c.Type, Name: c.Name, State: state, Attributes: attrs, Version: 1})
		if err := out.audit("entity.create", sn.ID, nil, sn); err != nil {
			return 0, err
		}
		if err := out.event("entity.created", sn.ID, sn); err != nil {
			return 0, err
		}
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"entities"}, []string{"id", "slug", "type", "name", "state", "attributes"},
		pgx.CopyFromRows(rows)); err != nil {
		if pg.IsUniqueViolation(err, "") {
			return 0, &ValidationError{Field: "name", Reason: "an entity being created already exists (created concurrently?)", Err: ErrDuplicate}
		}
		return 0, fmt.Errorf("bulk insert entities: %w", err)
	}
	return len(rows), nil
}

func dropNil(attrs map[string]any) map[string]any {
	out := make(map[string]any, len(attrs))
	for k, v := range attrs {
		if v != nil {
			out[k] = v
		}
	}
	return out
}

// loadEntitiesBySlug reads entities by slug (locked when lock is set), keyed by slug.
func loadEntitiesBySlug(ctx context.Context, tx storage.DB, slugs []string, lock bool) (map[string]Entity, error) {
	sql := `SELECT ` + storage.EntityColumns + storage.EntityFrom + `WHERE e.slug = ANY($1) ORDER BY e.id`
	if lock {
		sql += ` FOR NO KEY UPDATE OF e`
	}
	rows, err := tx.Query(ctx, sql, slugs)
	if err != nil {
		return nil, fmt.Errorf("read entities: %w", err)
	}
	list, err := pgx.CollectRows(rows, storage.CollectEntity)
	if err != nil {
		return nil, fmt.Errorf("read entities: %w", err)
	}
	out := make(map[string]Entity, len(list))
	for _, e := range list {
		out[e.Slug] = e
	}
	return out, nil
}

func (s *Service) bulkPatch(ctx context.Context, tx storage.DB, o *ontology.Ontology, patches []AttributePatch, out *outbox) (int, error) {
	if len(patches) == 0 {
		return 0, nil
	}
	slugs := make([]string, len(patches))
	for i, p := range patches {
		slugs[i] = p.Slug
	}
	cur, err := loadEntitiesBySlug(ctx, tx, slugs, true)
	if err != nil {
		return 0, err
	}
	var ids []pgtype.UUID
	var attrsCol [][]byte
	type change struct {
		before Entity
		after  snapshot
		patch  map[string]any
	}
	var changes []change
	for _, p := range patches {
		e, ok := cur[p.Slug]
		if !ok {
			return 0, fmt.Errorf("%s: %w", p.Slug, ErrNotFound)
		}
		if err := refuseSchedulerOwned(p.Set); err != nil {
			return 0, fmt.Errorf("%s: %w", p.Slug, err)
		}
		patch, err := normalizeAttrs(dropNil(p.Set))
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.Slug, err)
		}
		if err := o.ValidateAttributes(e.Type, patch, false); err != nil {
			return 0, fmt.Errorf("%s: %w", p.Slug, attributeError(err))
		}
		merged := maps.Clone(e.Attributes)
		maps.Copy(merged, patch)
		if reflect.DeepEqual(merged, e.Attributes) {
			continue
		}
		raw, err := json.Marshal(merged)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p.Slug, err)
		}
		id, err := parseID(e.ID)
		if err != nil {
			return 0, err
		}
		ids = append(ids, id)
		attrsCol = append(attrsCol, raw)
		after := snap(e)
		after.Attributes, after.Version = merged, e.Version+1
		changes = append(changes, change{before: e, after: after, patch: patch})
	}
	if len(ids) == 0 {
		return 0, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE entities e SET attributes = v.attributes, version = e.version + 1, updated_at = now()
		FROM (SELECT unnest($1::uuid[]) AS id, unnest($2::jsonb[]) AS attributes) v WHERE e.id = v.id`, ids, attrsCol); err != nil {
		return 0, fmt.Errorf("bulk update entities: %w", err)
	}
	for _, c := range changes {
		if err := out.audit("entity.update", c.before.ID, snap(c.before), c.after); err != nil {
			return 0, err
		}
		payload := map[string]any{"slug": c.before.Slug, "type": c.before.Type, "version": c.after.Version, "attributes": c.patch}
		if err := out.event("entity.updated", c.before.ID, payload); err != nil {
			return 0, err
		}
	}
	return len(changes), nil
}

func (s *Service) bulkKnowledge(ctx context.Context, tx storage.DB, o *ontology.Ontology, docs []KnowledgeWrite, out *outbox) (int, int, error) {
	if len(docs) == 0 {
		return 0, 0, nil
	}
	slugs := make([]string, len(docs))
	for i, d := range docs {
		slugs[i] = d.Slug
	}
	existing, err := loadKnowledgeBySlug(ctx, tx, slugs)
	if err != nil {
		return 0, 0, err
	}
	var entityRows, docRows [][]any
	updates := &pgx.Batch{}
	created, updated := 0, 0
	for _, d := range docs {
		in := KnowledgeInput{Slug: d.Slug, Kind: d.Kind, Title: d.Title, Body: d.Body, Tags: nonNil(d.Tags)}
		name, err := validateKnowledge(o, in)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", d.Slug, err)
		}
		cur, found := existing[d.Slug]
		switch {
		case found && cur.Type != in.Kind:
			return 0, 0, fmt.Errorf("%s: %w", d.Slug, invalid("kind", ErrInvalid, "%s is a %s, not a %s", cur.Slug, cur.Type, in.Kind))
		case found:
			if cur.Title == in.Title && cur.Body == in.Body && slices.Equal(cur.Tags, in.Tags) && cur.Kind == in.Kind {
				continue
			}
			updates.Queue(`INSERT INTO knowledge_entities (entity_id, kind, title, body, tags) VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (entity_id) DO UPDATE SET kind = excluded.kind, title = excluded.title, body = excluded.body,
					tags = excluded.tags, updated_at = now()`, cur.ID, in.Kind, in.Title, in.Body, in.Tags)
			updates.Queue(`UPDATE entities SET version = version + 1, updated_at = now() WHERE id = $1`, cur.ID)
			before := knowledgeDoc{ID: cur.ID, Slug: cur.Slug, Kind: cur.Kind, Title: cur.Title, Body: cur.Body, Tags: cur.Tags, Version: cur.Version}
			after := knowledgeDoc{ID: cur.ID, Slug: cur.Slug, Kind: in.Kind, Title: in.Title, Body: in.Body, Tags: in.Tags, Version: cur.Version + 1}
			if err := out.audit("knowledge.upsert", cur.ID, before, after); err != nil {
				return 0, 0, err
			}
			if err := out.event("knowledge.upserted", cur.ID, knowledgeEvent(after, false)); err != nil {
				return 0, 0, err
			}
			updated++
		default:
			u, err := uuid.NewV7()
			if err != nil {
				return 0, 0, fmt.Errorf("generate id: %w", err)
			}
			t, _ := o.Type(in.Kind)
			entityRows = append(entityRows, []any{pgID(u), in.Slug, in.Kind, name, t.DefaultState, []byte(`{}`)})
			docRows = append(docRows, []any{pgID(u), in.Kind, in.Title, in.Body, in.Tags})
			after := knowledgeDoc{ID: u.String(), Slug: in.Slug, Kind: in.Kind, Title: in.Title, Body: in.Body, Tags: in.Tags, Version: 1}
			if err := out.audit("knowledge.upsert", after.ID, nil, after); err != nil {
				return 0, 0, err
			}
			if err := out.event("knowledge.upserted", after.ID, knowledgeEvent(after, true)); err != nil {
				return 0, 0, err
			}
			created++
		}
	}
	if len(entityRows) > 0 {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"entities"}, []string{"id", "slug", "type", "name", "state", "attributes"},
			pgx.CopyFromRows(entityRows)); err != nil {
			return 0, 0, fmt.Errorf("bulk insert knowledge entities: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"knowledge_entities"}, []string{"entity_id", "kind", "title", "body", "tags"},
			pgx.CopyFromRows(docRows)); err != nil {
			return 0, 0, fmt.Errorf("bulk insert knowledge: %w", err)
		}
	}
	if updates.Len() > 0 {
		if err := tx.SendBatch(ctx, updates).Close(); err != nil {
			return 0, 0, fmt.Errorf("bulk update knowledge: %w", err)
		}
	}
	return created, updated, nil
}

type edgeKey struct{ source, typ, target string }

func (s *Service) bulkEdges(ctx context.Context, tx storage.DB, o *ontology.Ontology, edges []NewEdge, now time.Time, out *outbox) (int, error) {
	if len(edges) == 0 {
		return 0, nil
	}
	slugSet := map[string]bool{}
	for _, e := range edges {
		slugSet[e.Source], slugSet[e.Target] = true, true
	}
	ents, err := loadEntitiesBySlug(ctx, tx, sortedSet(slugSet), false)
	if err != nil {
		return 0, err
	}
	ids := make([]string, 0, len(ents))
	for _, e := range ents {
		ids = append(ids, e.ID)
	}
	// Current edges out of the sources concerned: one read instead of one per edge.
	rows, err := tx.Query(ctx, `SELECT source_id::text, type, target_id::text FROM relationships
		WHERE valid_to IS NULL AND source_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return 0, fmt.Errorf("read relationships: %w", err)
	}
	have := map[edgeKey]bool{}
	var k edgeKey
	_, err = pgx.ForEachRow(rows, []any{&k.source, &k.typ, &k.target}, func() error { have[k] = true; return nil })
	if err != nil {
		return 0, fmt.Errorf("read relationships: %w", err)
	}
	var copyRows [][]any
	for _, e := range edges {
		src, ok := ents[e.Source]
		if !ok {
			return 0, fmt.Errorf("relationship %s -%s-> %s: source: %w", e.Source, e.Type, e.Target, ErrNotFound)
		}
		dst, ok := ents[e.Target]
		if !ok {
			return 0, fmt.Errorf("relationship %s -%s-> %s: target: %w", e.Source, e.Type, e.Target, ErrNotFound)
		}
		if src.ID == dst.ID {
			return 0, fmt.Errorf("relationship %s -%s-> %s: %w", e.Source, e.Type, e.Target,
				invalid("target", ErrInvalid, "an entity cannot be related to itself"))
		}
		if err := o.ValidateEdge(e.Type, src.Type, dst.Type); err != nil {
			return 0, fmt.Errorf("relationship %s -%s-> %s: %w", e.Source, e.Type, e.Target,
				&ValidationError{Field: "type", Reason: err.Error(), Err: err})
		}
		key := edgeKey{src.ID, e.Type, dst.ID}
		if have[key] {
			continue
		}
		have[key] = true
		u, err := uuid.NewV7()
		if err != nil {
			return 0, fmt.Errorf("generate id: %w", err)
		}
		srcID, err := parseID(src.ID)
		if err != nil {
			return 0, err
		}
		dstID, err := parseID(dst.ID)
		if err != nil {
			return 0, err
		}
		copyRows = append(copyRows, []any{pgID(u), e.Type, srcID, dstID, []byte(`{}`), now})
		r := Relationship{ID: u.String(), Type: e.Type, SourceID: src.ID, SourceSlug: src.Slug, TargetID: dst.ID,
			TargetSlug: dst.Slug, Attributes: map[string]any{}, ValidFrom: now}
		if err := out.audit("relationship.create", src.ID, nil, r); err != nil {
			return 0, err
		}
		if err := out.event("relationship.created", src.ID, r); err != nil {
			return 0, err
		}
	}
	if len(copyRows) == 0 {
		return 0, nil
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"relationships"}, []string{"id", "type", "source_id", "target_id", "attributes", "valid_from"},
		pgx.CopyFromRows(copyRows)); err != nil {
		return 0, fmt.Errorf("bulk insert relationships: %w", err)
	}
	return len(copyRows), nil
}

// loadKnowledgeBySlug reads existing knowledge entities (locked), keyed by slug.
func loadKnowledgeBySlug(ctx context.Context, tx storage.DB, slugs []string) (map[string]Knowledge, error) {
	rows, err := tx.Query(ctx, `SELECT e.id::text, e.slug, e.type, e.version, coalesce(k.kind, ''), coalesce(k.title, ''),
			coalesce(k.body, ''), coalesce(k.tags, '{}')
		FROM entities e LEFT JOIN knowledge_entities k ON k.entity_id = e.id
		WHERE e.slug = ANY($1) ORDER BY e.id FOR NO KEY UPDATE OF e`, slugs)
	if err != nil {
		return nil, fmt.Errorf("read knowledge: %w", err)
	}
	out := map[string]Knowledge{}
	var k Knowledge
	_, err = pgx.ForEachRow(rows, []any{&k.ID, &k.Slug, &k.Type, &k.Version, &k.Kind, &k.Title, &k.Body, &k.Tags}, func() error {
		out[k.Slug] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read knowledge: %w", err)
	}
	return out, nil
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// SyncChecksBulk re-derives the checks of the entities with the given slugs in tx (one
// read of the graph facts for all of them) and announces the change once. It returns how
// many check definitions were written.
func (s *Service) SyncChecksBulk(ctx context.Context, tx pgx.Tx, m Meta, o *ontology.Ontology, slugs []string) (int, error) {
	if err := checkMeta(m); err != nil {
		return 0, err
	}
	ents, err := loadEntitiesBySlug(ctx, tx, slugs, false)
	if err != nil {
		return 0, err
	}
	targets := make([]checks.Target, 0, len(ents))
	for _, slug := range sortedKeys(ents) {
		targets = append(targets, target(ents[slug]))
	}
	ch, err := s.check.SyncMany(ctx, tx, o, targets)
	if err != nil {
		return 0, fmt.Errorf("derive checks: %w", err)
	}
	if err := announceChecks(ctx, tx, m, "", ch); err != nil {
		return 0, err
	}
	return ch.Count(), nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// outbox collects audit rows and events of a bulk write and writes them with COPY.
type outbox struct {
	m      Meta
	audits audit.Rows
	events []eventbus.Event
}

// audit collects a row, marshalled now: the values it names may change before flush.
func (o *outbox) audit(action, entityID string, before, after any) error {
	return o.audits.Add(auditOf(o.m, action, entityID, before, after))
}

func (o *outbox) event(typ, entityID string, payload any) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("event %s: %w", typ, err)
	}
	o.events = append(o.events, eventbus.Event{Type: typ, EntityID: entityID, CorrelationID: o.m.CorrelationID,
		Actor: o.m.Actor, Payload: raw})
	return nil
}

// flush writes the collected rows: the audit rows by COPY (audit.Rows), the events by
// eventbus.AppendMany, which takes the outbox's append lock for the rest of the transaction
// before it COPYs them, so ids still become visible in commit order.
func (o *outbox) flush(ctx context.Context, tx storage.DB) error {
	if err := o.audits.Copy(ctx, tx); err != nil {
		return fmt.Errorf("bulk audit: %w", err)
	}
	if _, err := eventbus.AppendMany(ctx, tx, o.events); err != nil {
		return fmt.Errorf("bulk events: %w", err)
	}
	return nil
}

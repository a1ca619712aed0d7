package graphstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// The bulk writes of the seed ingest (graph.Service.ApplyBulk): set-based reads, COPY and
// pipelined batches instead of several round trips per row, in the caller's transaction.

const (
	// qBulkUpdateAttributes writes the attributes $2 of the entities $1 (pairwise).
	qBulkUpdateAttributes = `UPDATE entities e SET attributes = v.attributes, version = e.version + 1, updated_at = now()
		FROM (SELECT unnest($1::uuid[]) AS id, unnest($2::jsonb[]) AS attributes) v WHERE e.id = v.id`
	// qCurrentEdgesFrom reads the current edges out of the entities $1.
	qCurrentEdgesFrom = `SELECT source_id::text, type, target_id::text FROM relationships
		WHERE valid_to IS NULL AND source_id = ANY($1::uuid[])`
	// qLockKnowledgeBySlug locks and reads the entities $1 with their knowledge text (absent
	// for an entity of no knowledge kind).
	qLockKnowledgeBySlug = `SELECT e.id::text, e.slug, e.type, e.version, coalesce(k.kind, ''), coalesce(k.title, ''),
			coalesce(k.body, ''), coalesce(k.tags, '{}')
		FROM entities e LEFT JOIN knowledge_entities k ON k.entity_id = e.id
		WHERE e.slug = ANY($1) ORDER BY e.id FOR NO KEY UPDATE OF e`
)

var (
	entityColumns       = []string{"id", "slug", "type", "name", "state", "attributes"}
	knowledgeColumns    = []string{"entity_id", "kind", "title", "body", "tags"}
	relationshipColumns = []string{"id", "type", "source_id", "target_id", "attributes", "valid_from"}
)

func pgID(u uuid.UUID) pgtype.UUID { return pgtype.UUID{Bytes: u, Valid: true} }

// EntityRow is an entity to COPY; Attributes is its JSON object.
type EntityRow struct {
	ID                      uuid.UUID
	Slug, Type, Name, State string
	Attributes              []byte
}

// CopyEntities inserts rows by COPY; a slug that exists is apierr.ErrDuplicate (the whole
// COPY fails).
func (s *Store) CopyEntities(ctx context.Context, rows []EntityRow) error {
	src := make([][]any, len(rows))
	for i, r := range rows {
		src[i] = []any{pgID(r.ID), r.Slug, r.Type, r.Name, r.State, r.Attributes}
	}
	if _, err := s.db.CopyFrom(ctx, pgx.Identifier{"entities"}, entityColumns, pgx.CopyFromRows(src)); err != nil {
		if pg.IsUniqueViolation(err, "") {
			return fmt.Errorf("%w: %w", apierr.ErrDuplicate, err)
		}
		return err
	}
	return nil
}

// KnowledgeRow is the text of a knowledge entity to COPY.
type KnowledgeRow struct {
	EntityID uuid.UUID
	KnowledgeText
}

// CopyKnowledge inserts knowledge rows by COPY (their entities first: CopyEntities).
func (s *Store) CopyKnowledge(ctx context.Context, rows []KnowledgeRow) error {
	src := make([][]any, len(rows))
	for i, r := range rows {
		src[i] = []any{pgID(r.EntityID), r.Kind, r.Title, r.Body, r.Tags}
	}
	_, err := s.db.CopyFrom(ctx, pgx.Identifier{"knowledge_entities"}, knowledgeColumns, pgx.CopyFromRows(src))
	return err
}

// EdgeRow is a relationship to COPY, with no attributes.
type EdgeRow struct {
	ID, Source, Target uuid.UUID
	Type               string
	ValidFrom          time.Time
}

// CopyRelationships inserts edges by COPY.
func (s *Store) CopyRelationships(ctx context.Context, rows []EdgeRow) error {
	src := make([][]any, len(rows))
	for i, r := range rows {
		src[i] = []any{pgID(r.ID), r.Type, pgID(r.Source), pgID(r.Target), []byte(`{}`), r.ValidFrom}
	}
	_, err := s.db.CopyFrom(ctx, pgx.Identifier{"relationships"}, relationshipColumns, pgx.CopyFromRows(src))
	return err
}

// UpdateAttributesBulk writes attrs[i] (a JSON object) as the attributes of the entity
// ids[i], bumping each version, in one statement.
func (s *Store) UpdateAttributesBulk(ctx context.Context, ids []uuid.UUID, attrs [][]byte) error {
	pids := make([]pgtype.UUID, len(ids))
	for i, id := range ids {
		pids[i] = pgID(id)
	}
	_, err := s.db.Exec(ctx, qBulkUpdateAttributes, pids, attrs)
	return err
}

// KnowledgeUpdate is new text for the existing knowledge entity ID.
type KnowledgeUpdate struct {
	ID string
	KnowledgeText
}

// UpdateKnowledgeBulk writes the texts and bumps the entities' versions, in one pipelined
// batch.
func (s *Store) UpdateKnowledgeBulk(ctx context.Context, ups []KnowledgeUpdate) error {
	if len(ups) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, u := range ups {
		b.Queue(qUpsertKnowledge, u.ID, u.Kind, u.Title, u.Body, u.Tags)
		b.Queue(qBumpVersion, u.ID)
	}
	return s.db.SendBatch(ctx, b).Close()
}

// Edge is a current edge between entity ids.
type Edge struct{ Source, Type, Target string }

// CurrentEdgesFrom returns the current edges out of the entities ids, in one read.
func (s *Store) CurrentEdgesFrom(ctx context.Context, ids []string) ([]Edge, error) {
	rows, err := s.db.Query(ctx, qCurrentEdgesFrom, ids)
	if err != nil {
		return nil, err
	}
	var out []Edge
	var e Edge
	_, err = pgx.ForEachRow(rows, []any{&e.Source, &e.Type, &e.Target}, func() error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// KnowledgeBySlug locks and reads the entities the slugs name with their knowledge text
// (ID, Slug, Type, Version and the text; Kind is "" for an entity of no knowledge kind),
// keyed by slug.
func (s *Store) KnowledgeBySlug(ctx context.Context, slugs []string) (map[string]storage.Knowledge, error) {
	rows, err := s.db.Query(ctx, qLockKnowledgeBySlug, slugs)
	if err != nil {
		return nil, fmt.Errorf("read knowledge: %w", err)
	}
	out := map[string]storage.Knowledge{}
	var k storage.Knowledge
	_, err = pgx.ForEachRow(rows, []any{&k.ID, &k.Slug, &k.Type, &k.Version, &k.Kind, &k.Title, &k.Body, &k.Tags}, func() error {
		out[k.Slug] = k
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read knowledge: %w", err)
	}
	return out, nil
}

// CopyAudit writes the collected audit rows by COPY (audit.Rows).
func (s *Store) CopyAudit(ctx context.Context, rows *audit.Rows) error { return rows.Copy(ctx, s.db) }

// AppendEvents appends events (payloads already marshalled) with eventbus.AppendMany, which
// takes the outbox's append lock for the rest of the transaction before it COPYs them, so
// ids still become visible in commit order.
func (s *Store) AppendEvents(ctx context.Context, events []eventbus.Event) error {
	_, err := eventbus.AppendMany(ctx, s.db, events)
	return err
}

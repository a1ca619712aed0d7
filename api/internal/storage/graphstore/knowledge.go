package graphstore

import (
	"context"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/pg"
)

const (
	qInsertKnowledgeEntity = `INSERT INTO entities (id, slug, type, name, state, attributes) VALUES ($1, $2, $3, $4, $5, '{}')`
	qInsertKnowledge       = `INSERT INTO knowledge_entities (entity_id, kind, title, body, tags) VALUES ($1, $2, $3, $4, $5)`
	// qUpsertKnowledge writes the knowledge row of $1, creating it when missing.
	qUpsertKnowledge = qInsertKnowledge + `
		ON CONFLICT (entity_id) DO UPDATE SET kind = excluded.kind, title = excluded.title, body = excluded.body,
			tags = excluded.tags, updated_at = now()`
	// qBumpVersion counts a change of the entity $1 that is not in its row (its knowledge).
	qBumpVersion = `UPDATE entities SET version = version + 1, updated_at = now() WHERE id = $1`
	// qBumpVersionReturning is qBumpVersion returning the new version.
	qBumpVersionReturning = qBumpVersion + ` RETURNING version`
)

// KnowledgeText is the text of a knowledge entity.
type KnowledgeText struct {
	Kind, Title, Body string
	Tags              []string
}

// GetKnowledge reads the knowledge entity ref names (slug or id), locked with lock; an
// entity that is not of a knowledge kind is apierr.ErrNotFound.
func (s *Store) GetKnowledge(ctx context.Context, ref string, lock bool) (storage.Knowledge, error) {
	return storage.GetKnowledge(ctx, s.db, ref, lock)
}

// InsertKnowledge inserts a knowledge entity (no attributes) and its text; a slug that
// exists is apierr.ErrDuplicate.
func (s *Store) InsertKnowledge(ctx context.Context, id, slug, name, state string, k KnowledgeText) error {
	if _, err := s.db.Exec(ctx, qInsertKnowledgeEntity, id, slug, k.Kind, name, state); err != nil {
		if pg.IsUniqueViolation(err, "") {
			return fmt.Errorf("%w: %s", apierr.ErrDuplicate, slug)
		}
		return fmt.Errorf("insert %s: %w", slug, err)
	}
	if _, err := s.db.Exec(ctx, qInsertKnowledge, id, k.Kind, k.Title, k.Body, k.Tags); err != nil {
		return fmt.Errorf("insert %s: %w", slug, err)
	}
	return nil
}

// UpdateKnowledge writes the text of the knowledge entity id (slug names it in errors) and
// returns its new version.
func (s *Store) UpdateKnowledge(ctx context.Context, id, slug string, k KnowledgeText) (int64, error) {
	if _, err := s.db.Exec(ctx, qUpsertKnowledge, id, k.Kind, k.Title, k.Body, k.Tags); err != nil {
		return 0, fmt.Errorf("update %s: %w", slug, err)
	}
	var version int64
	if err := s.db.QueryRow(ctx, qBumpVersionReturning, id).Scan(&version); err != nil {
		return 0, fmt.Errorf("update %s: %w", slug, err)
	}
	return version, nil
}

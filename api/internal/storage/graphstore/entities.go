package graphstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
)

const (
	// qInsertEntity inserts an entity unless its slug exists.
	qInsertEntity = `INSERT INTO entities (id, slug, type, name, state, attributes)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (slug) DO NOTHING`
	// qSetState moves the entity $1 at version $3 to state $2.
	qSetState = `UPDATE entities SET state = $2, version = version + 1, updated_at = now()
		WHERE id = $1 AND version = $3 RETURNING version, updated_at`
	// qLiveDependents lists up to five live sources of current edges of the types $2 into $1.
	qLiveDependents = `SELECT s.slug, r.type FROM relationships r JOIN entities s ON s.id = r.source_id
				WHERE r.target_id = $1 AND r.valid_to IS NULL AND r.type = ANY($2) AND s.state <> 'destroyed'
				ORDER BY s.slug LIMIT 5`
	// qLockEntities locks the entities $1 in id order and reads them.
	qLockEntities = `SELECT ` + storage.EntityColumns + storage.EntityFrom + `WHERE e.id = ANY($1::uuid[]) ORDER BY e.id FOR NO KEY UPDATE OF e`
	// qEntitiesBySlug reads the entities $1 in id order; qLockEntitiesBySlug locks them too.
	qEntitiesBySlug     = `SELECT ` + storage.EntityColumns + storage.EntityFrom + `WHERE e.slug = ANY($1) ORDER BY e.id`
	qLockEntitiesBySlug = qEntitiesBySlug + ` FOR NO KEY UPDATE OF e`
	// qLockIDsBySlug locks the entities $1 in id order without reading them.
	qLockIDsBySlug = `SELECT id FROM entities WHERE slug = ANY($1) ORDER BY id FOR NO KEY UPDATE`
)

// GetEntity reads the entity ref names (slug or id) with its health; with lock its row is
// locked FOR NO KEY UPDATE (storage.EntitySQL).
func (s *Store) GetEntity(ctx context.Context, ref string, lock bool) (storage.Entity, error) {
	return storage.GetEntity(ctx, s.db, ref, lock)
}

// InsertEntity inserts an entity; an existing slug is apierr.ErrDuplicate (nothing written).
func (s *Store) InsertEntity(ctx context.Context, id, slug, typ, name, state string, attrs map[string]any) error {
	tag, err := s.db.Exec(ctx, qInsertEntity, id, slug, typ, name, state, attrs)
	if err != nil {
		return fmt.Errorf("insert entity %s: %w", slug, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: entity %s", apierr.ErrDuplicate, slug)
	}
	return nil
}

// SetState moves the entity id from version to state and returns its new version and
// updated_at; a row no longer at version is apierr.ErrVersionConflict.
func (s *Store) SetState(ctx context.Context, id, state string, version int64) (int64, time.Time, error) {
	var v int64
	var at time.Time
	err := s.db.QueryRow(ctx, qSetState, id, state, version).Scan(&v, &at)
	if storage.IsNoRows(err) {
		return 0, time.Time{}, fmt.Errorf("%w: entity %s changed concurrently", apierr.ErrVersionConflict, id)
	}
	if err != nil {
		return 0, time.Time{}, err
	}
	return v, at, nil
}

// Dependent is the live source of an edge into an entity.
type Dependent struct{ Slug, Type string }

// LiveDependents returns up to five live (not destroyed) sources of current edges of the
// types into the entity id, in slug order.
func (s *Store) LiveDependents(ctx context.Context, id string, types []string) ([]Dependent, error) {
	rows, err := s.db.Query(ctx, qLiveDependents, id, types)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Dependent, error) {
		var d Dependent
		err := r.Scan(&d.Slug, &d.Type)
		return d, err
	})
}

// LockEntities locks the entities ids (in id order, so two writers cannot deadlock) and
// reads them.
func (s *Store) LockEntities(ctx context.Context, ids ...string) ([]storage.Entity, error) {
	rows, err := s.db.Query(ctx, qLockEntities, ids)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, storage.CollectEntity)
}

// LockSlugs locks the entities the slugs name, in id order, without reading them (a slug
// that names none is skipped).
func (s *Store) LockSlugs(ctx context.Context, slugs []string) error {
	_, err := s.db.Exec(ctx, qLockIDsBySlug, slugs)
	return err
}

// EntitiesBySlug reads the entities the slugs name (locked in id order with lock), keyed by
// slug.
func (s *Store) EntitiesBySlug(ctx context.Context, slugs []string, lock bool) (map[string]storage.Entity, error) {
	sql := qEntitiesBySlug
	if lock {
		sql = qLockEntitiesBySlug
	}
	rows, err := s.db.Query(ctx, sql, slugs)
	if err != nil {
		return nil, fmt.Errorf("read entities: %w", err)
	}
	list, err := pgx.CollectRows(rows, storage.CollectEntity)
	if err != nil {
		return nil, fmt.Errorf("read entities: %w", err)
	}
	out := make(map[string]storage.Entity, len(list))
	for _, e := range list {
		out[e.Slug] = e
	}
	return out, nil
}

package graphstore

import (
	"context"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
)

const (
	// qLockIDs locks the entities $1 in id order without reading them.
	qLockIDs = `SELECT id FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`
	// qInsertEdge inserts an edge unless the same current edge exists.
	qInsertEdge = `INSERT INTO relationships (id, type, source_id, target_id, attributes) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (source_id, type, target_id) WHERE valid_to IS NULL DO NOTHING`
	// qCurrentEdge reads the current edge $1 -$2-> $3.
	qCurrentEdge = qRelationship + `r.source_id = $1 AND r.type = $2 AND r.target_id = $3 AND r.valid_to IS NULL`
	// qRelationshipByID reads the edge $1; qLockRelationship locks it too.
	qRelationshipByID = qRelationship + `r.id = $1`
	qLockRelationship = qRelationshipByID + ` FOR UPDATE OF r`
	// qEndRelationship ends the edge $1. greatest(): a transaction that started before the
	// edge was created must still end it no earlier than it began.
	qEndRelationship = `UPDATE relationships SET valid_to = greatest(now(), valid_from) WHERE id = $1`

	qRelationship = `SELECT ` + storage.RelationshipColumns + storage.RelationshipFrom + `WHERE `
)

// LockIDs locks the entities ids in id order, without reading them.
func (s *Store) LockIDs(ctx context.Context, ids ...string) error {
	_, err := s.db.Exec(ctx, qLockIDs, ids)
	return err
}

// InsertEdge inserts the edge id source -typ-> target with attrs and reports whether it was
// inserted: false when that current edge already exists (nothing is written).
func (s *Store) InsertEdge(ctx context.Context, id, typ, sourceID, targetID string, attrs map[string]any) (bool, error) {
	tag, err := s.db.Exec(ctx, qInsertEdge, id, typ, sourceID, targetID, attrs)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() > 0, nil
}

// CurrentEdge returns the current (not ended) edge source -typ-> target, if any.
func (s *Store) CurrentEdge(ctx context.Context, typ, sourceID, targetID string) (storage.Relationship, bool, error) {
	r, err := storage.ScanRelationship(s.db.QueryRow(ctx, qCurrentEdge, sourceID, typ, targetID))
	if storage.IsNoRows(err) {
		return storage.Relationship{}, false, nil
	}
	if err != nil {
		return storage.Relationship{}, false, fmt.Errorf("read relationship: %w", err)
	}
	return r, true, nil
}

// GetRelationship reads the edge id, locked FOR UPDATE with lock; none is apierr.ErrNotFound.
func (s *Store) GetRelationship(ctx context.Context, id string, lock bool) (storage.Relationship, error) {
	sql := qRelationshipByID
	if lock {
		sql = qLockRelationship
	}
	r, err := storage.ScanRelationship(s.db.QueryRow(ctx, sql, id))
	if storage.IsNoRows(err) {
		return storage.Relationship{}, fmt.Errorf("%w: relationship %q", apierr.ErrNotFound, id)
	}
	if err != nil {
		return storage.Relationship{}, fmt.Errorf("read relationship: %w", err)
	}
	return r, nil
}

// EndRelationship sets the edge id's valid_to.
func (s *Store) EndRelationship(ctx context.Context, id string) error {
	if _, err := s.db.Exec(ctx, qEndRelationship, id); err != nil {
		return fmt.Errorf("end relationship: %w", err)
	}
	return nil
}

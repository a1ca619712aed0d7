package graph

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/checksync"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/pg"
)

// currentEdge returns the current (not ended) edge source -typ-> target, if any.
func currentEdge(ctx context.Context, q pg.Querier, typ, sourceID, targetID string) (Relationship, bool, error) {
	r, err := storage.ScanRelationship(q.QueryRow(ctx, `SELECT `+storage.RelationshipColumns+storage.RelationshipFrom+
		`WHERE r.source_id = $1 AND r.type = $2 AND r.target_id = $3 AND r.valid_to IS NULL`, sourceID, typ, targetID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Relationship{}, false, nil
	}
	if err != nil {
		return Relationship{}, false, fmt.Errorf("read relationship: %w", err)
	}
	return r, true, nil
}

// CreateRelationship creates the edge source -typ-> target (slugs or ids) after checking the
// ontology allows it. Creation is idempotent: when the current edge already exists it is
// returned with created=false and nothing is written.
func (s *Service) CreateRelationship(ctx context.Context, m Meta, typ, source, target string, attrs map[string]any) (Relationship, bool, error) {
	if err := checkMeta(m); err != nil {
		return Relationship{}, false, err
	}
	var out Relationship
	var created bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, created, err = s.CreateRelationshipTx(ctx, tx, m, typ, source, target, attrs)
		return err
	})
	if err != nil {
		return Relationship{}, false, err
	}
	return out, created, nil
}

// CreateRelationshipTx is CreateRelationship inside the caller's transaction.
func (s *Service) CreateRelationshipTx(ctx context.Context, tx pgx.Tx, m Meta, typ, source, target string, attrs map[string]any) (Relationship, bool, error) {
	if err := checkMeta(m); err != nil {
		return Relationship{}, false, err
	}
	if typ == "" {
		return Relationship{}, false, invalid("type", ErrInvalid, "relationship type is required")
	}
	norm, err := normalizeAttrs(attrs)
	if err != nil {
		return Relationship{}, false, err
	}
	src, err := storage.GetEntity(ctx, tx, source, false)
	if err != nil {
		return Relationship{}, false, fieldNotFound("source", err)
	}
	dst, err := storage.GetEntity(ctx, tx, target, false)
	if err != nil {
		return Relationship{}, false, fieldNotFound("target", err)
	}
	if src.ID == dst.ID {
		return Relationship{}, false, invalid("target", ErrInvalid, "an entity cannot be related to itself")
	}
	if err := s.Ontology().ValidateEdge(typ, src.Type, dst.Type); err != nil {
		return Relationship{}, false, &ValidationError{Field: "type", Reason: err.Error(), Err: err}
	}
	return s.insertEdge(ctx, tx, m, typ, src, dst, norm)
}

// insertEdge writes a validated edge with its audit row and event and re-derives both ends'
// checks (a hosts or backs-up-to edge changes how a guest or backup target is probed). An
// existing current edge is returned unchanged.
func (s *Service) insertEdge(ctx context.Context, tx pgx.Tx, m Meta, typ string, src, dst Entity, attrs map[string]any) (Relationship, bool, error) {
	id, err := newID()
	if err != nil {
		return Relationship{}, false, err
	}
	// Both ends are locked (in id order) before the edge exists: its uncommitted row would
	// otherwise make a concurrent writer of the same edge (a seed ingest holding an end)
	// wait on this transaction while this one waits on that end.
	if _, err := tx.Exec(ctx, `SELECT id FROM entities WHERE id = ANY($1::uuid[]) ORDER BY id FOR NO KEY UPDATE`,
		[]string{src.ID, dst.ID}); err != nil {
		return Relationship{}, false, fmt.Errorf("lock relationship ends: %w", err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO relationships (id, type, source_id, target_id, attributes) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (source_id, type, target_id) WHERE valid_to IS NULL DO NOTHING`, id, typ, src.ID, dst.ID, attrs)
	if err != nil {
		return Relationship{}, false, fmt.Errorf("insert relationship %s -%s-> %s: %w", src.Slug, typ, dst.Slug, err)
	}
	if tag.RowsAffected() == 0 {
		r, ok, err := currentEdge(ctx, tx, typ, src.ID, dst.ID)
		if err != nil {
			return Relationship{}, false, err
		}
		if !ok {
			return Relationship{}, false, fmt.Errorf("relationship %s -%s-> %s: insert skipped but no current edge found", src.Slug, typ, dst.Slug)
		}
		return r, false, nil
	}
	r, err := storage.ScanRelationship(tx.QueryRow(ctx, `SELECT `+storage.RelationshipColumns+storage.RelationshipFrom+`WHERE r.id = $1`, id))
	if err != nil {
		return Relationship{}, false, fmt.Errorf("read relationship: %w", err)
	}
	if err := writeAudit(ctx, tx, m, "relationship.create", src.ID, nil, r); err != nil {
		return Relationship{}, false, err
	}
	ch, err := s.deriveEnds(ctx, tx, src.ID, dst.ID)
	if err != nil {
		return Relationship{}, false, err
	}
	if err := appendEvent(ctx, tx, m, "relationship.created", src.ID, r); err != nil {
		return Relationship{}, false, err
	}
	if err := announceChecks(ctx, tx, m, "", ch); err != nil {
		return Relationship{}, false, err
	}
	return r, true, nil
}

// deriveEnds locks both ends of an edge (in id order, so two edge writers cannot deadlock)
// and re-derives their checks. It must run before the transaction's first event: an append
// holds the outbox lock until commit, and a transaction that held it while waiting for an
// entity's row lock would deadlock with one (a PATCH) that holds that row lock and waits for
// the outbox lock.
func (s *Service) deriveEnds(ctx context.Context, tx pgx.Tx, ids ...string) (checksync.Changes, error) {
	rows, err := tx.Query(ctx, `SELECT `+storage.EntityColumns+storage.EntityFrom+`WHERE e.id = ANY($1::uuid[]) ORDER BY e.id FOR NO KEY UPDATE OF e`, ids)
	if err != nil {
		return checksync.Changes{}, fmt.Errorf("lock relationship ends: %w", err)
	}
	ends, err := pgx.CollectRows(rows, storage.CollectEntity)
	if err != nil {
		return checksync.Changes{}, fmt.Errorf("lock relationship ends: %w", err)
	}
	return s.deriveChecks(ctx, tx, s.Ontology(), ends...)
}

// EndRelationship ends a current edge (sets valid_to). Ending an edge that already ended
// returns it unchanged and writes nothing.
func (s *Service) EndRelationship(ctx context.Context, m Meta, id string) (Relationship, error) {
	if err := checkMeta(m); err != nil {
		return Relationship{}, err
	}
	if !ids.IsUUID(id) {
		return Relationship{}, fmt.Errorf("%w: relationship %q", ErrNotFound, id)
	}
	var out Relationship
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		before, err := storage.ScanRelationship(tx.QueryRow(ctx, `SELECT `+storage.RelationshipColumns+storage.RelationshipFrom+`WHERE r.id = $1 FOR UPDATE OF r`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: relationship %q", ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("read relationship: %w", err)
		}
		if before.ValidTo != nil {
			out = before
			return nil
		}
		// greatest(): a transaction that started before the edge was created must still
		// end it no earlier than it began.
		if _, err := tx.Exec(ctx, `UPDATE relationships SET valid_to = greatest(now(), valid_from) WHERE id = $1`, id); err != nil {
			return fmt.Errorf("end relationship: %w", err)
		}
		if out, err = storage.ScanRelationship(tx.QueryRow(ctx, `SELECT `+storage.RelationshipColumns+storage.RelationshipFrom+`WHERE r.id = $1`, id)); err != nil {
			return fmt.Errorf("read relationship: %w", err)
		}
		if err := writeAudit(ctx, tx, m, "relationship.end", out.SourceID, before, out); err != nil {
			return err
		}
		ch, err := s.deriveEnds(ctx, tx, out.SourceID, out.TargetID)
		if err != nil {
			return err
		}
		if err := appendEvent(ctx, tx, m, "relationship.ended", out.SourceID, out); err != nil {
			return err
		}
		return announceChecks(ctx, tx, m, "", ch)
	})
	if err != nil {
		return Relationship{}, err
	}
	return out, nil
}

// fieldNotFound says which reference was missing (a not-found naming the field); errors.Is
// still matches ErrNotFound.
func fieldNotFound(field string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return &ValidationError{Field: field, Reason: err.Error(), Err: err}
	}
	return err
}

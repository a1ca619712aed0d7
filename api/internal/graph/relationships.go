package graph

import (
	"context"
	"errors"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/checksync"
	"github.com/oikos-hq/oikos/api/internal/storage/graphstore"
)

// CreateRelationship creates the edge source -typ-> target (slugs or ids) after checking the
// ontology allows it. Creation is idempotent: when the current edge already exists it is
// returned with created=false and nothing is written.
func (s *Service) CreateRelationship(ctx context.Context, m Meta, typ, source, target string, attrs map[string]any) (Relationship, bool, error) {
	if err := checkMeta(m); err != nil {
		return Relationship{}, false, err
	}
	var out Relationship
	var created bool
	err := s.inTx(ctx, func(st *graphstore.Store) error {
		var err error
		out, created, err = s.createRelationship(ctx, st, m, typ, source, target, attrs)
		return err
	})
	if err != nil {
		return Relationship{}, false, err
	}
	return out, created, nil
}

// CreateRelationshipTx is CreateRelationship inside the caller's transaction.
func (s *Service) CreateRelationshipTx(ctx context.Context, tx storage.DB, m Meta, typ, source, target string, attrs map[string]any) (Relationship, bool, error) {
	return s.createRelationship(ctx, s.on(tx), m, typ, source, target, attrs)
}

func (s *Service) createRelationship(ctx context.Context, st *graphstore.Store, m Meta, typ, source, target string, attrs map[string]any) (Relationship, bool, error) {
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
	src, err := st.GetEntity(ctx, source, false)
	if err != nil {
		return Relationship{}, false, fieldNotFound("source", err)
	}
	dst, err := st.GetEntity(ctx, target, false)
	if err != nil {
		return Relationship{}, false, fieldNotFound("target", err)
	}
	if src.ID == dst.ID {
		return Relationship{}, false, invalid("target", ErrInvalid, "an entity cannot be related to itself")
	}
	if err := s.Ontology().ValidateEdge(typ, src.Type, dst.Type); err != nil {
		return Relationship{}, false, &ValidationError{Field: "type", Reason: err.Error(), Err: err}
	}
	return s.insertEdge(ctx, st, m, typ, src, dst, norm)
}

// insertEdge writes a validated edge with its audit row and event and re-derives both ends'
// checks (a hosts or backs-up-to edge changes how a guest or backup target is probed). An
// existing current edge is returned unchanged.
func (s *Service) insertEdge(ctx context.Context, st *graphstore.Store, m Meta, typ string, src, dst Entity, attrs map[string]any) (Relationship, bool, error) {
	id, err := newID()
	if err != nil {
		return Relationship{}, false, err
	}
	// Both ends are locked (in id order) before the edge exists: its uncommitted row would
	// otherwise make a concurrent writer of the same edge (a seed ingest holding an end)
	// wait on this transaction while this one waits on that end.
	if err := st.LockIDs(ctx, src.ID, dst.ID); err != nil {
		return Relationship{}, false, fmt.Errorf("lock relationship ends: %w", err)
	}
	inserted, err := st.InsertEdge(ctx, id, typ, src.ID, dst.ID, attrs)
	if err != nil {
		return Relationship{}, false, fmt.Errorf("insert relationship %s -%s-> %s: %w", src.Slug, typ, dst.Slug, err)
	}
	if !inserted {
		r, ok, err := st.CurrentEdge(ctx, typ, src.ID, dst.ID)
		if err != nil {
			return Relationship{}, false, err
		}
		if !ok {
			return Relationship{}, false, fmt.Errorf("relationship %s -%s-> %s: insert skipped but no current edge found", src.Slug, typ, dst.Slug)
		}
		return r, false, nil
	}
	r, err := st.GetRelationship(ctx, id, false)
	if err != nil {
		return Relationship{}, false, err
	}
	if err := writeAudit(ctx, st, m, "relationship.create", src.ID, nil, r); err != nil {
		return Relationship{}, false, err
	}
	ch, err := s.deriveEnds(ctx, st, src.ID, dst.ID)
	if err != nil {
		return Relationship{}, false, err
	}
	if err := appendEvent(ctx, st, m, "relationship.created", src.ID, r); err != nil {
		return Relationship{}, false, err
	}
	if err := st.AnnounceChecks(ctx, eventOf(m, "checks.changed", ""), ch); err != nil {
		return Relationship{}, false, err
	}
	return r, true, nil
}

// deriveEnds locks both ends of an edge (in id order, so two edge writers cannot deadlock)
// and re-derives their checks. It must run before the transaction's first event: an append
// holds the outbox lock until commit, and a transaction that held it while waiting for an
// entity's row lock would deadlock with one (a PATCH) that holds that row lock and waits for
// the outbox lock.
func (s *Service) deriveEnds(ctx context.Context, st *graphstore.Store, ids ...string) (checksync.Changes, error) {
	ends, err := st.LockEntities(ctx, ids...)
	if err != nil {
		return checksync.Changes{}, fmt.Errorf("lock relationship ends: %w", err)
	}
	return s.deriveChecks(ctx, st, s.Ontology(), ends...)
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
	err := s.inTx(ctx, func(st *graphstore.Store) error {
		var err error
		out, err = s.endRelationship(ctx, st, m, id)
		return err
	})
	if err != nil {
		return Relationship{}, err
	}
	return out, nil
}

// EndRelationshipTx is EndRelationship inside the caller's transaction (a guest's move ends
// its old hosts edge and opens the new one together: api/internal/placement).
func (s *Service) EndRelationshipTx(ctx context.Context, tx storage.DB, m Meta, id string) (Relationship, error) {
	if err := checkMeta(m); err != nil {
		return Relationship{}, err
	}
	if !ids.IsUUID(id) {
		return Relationship{}, fmt.Errorf("%w: relationship %q", ErrNotFound, id)
	}
	return s.endRelationship(ctx, s.on(tx), m, id)
}

func (s *Service) endRelationship(ctx context.Context, st *graphstore.Store, m Meta, id string) (Relationship, error) {
	before, err := st.GetRelationship(ctx, id, true)
	if err != nil {
		return Relationship{}, err
	}
	if before.ValidTo != nil {
		return before, nil
	}
	if err := st.EndRelationship(ctx, id); err != nil {
		return Relationship{}, err
	}
	out, err := st.GetRelationship(ctx, id, false)
	if err != nil {
		return Relationship{}, err
	}
	if err := writeAudit(ctx, st, m, "relationship.end", out.SourceID, before, out); err != nil {
		return Relationship{}, err
	}
	ch, err := s.deriveEnds(ctx, st, out.SourceID, out.TargetID)
	if err != nil {
		return Relationship{}, err
	}
	if err := appendEvent(ctx, st, m, "relationship.ended", out.SourceID, out); err != nil {
		return Relationship{}, err
	}
	return out, st.AnnounceChecks(ctx, eventOf(m, "checks.changed", ""), ch)
}

// fieldNotFound says which reference was missing (a not-found naming the field); errors.Is
// still matches ErrNotFound.
func fieldNotFound(field string, err error) error {
	if errors.Is(err, ErrNotFound) {
		return &ValidationError{Field: field, Reason: err.Error(), Err: err}
	}
	return err
}

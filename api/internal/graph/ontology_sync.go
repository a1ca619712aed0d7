package graph

import (
	"context"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/graphstore"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// SyncOntology stores o in entity_types and relationship_types (attribute_schema is the
// resolved attribute map, never null) and makes it the ontology mutations are validated
// against. Rows already equal are not written, so a repeated sync is a no-op; changed
// reports whether any row was written. Types no longer declared are kept: entities may still
// have them.
func (s *Service) SyncOntology(ctx context.Context, o *ontology.Ontology) (bool, error) {
	var changed bool
	err := s.inTx(ctx, func(st *graphstore.Store) error {
		var err error
		changed, err = st.SyncOntology(ctx, o)
		return err
	})
	if err != nil {
		return false, err
	}
	s.SetOntology(o)
	return changed, nil
}

// SetOntology makes o the ontology mutations are validated against. SyncOntology calls it
// after its commit; a caller of SyncOntologyTx calls it after its own.
func (s *Service) SetOntology(o *ontology.Ontology) {
	if o != nil {
		s.onto.Store(o)
	}
}

// SyncOntologyTx is SyncOntology inside the caller's transaction (the seed ingest); it does
// not adopt o (see SetOntology).
func (s *Service) SyncOntologyTx(ctx context.Context, tx storage.DB, o *ontology.Ontology) (bool, error) {
	return s.on(tx).SyncOntology(ctx, o)
}

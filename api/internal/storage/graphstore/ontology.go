package graphstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/ontology"
)

const (
	// qSyncEntityType writes one entity type; the WHERE makes an equal row a no-op: nothing
	// is written and no row is returned.
	qSyncEntityType = `INSERT INTO entity_types AS et (name, parent, abstract, description, attribute_schema, required, states,
				default_state, transitions, monitoring, monitoring_none)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
			ON CONFLICT (name) DO UPDATE SET parent = excluded.parent, abstract = excluded.abstract,
				description = excluded.description, attribute_schema = excluded.attribute_schema, required = excluded.required,
				states = excluded.states, default_state = excluded.default_state, transitions = excluded.transitions,
				monitoring = excluded.monitoring, monitoring_none = excluded.monitoring_none, updated_at = now()
			WHERE (et.parent, et.abstract, et.description, et.attribute_schema, et.required, et.states, et.default_state,
					et.transitions, et.monitoring, et.monitoring_none)
				IS DISTINCT FROM (excluded.parent, excluded.abstract, excluded.description, excluded.attribute_schema,
					excluded.required, excluded.states, excluded.default_state, excluded.transitions, excluded.monitoring,
					excluded.monitoring_none)`
	// qSyncRelationshipType writes one relationship type, likewise.
	qSyncRelationshipType = `INSERT INTO relationship_types AS rt (name, description, sources, targets) VALUES ($1, $2, $3, $4)
			ON CONFLICT (name) DO UPDATE SET description = excluded.description, sources = excluded.sources,
				targets = excluded.targets, updated_at = now()
			WHERE (rt.description, rt.sources, rt.targets) IS DISTINCT FROM (excluded.description, excluded.sources, excluded.targets)`
)

// SyncOntology stores o in entity_types and relationship_types (attribute_schema is the
// resolved attribute map, never null), in one pipelined batch. Rows already equal are not
// written, so a repeated sync is a no-op; changed reports whether any row was written. Types
// no longer declared are kept: entities may still have them.
func (s *Store) SyncOntology(ctx context.Context, o *ontology.Ontology) (bool, error) {
	if o == nil {
		return false, fmt.Errorf("sync ontology: no ontology")
	}
	b := &pgx.Batch{}
	for _, t := range o.Types() {
		attrs := t.Attributes
		if attrs == nil {
			attrs = map[string]ontology.AttributeSpec{}
		}
		schema, err := json.Marshal(attrs)
		if err != nil {
			return false, fmt.Errorf("sync ontology: type %s attributes: %w", t.Name, err)
		}
		transitions, err := json.Marshal(nonNil(t.Transitions))
		if err != nil {
			return false, fmt.Errorf("sync ontology: type %s transitions: %w", t.Name, err)
		}
		monitoring, err := json.Marshal(nonNil(t.Monitoring))
		if err != nil {
			return false, fmt.Errorf("sync ontology: type %s monitoring: %w", t.Name, err)
		}
		var parent *string
		if t.Parent != "" {
			parent = &t.Parent
		}
		b.Queue(qSyncEntityType, t.Name, parent, t.Abstract, t.Description, schema, nonNil(t.Required), nonNil(t.States),
			t.DefaultState, transitions, monitoring, t.MonitoringNone)
	}
	for _, r := range o.RelationshipTypes() {
		b.Queue(qSyncRelationshipType, r.Name, r.Description, nonNil(r.Sources), nonNil(r.Targets))
	}
	res := s.db.SendBatch(ctx, b)
	var changed bool
	for i := 0; i < b.Len(); i++ {
		tag, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return false, fmt.Errorf("sync ontology: %w", err)
		}
		if tag.RowsAffected() > 0 {
			changed = true
		}
	}
	if err := res.Close(); err != nil {
		return false, fmt.Errorf("sync ontology: %w", err)
	}
	return changed, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

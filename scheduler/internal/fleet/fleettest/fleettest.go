// Package fleettest writes the seeded ontology and inventory into a test database with plain
// SQL, the shape the api's ingest leaves behind, so scheduler tests can resolve real targets
// without depending on the api.
package fleettest

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/seedfile"
)

// SeedTypes inserts every entity and relationship type of the seeded ontology.
func SeedTypes(tb testing.TB, pool *pgxpool.Pool) *ontology.Ontology {
	tb.Helper()
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		tb.Fatalf("parse seeded ontology: %v", err)
	}
	ctx := context.Background()
	// One transaction: entity_types.parent is a deferred foreign key, so order is free.
	err = pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		for _, t := range o.Types() {
			var parent *string
			if t.Parent != "" {
				parent = &t.Parent
			}
			if _, err := tx.Exec(ctx, `INSERT INTO entity_types (name, parent, abstract, states, default_state)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING`,
				t.Name, parent, t.Abstract, t.States, t.DefaultState); err != nil {
				return fmt.Errorf("insert entity type %s: %w", t.Name, err)
			}
		}
		for _, r := range o.RelationshipTypes() {
			if _, err := tx.Exec(ctx, `INSERT INTO relationship_types (name, sources, targets) VALUES ($1, $2, $3)
			ON CONFLICT (name) DO NOTHING`, r.Name, r.Sources, r.Targets); err != nil {
				return fmt.Errorf("insert relationship type %s: %w", r.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("seed types: %v", err)
	}
	return o
}

// InsertEntity inserts one entity and returns its id.
func InsertEntity(tb testing.TB, pool *pgxpool.Pool, typ, name, state string, attrs map[string]any) string {
	tb.Helper()
	if attrs == nil {
		attrs = map[string]any{}
	}
	if state == "" {
		state = "active"
	}
	id := uuid.Must(uuid.NewV7()).String()
	if _, err := pool.Exec(context.Background(), `INSERT INTO entities (id, slug, type, name, state, attributes)
		VALUES ($1, $2, $3, $4, $5, $6)`, id, typ+":"+name, typ, name, state, attrs); err != nil {
		tb.Fatalf("insert entity %s:%s: %v", typ, name, err)
	}
	return id
}

// InsertEdge inserts a current relationship.
func InsertEdge(tb testing.TB, pool *pgxpool.Pool, typ, sourceID, targetID string) {
	tb.Helper()
	if _, err := pool.Exec(context.Background(), `INSERT INTO relationships (id, type, source_id, target_id)
		VALUES ($1, $2, $3, $4)`, uuid.Must(uuid.NewV7()).String(), typ, sourceID, targetID); err != nil {
		tb.Fatalf("insert %s edge: %v", typ, err)
	}
}

// SeedInventory inserts the seeded types, entities and relationships and returns entity ids
// by slug.
func SeedInventory(tb testing.TB, pool *pgxpool.Pool) map[string]string {
	tb.Helper()
	o := SeedTypes(tb, pool)
	inv, err := seedfile.ParseInventory(seeds.Inventory())
	if err != nil {
		tb.Fatalf("parse seeded inventory: %v", err)
	}
	ids := map[string]string{}
	for _, e := range inv.Entities {
		state := e.State
		if state == "" {
			if t, ok := o.Type(e.Type); ok {
				state = t.DefaultState
			}
		}
		ids[e.Slug()] = InsertEntity(tb, pool, e.Type, e.Name, state, e.Attributes)
	}
	for _, r := range inv.Relationships {
		src, ok1 := ids[r.Source]
		dst, ok2 := ids[r.Target]
		if !ok1 || !ok2 {
			tb.Fatalf("seeded edge %s names an unknown entity", r)
		}
		InsertEdge(tb, pool, r.Type, src, dst)
	}
	return ids
}

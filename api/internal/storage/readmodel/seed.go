package readmodel

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The seed's reads (api/internal/seed): what the database holds of the seeded entities,
// their current edges and their knowledge text, for the ingest (inside its transaction,
// after it locked them) and for the drift report (in a snapshot, InSnapshot).

// The seed state's statements: of every entity but checks ("All"), or of the slugs $1 ("In").
const (
	qSeedEntitiesAll = qSeedEntities + `e.type <> 'check'`
	qSeedEntitiesIn  = qSeedEntities + `e.slug = ANY($1)`
	qSeedEdgesAll    = qSeedEdges + `s.type <> 'check'`
	qSeedEdgesIn     = qSeedEdges + `s.slug = ANY($1)`
	qSeedDocsAll     = qSeedDocs + `e.type <> 'check'`
	qSeedDocsIn      = qSeedDocs + `e.slug = ANY($1)`

	qSeedEntities = `SELECT e.slug, e.type, e.state, e.attributes FROM entities e WHERE `
	qSeedEdges    = `SELECT s.slug, r.type, t.slug FROM relationships r
		JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
		WHERE r.valid_to IS NULL AND `
	qSeedDocs = `SELECT e.slug, k.kind, k.title, k.body, k.tags FROM knowledge_entities k
		JOIN entities e ON e.id = k.entity_id WHERE `
)

// SeedEntity is a stored entity as the seed compares it.
type SeedEntity struct {
	Slug, Type, State string
	// Attributes is never nil.
	Attributes map[string]any
}

// SeedEdge is a current edge between slugs.
type SeedEdge struct{ Source, Type, Target string }

// SeedDoc is a stored knowledge document's text.
type SeedDoc struct {
	Slug, Kind, Title, Body string
	Tags                    []string
}

// SeedState reads the entities with the given slugs (all but checks when slugs is nil), the
// current edges out of them, and their knowledge text: three queries, whatever the size.
func (r *Reader) SeedState(ctx context.Context, slugs []string) ([]SeedEntity, []SeedEdge, []SeedDoc, error) {
	qe, qr, qd, args := qSeedEntitiesAll, qSeedEdgesAll, qSeedDocsAll, []any{}
	if slugs != nil {
		qe, qr, qd, args = qSeedEntitiesIn, qSeedEdgesIn, qSeedDocsIn, []any{slugs}
	}
	var ents []SeedEntity
	rows, err := r.db.Query(ctx, qe, args...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read entities: %w", err)
	}
	var e SeedEntity
	if _, err := pgx.ForEachRow(rows, []any{&e.Slug, &e.Type, &e.State, &e.Attributes}, func() error {
		if e.Attributes == nil {
			e.Attributes = map[string]any{}
		}
		ents = append(ents, e)
		e.Attributes = nil
		return nil
	}); err != nil {
		return nil, nil, nil, fmt.Errorf("read entities: %w", err)
	}
	var edges []SeedEdge
	rows, err = r.db.Query(ctx, qr, args...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read relationships: %w", err)
	}
	var x SeedEdge
	if _, err := pgx.ForEachRow(rows, []any{&x.Source, &x.Type, &x.Target}, func() error {
		edges = append(edges, x)
		return nil
	}); err != nil {
		return nil, nil, nil, fmt.Errorf("read relationships: %w", err)
	}
	var docs []SeedDoc
	rows, err = r.db.Query(ctx, qd, args...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read knowledge: %w", err)
	}
	var d SeedDoc
	if _, err := pgx.ForEachRow(rows, []any{&d.Slug, &d.Kind, &d.Title, &d.Body, &d.Tags}, func() error {
		docs = append(docs, d)
		d.Tags = nil
		return nil
	}); err != nil {
		return nil, nil, nil, fmt.Errorf("read knowledge: %w", err)
	}
	return ents, edges, docs, nil
}

// InSnapshot runs fn with a Reader on one repeatable-read, read-only transaction, so that
// all its reads agree with each other. The Reader must run on the pool.
func (r *Reader) InSnapshot(ctx context.Context, fn func(r *Reader) error) error {
	tx, err := r.snapshot(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	return fn(&Reader{db: tx, ontFunc: r.ontFunc})
}

// snapshot begins a repeatable-read, read-only transaction on the reader's pool; the caller
// rolls it back.
func (r *Reader) snapshot(ctx context.Context) (pgx.Tx, error) {
	db, ok := r.db.(interface {
		BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	})
	if !ok {
		return nil, errors.New("the reader does not run on a pool")
	}
	return db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
}

package readmodel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/pg"
)

// The fleet export's reads (api/internal/export): the entities of the exported types and the
// current edges between them, from one repeatable-read snapshot.

const (
	qExportSnapshot = `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`
	qExportNow      = `SELECT now()`
	// qExportEntities reads the entities of the types $1 not in state $2, attributes as text
	// (the export keeps every number's digits).
	qExportEntities = `SELECT e.type, e.name, e.state, e.attributes::text FROM entities e
		WHERE e.type = ANY($1) AND e.state <> $2`
	// qExportEdges reads the current edges, of any type but $1, whose both ends are of the
	// types $2 and not in state $3.
	qExportEdges = `SELECT r.type, s.slug, t.slug FROM relationships r
		JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id
		WHERE r.valid_to IS NULL AND r.type <> $1
		  AND s.type = ANY($2) AND t.type = ANY($2) AND s.state <> $3 AND t.state <> $3`
)

// ExportEntity is an entity of the fleet export, its attributes the jsonb's text.
type ExportEntity struct {
	Type, Name, State, Attributes string
}

// ExportEdge is a current edge of the fleet export, between slugs.
type ExportEdge struct {
	Type, Source, Target string
}

// FleetSnapshot reads, in one repeatable-read, read-only snapshot, its time, the entities of
// types not in state gone, and the current edges of any type but skipEdge whose both ends
// are among them. The Reader must run on the pool (or a transaction, as a savepoint).
func (r *Reader) FleetSnapshot(ctx context.Context, types []string, gone, skipEdge string) (at time.Time, ents []ExportEntity, edges []ExportEdge, err error) {
	db, ok := r.db.(pg.TxBeginner)
	if !ok {
		return at, nil, nil, errors.New("fleet snapshot: the reader cannot begin a transaction")
	}
	ents, edges = []ExportEntity{}, []ExportEdge{}
	err = pg.InTx(ctx, db, func(tx pgx.Tx) error {
		// Entities and edges from the same snapshot: no edge to an entity the first query
		// did not see.
		if _, err := tx.Exec(ctx, qExportSnapshot); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, qExportNow).Scan(&at); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, qExportEntities, types, gone)
		if err != nil {
			return fmt.Errorf("read entities: %w", err)
		}
		var e ExportEntity
		if _, err := pgx.ForEachRow(rows, []any{&e.Type, &e.Name, &e.State, &e.Attributes}, func() error {
			ents = append(ents, e)
			return nil
		}); err != nil {
			return fmt.Errorf("read entities: %w", err)
		}
		rows, err = tx.Query(ctx, qExportEdges, skipEdge, types, gone)
		if err != nil {
			return fmt.Errorf("read relationships: %w", err)
		}
		var x ExportEdge
		if _, err := pgx.ForEachRow(rows, []any{&x.Type, &x.Source, &x.Target}, func() error {
			edges = append(edges, x)
			return nil
		}); err != nil {
			return fmt.Errorf("read relationships: %w", err)
		}
		return nil
	})
	return at, ents, edges, err
}

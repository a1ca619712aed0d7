package seed

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/seedfile"
)

// Diff reports drift between the seeds and the database without writing anything: seeded
// entities, edges and documents the database lacks, seeded values that differ, and
// entities and edges the database holds that no seed declares (derived checks, executions
// and tasks excepted). It reads one consistent snapshot.
func Diff(ctx context.Context, pool *pgxpool.Pool, o *ontology.Ontology, inv *seedfile.Inventory, kn *seedfile.KnowledgeSet) (DiffReport, error) {
	if err := Validate(o, inv, kn); err != nil {
		return DiffReport{}, err
	}
	inv, kn = orEmpty(inv, kn)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return DiffReport{}, fmt.Errorf("seed diff: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	st, err := readState(ctx, tx, nil)
	if err != nil {
		return DiffReport{}, err
	}
	c := compare(inv, kn, st)
	c.diff.Extra = extras(inv, kn, st)
	if c.diff.Missing == nil {
		c.diff.Missing = []DiffItem{}
	}
	if c.diff.Extra == nil {
		c.diff.Extra = []DiffItem{}
	}
	if c.diff.Changed == nil {
		c.diff.Changed = []DiffItem{}
	}
	return c.diff, nil
}

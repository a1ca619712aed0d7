package seed

import (
	"context"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/seedfile"
)

// Diff reports drift between the seeds and the database without writing anything: seeded
// entities, edges and documents the database lacks, seeded values that differ, and
// entities and edges the database holds that no seed declares (derived checks, executions
// and tasks excepted). It reads one consistent snapshot.
func Diff(ctx context.Context, pool *storage.Pool, o *ontology.Ontology, inv *seedfile.Inventory, kn *seedfile.KnowledgeSet) (DiffReport, error) {
	if err := Validate(o, inv, kn); err != nil {
		return DiffReport{}, err
	}
	inv, kn = orEmpty(inv, kn)
	var st *state
	var readErr error
	err := readmodel.New(pool, nil).InSnapshot(ctx, func(r *readmodel.Reader) error {
		st, readErr = readState(ctx, r, nil)
		return readErr
	})
	if readErr != nil {
		return DiffReport{}, readErr
	}
	if err != nil {
		return DiffReport{}, fmt.Errorf("seed diff: %w", err)
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

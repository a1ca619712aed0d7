package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/api/internal/topology"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// blastPaths measures the two ways of computing a depth-6 blast radius without HTTP, one
// call at a time from the given roots: the recursive query (readmodel.BlastRadius, which the
// api used before the in-memory index and still uses when the graph is too large for it)
// and the index (walk, then the rows query, which also reads the topology version). It also builds a fresh index
// over the fleet and reports how long that took. The result is a note for the report.
func blastPaths(t *testing.T, e *env, meter *cpuMeter, slugs []string, n int) string {
	t.Helper()
	ctx := context.Background()
	reader := readmodel.New(e.pool, func() *ontology.Ontology { return nil })
	idx, err := topology.New(topology.Options{Pool: e.pool, Forward: readmodel.BlastForward, Reverse: readmodel.BlastReverse,
		Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(slugs))
	for i, s := range slugs {
		if err := e.pool.QueryRow(ctx, `SELECT id::text FROM entities WHERE slug = $1`, s).Scan(&ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := idx.Dependents(ctx, ids[0], 6); err != nil { // the build
		t.Fatal(err)
	}
	st := idx.Stats()
	measure := func(fn func(id string) (int, error)) string {
		lat := make([]time.Duration, n)
		a := meter.sample()
		for i := range n {
			t0 := time.Now()
			if _, err := fn(ids[i%len(ids)]); err != nil {
				t.Fatal(err)
			}
			lat[i] = time.Since(t0)
		}
		b := meter.sample()
		p50, p99, _ := percentiles(lat)
		return fmt.Sprintf("p50 %s, p99 %s, %s", ms(p50), ms(p99), meter.perOp(a, b, n))
	}
	sql := measure(func(id string) (int, error) {
		items, err := reader.BlastRadius(ctx, id, 6)
		return len(items), err
	})
	mem := measure(func(id string) (int, error) {
		// As the handler does: walk, then the rows query, which also reads the version.
		if r, ok := idx.Walk(id, 6); ok {
			items, version, err := reader.AffectedEntities(ctx, r.IDs, r.Depths)
			if err != nil || version <= r.Changes {
				return len(items), err
			}
		}
		r, err := idx.Dependents(ctx, id, 6)
		if err != nil {
			return 0, err
		}
		items, _, err := reader.AffectedEntities(ctx, r.IDs, r.Depths)
		return len(items), err
	})
	return fmt.Sprintf("without HTTP, one call at a time: recursive SQL %s; index %s; index build %s for %d edges, %d nodes",
		sql, mem, ms(st.LastBuild), st.Edges, st.Nodes)
}

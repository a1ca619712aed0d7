package seed

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/shared/pg"
)

// A stress test: re-ingests that change seeded entities, running while entities are patched, edges
// between seeded entities created and ended, and knowledge about them upserted, all finish
// without an error (a deadlock would abort one side with 40P01), and leave every check
// derived from what was committed last: one more ingest changes no check.
func TestIngestConcurrentWithMutations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	mustIngest(t, f, f.inv, f.kn)

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	worker := func(name string, fn func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				if err := fn(i); err != nil {
					errs <- fmt.Errorf("%s #%d: %w", name, i, err)
					return
				}
			}
		}()
	}
	m := graph.Meta{Actor: "test"}
	patched := []string{"lxc:jellyfin", "service:jellyfin", "proxmox-host:atlas", "service:sonarr", "lxc:docker-host"}
	worker("patch", func(i int) error {
		// check_interval changes the entity's checks: both sides write the same check rows.
		_, err := f.svc.UpdateAttributes(ctx, m, patched[i%len(patched)], map[string]any{"check_interval": 300 + i%50}, nil)
		return err
	})
	worker("edge", func(i int) error {
		r, _, err := f.svc.CreateRelationship(ctx, m, "depends-on", "service:jellyfin", "service:sonarr", nil)
		if err != nil {
			return err
		}
		_, err = f.svc.EndRelationship(ctx, m, r.ID)
		return err
	})
	worker("knowledge", func(i int) error {
		_, _, err := f.svc.UpsertKnowledge(ctx, m, graph.KnowledgeInput{Slug: "document:concurrency-note", Kind: "document",
			Title: "Note", Body: fmt.Sprint("revision ", i), About: patched[i%len(patched)]})
		return err
	})
	for i := 0; i < 12; i++ {
		_, inv, kn := embedded(t)
		for j := range inv.Entities {
			switch inv.Entities[j].Slug() {
			case "lxc:jellyfin", "lxc:docker-host", "service:sonarr":
				inv.Entities[j].Attributes["check_interval"] = 60 + i
			}
		}
		if _, err := Ingest(ctx, f.svc, f.o, inv, kn, Options{}); err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("ingest %d: %v", i, err)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	slugs := make([]string, 0, len(f.inv.Entities))
	for _, e := range f.inv.Entities {
		slugs = append(slugs, e.Slug())
	}
	var changed int
	if err := pg.InTx(ctx, f.pool, func(tx pgx.Tx) error {
		var err error
		changed, err = f.svc.SyncChecksBulk(ctx, tx, m, f.o, slugs)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if changed != 0 {
		t.Errorf("re-deriving from the committed state changed %d checks: a write left checks derived from a stale read", changed)
	}
}

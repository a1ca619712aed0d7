package storage_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestLookups(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	g, err := graph.New(graph.Options{Pool: db.Pool, Ontology: apitest.SeedOntology(t), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.SyncOntology(ctx, apitest.SeedOntology(t)); err != nil {
		t.Fatal(err)
	}
	m := graph.Meta{Actor: "test"}
	host, _, err := g.CreateEntity(ctx, m, graph.CreateEntityInput{Type: "host", Name: "box", Attributes: map[string]any{"user": "root"}})
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := g.UpsertKnowledge(ctx, m, graph.KnowledgeInput{Slug: "runbook:reboot", Kind: "runbook", Title: "Reboot",
		Body: "Turn it off and on.", Tags: []string{"ops"}, About: "host:box"})
	if err != nil {
		t.Fatal(err)
	}

	for _, ref := range []string{"host:box", host.ID} {
		e, err := storage.GetEntity(ctx, db.Pool, ref, false)
		if err != nil || e.ID != host.ID || e.Slug != "host:box" || e.Attributes["user"] != "root" || e.Version != host.Version {
			t.Errorf("GetEntity(%q) = %+v, %v", ref, e, err)
		}
		r, err := storage.ResolveEntity(ctx, db.Pool, ref)
		if err != nil || r != (storage.EntityRef{ID: host.ID, Slug: "host:box"}) {
			t.Errorf("ResolveEntity(%q) = %+v, %v", ref, r, err)
		}
		k, err := storage.GetKnowledge(ctx, db.Pool, map[string]string{"host:box": "runbook:reboot", host.ID: doc.ID}[ref], false)
		if err != nil || k.ID != doc.ID || k.Title != "Reboot" || k.Body != "Turn it off and on." || len(k.Tags) != 1 ||
			len(k.About) != 1 || k.About[0] != "host:box" || k.Attributes == nil {
			t.Errorf("GetKnowledge = %+v, %v", k, err)
		}
	}
	// Locked reads work inside a transaction.
	err = pg.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
		if _, err := storage.GetEntity(ctx, tx, "host:box", true); err != nil {
			return err
		}
		_, err := storage.GetKnowledge(ctx, tx, "runbook:reboot", true)
		return err
	})
	if err != nil {
		t.Errorf("locked reads: %v", err)
	}
	// Missing things, and an entity that is not knowledge, are the api's not-found.
	for _, miss := range []func() error{
		func() error { _, err := storage.GetEntity(ctx, db.Pool, "host:ghost", false); return err },
		func() error {
			_, err := storage.GetEntity(ctx, db.Pool, "0190a000-0000-7000-8000-00000000dead", false)
			return err
		},
		func() error { _, err := storage.ResolveEntity(ctx, db.Pool, "host:ghost"); return err },
		func() error { _, err := storage.GetKnowledge(ctx, db.Pool, "runbook:ghost", false); return err },
		func() error { _, err := storage.GetKnowledge(ctx, db.Pool, "host:box", false); return err },
	} {
		if err := miss(); !errors.Is(err, apierr.ErrNotFound) {
			t.Errorf("a missing row: %v", err)
		}
	}
}

package app_test

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/app"
	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// TestServedRoutesAreTheSpec holds the daemon as Start composes it for production (every
// feature mount, notifications on) to openapi.yaml both ways: every route it serves is an
// operation of the spec, and every operation of the spec is served. The Go client
// (shared/apiclient) and the dashboard's types are generated from that file, so a route the
// spec lacks has no client and an operation the server lacks is a client call that 404s.
func TestServedRoutesAreTheSpec(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	srv, err := app.Start(context.Background(), app.Config{DatabaseURL: db.URL, Addr: "127.0.0.1:0", NotifyEnabled: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	served := apitest.RoutesMatchSpec(t, srv.Routes())
	if len(served) < 60 {
		t.Errorf("only %d routes served", len(served))
	}
}

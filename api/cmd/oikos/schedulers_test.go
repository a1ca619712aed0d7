package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/httpapi"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// oikos schedulers lists the live schedulers with their units, and the leases no live one
// holds.
func TestRunSchedulers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(db.Pool)
	tok, err := store.Create(ctx, "viewer", auth.RoleReadonly)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(httpapi.Deps{Pool: db.Pool, Graph: g, Auth: store, Logger: zerolog.Nop()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Stop()
	})
	run := func() (int, string, string) {
		vars := map[string]string{"OIKOS_API_URL": ts.URL, "OIKOS_TOKEN": tok}
		var out, errOut bytes.Buffer
		e := &cliEnv{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			HTTP: &http.Client{Timeout: 30 * time.Second}}
		return runSchedulers(ctx, e, nil), out.String(), errOut.String()
	}
	if code, out, _ := run(); code != 0 || !strings.Contains(out, "no scheduler has started") {
		t.Fatalf("none: %d %q", code, out)
	}
	if _, err := db.Pool.Exec(ctx, `
INSERT INTO scheduler_members (id, expires_at) VALUES ('sched-a', now() + interval '15 seconds'), ('sched-b', now() - interval '1 minute');
INSERT INTO scheduler_leases (resource, holder, expires_at) VALUES
  ('host:proxmox-host:atlas', 'sched-a', now() + interval '15 seconds'), ('net', 'sched-a', now() + interval '15 seconds'),
  ('host:proxmox-host:boreas', 'sched-b', now() - interval '50 seconds')`); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"sched-a", "live", "2: proxmox-host:atlas net", "sched-b", "gone",
		"1 unit(s) held by no live scheduler", "host:proxmox-host:boreas", "last held by sched-b"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/httpapi"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// fleetDigest fingerprints every entity but the derived checks, and the live edges.
func fleetDigest(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT count(*) FROM entities WHERE type <> 'check'),
		(SELECT md5(string_agg(slug || ' ' || state || ' ' || attributes::text, ',' ORDER BY slug)) FROM entities WHERE type <> 'check'),
		(SELECT md5(string_agg(s.slug || r.type || t.slug, ',' ORDER BY s.slug, r.type, t.slug)) FROM relationships r
			JOIN entities s ON s.id = r.source_id JOIN entities t ON t.id = r.target_id WHERE r.valid_to IS NULL))`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRunExport: oikos export, against an api over the seeded demo fleet, writes a file that
// oikos seed --inventory reads back: a no-op on the same database, the same fleet on a fresh
// one; --type filters; an unknown type fails naming it.
func TestRunExport(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := pgtest.New(t)
	if code, _, stderr := runCLI(t, runSeed, map[string]string{"OIKOS_DATABASE_URL": src.URL}, "--demo"); code != 0 {
		t.Fatalf("seed: %s", stderr)
	}
	ts, tok := serveReadAPI(t, src.Pool)
	export := func(token string, args ...string) (int, string, string) {
		t.Helper()
		vars := map[string]string{"OIKOS_API_URL": ts.URL, "OIKOS_TOKEN": token}
		var out, errOut bytes.Buffer
		e := &cliEnv{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			HTTP: &http.Client{Timeout: 30 * time.Second}}
		return runExport(ctx, e, args), out.String(), errOut.String()
	}

	code, fleet, stderr := export(tok)
	if code != 0 || stderr != "" || !strings.HasPrefix(fleet, "# Oikos fleet inventory") ||
		!strings.Contains(fleet, "oikos seed --inventory fleet.yaml") || !strings.Contains(fleet, "name: jellyfin") {
		t.Fatalf("export: exit %d, stderr %q, stdout:\n%.400s", code, stderr, fleet)
	}
	file := filepath.Join(t.TempDir(), "fleet.yaml")
	if err := os.WriteFile(file, []byte(fleet), 0o600); err != nil {
		t.Fatal(err)
	}

	// Seeded back into its own database: nothing is written.
	before := fleetDigest(t, src.Pool)
	code, stdout, stderr := runCLI(t, runSeed, map[string]string{"OIKOS_DATABASE_URL": src.URL}, "--inventory", file)
	if code != 0 || !strings.Contains(stdout, "created 0, updated 0,") || !strings.Contains(stdout, "edges created 0, checks changed 0,") {
		t.Errorf("re-seed of the export: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if after := fleetDigest(t, src.Pool); after != before {
		t.Errorf("re-seed of the export changed the fleet: %s -> %s", before, after)
	}

	// Seeded into a fresh database (with the embedded ontology and knowledge): the same fleet.
	dst := pgtest.New(t)
	code, stdout, stderr = runCLI(t, runSeed, map[string]string{"OIKOS_DATABASE_URL": dst.URL}, "--inventory", file)
	if code != 0 || !strings.Contains(stdout, "seeded: created ") {
		t.Fatalf("seed of the export into a fresh database: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if got := fleetDigest(t, dst.Pool); got != before {
		t.Errorf("the fresh database's fleet differs: %s, want %s", got, before)
	}

	// --type, repeated or comma-separated; subtypes included.
	for _, args := range [][]string{{"--type", "guest"}, {"--type", "lxc,vm"}, {"--type", "lxc", "--type", "vm"}} {
		code, out, stderr := export(tok, args...)
		if code != 0 || !strings.Contains(out, "type: lxc") || !strings.Contains(out, "type: vm") ||
			strings.Contains(out, "type: proxmox-host") || strings.Contains(out, "type: service") {
			t.Errorf("%v: exit %d, stderr %q, stdout:\n%.400s", args, code, stderr, out)
		}
	}
	code, out, stderr := export(tok, "--type", "spaceship")
	if code != 1 || out != "" || !strings.Contains(stderr, `422 Unknown entity type: type: unknown entity type "spaceship" (field type)`) {
		t.Errorf("unknown type: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if code, _, stderr := export(""); code != 1 || !strings.Contains(stderr, "401") {
		t.Errorf("no token: exit %d, stderr %q", code, stderr)
	}
	if code, _, _ := export(tok, "extra"); code != 2 {
		t.Errorf("stray argument: exit %d", code)
	}
	if code, _, _ := export(tok, "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d", code)
	}
}

// serveReadAPI serves the api's own routes over pool and returns its server and a readonly
// token, for commands that only read.
func serveReadAPI(t *testing.T, pool *pgxpool.Pool) (*httptest.Server, string) {
	t.Helper()
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New(graph.Options{Pool: pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(pool)
	tok, err := store.Create(context.Background(), "viewer", auth.RoleReadonly)
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(httpapi.Deps{Pool: pool, Graph: g, Auth: store, Logger: zerolog.Nop()})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		srv.Stop()
	})
	return ts, tok
}

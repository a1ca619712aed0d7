package onboard_test

import (
	"context"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// The api as docker-compose.yml configures it (its environment, read by the compose
// specification's own loader, with only the database pointed at the test's) starts with no
// fleet: the ontology and the knowledge base, and 0 other entities.
func TestComposeStartsWithAnEmptyFleet(t *testing.T) {
	opts, err := cli.NewProjectOptions([]string{"../../docker-compose.yml"}, cli.WithWorkingDirectory("../.."),
		cli.WithEnv([]string{"OIKOS_OPERATOR_TOKEN=oik_0123456789abcdef0123456789abcdef"}), cli.WithName("oikos"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for k, v := range p.Services["api"].Environment {
		if v != nil {
			env[k] = *v
		}
	}
	db := pgtest.New(t)
	env["OIKOS_DATABASE_URL"] = db.URL
	cfg, err := apiapp.LoadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("the api does not accept compose's environment: %v", err)
	}
	if !cfg.SeedOnStart || cfg.Demo || cfg.InventoryFile != "" {
		t.Fatalf("compose: seed on start %v, demo %v, inventory %q; want the seeds without a fleet", cfg.SeedOnStart, cfg.Demo, cfg.InventoryFile)
	}
	if _, _, err := e2estack.StartAPI(context.Background(), t, cfg, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	var types, knowledge, fleet int
	if err := db.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM entity_types),
(SELECT count(*) FROM entities WHERE type IN ('document', 'investigation', 'runbook')),
(SELECT count(*) FROM entities WHERE type NOT IN ('document', 'investigation', 'runbook'))`).Scan(&types, &knowledge, &fleet); err != nil {
		t.Fatal(err)
	}
	if types == 0 || knowledge == 0 || fleet != 0 {
		t.Fatalf("after start: %d entity types, %d knowledge documents, %d fleet entities; want the ontology, the knowledge base and 0",
			types, knowledge, fleet)
	}
}

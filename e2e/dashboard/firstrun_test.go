package dashboard_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rs/zerolog"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// TestBrowserFirstRun runs e2e/browser/first-run (the overview's first-run guide, issue 16)
// against a stack of its own whose fleet is empty, as a new install's is: the api on a fresh
// database seeded with the ontology and the knowledge base but no fleet (SeedOnStart without
// Demo), no lab, no agent. The node test checks that the knowledge base leaves the fleet
// empty, the guide and its commands, then creates one entity through the api and sees the
// guide go without a reload. Its screenshots join the suite's (not cleaned first:
// TestBrowser's stay).
func TestBrowserFirstRun(t *testing.T) {
	requireBuilt(t)
	s := &stack{log: zerolog.Nop(), db: pgtest.New(t)}
	if os.Getenv("OIKOS_E2E_DASH_LOG") != "" {
		s.log = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	}
	s.apiCfg = apiapp.Config{DatabaseURL: s.db.URL, SeedOnStart: true, Demo: false}
	if err := s.startAPI(t, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	s.client = &e2estack.Client{URL: s.apiURL, HTTP: httpClient}
	if err := e2estack.MintTokens(context.Background(), s.api,
		e2estack.Token{Name: operatorName, Role: "operator", Into: &s.operator},
		e2estack.Token{Name: readonlyName, Role: "readonly", Into: &s.readonly},
	); err != nil {
		t.Fatal(err)
	}
	c, err := startControl(t, s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.logTo(t)()

	dir := screenshotDir(t)
	env := map[string]string{
		"DASH_BASE_URL":       s.currentURL(),
		"DASH_CONTROL_URL":    c.url,
		"DASH_OPERATOR_TOKEN": s.operator,
		"DASH_READONLY_TOKEN": s.readonly,
		"DASH_OPERATOR_NAME":  operatorName,
		"DASH_ARTIFACTS":      dir,
		"DASH_CHROMIUM":       chromium,
	}
	t.Logf("empty-fleet dashboard at %s; screenshots go to %s", env["DASH_BASE_URL"], dir)
	runNode(t, 2*time.Minute, env, "--test", "--test-reporter=spec", "first-run/")
}

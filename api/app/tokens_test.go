package app_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/app"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// OIKOS_AGENT_TOKEN is read by the api and must be a well-formed Oikos token: a bad value is
// a startup error that names the variable.
func TestLoadConfigAgentToken(t *testing.T) {
	t.Parallel()
	good, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	c, err := app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x", "OIKOS_AGENT_TOKEN": good}))
	if err != nil || c.AgentToken != good {
		t.Fatalf("LoadConfig = %+v, %v", c, err)
	}
	if c, err := app.LoadConfig(envOf(map[string]string{"OIKOS_DATABASE_URL": "postgres://x"})); err != nil || c.AgentToken != "" {
		t.Fatalf("unset: %+v, %v", c, err)
	}
	for name, env := range map[string]map[string]string{
		"no prefix":          {"OIKOS_AGENT_TOKEN": "demo-agent-token-00000000000000000000000000"},
		"placeholder":        {"OIKOS_AGENT_TOKEN": "oik_changeme"},
		"stray space":        {"OIKOS_AGENT_TOKEN": good + " "},
		"the operator token": {"OIKOS_AGENT_TOKEN": good, "OIKOS_OPERATOR_TOKEN": good},
	} {
		env["OIKOS_DATABASE_URL"] = "postgres://x"
		_, err := app.LoadConfig(envOf(env))
		if err == nil || !strings.Contains(err.Error(), "OIKOS_AGENT_TOKEN: ") {
			t.Errorf("%s: want an error naming OIKOS_AGENT_TOKEN, got %v", name, err)
		}
	}
}

// At start the api makes sure the agent's token exists as "nomos", role agent, beside the
// operator's; a restart with the same values changes nothing, one with a new agent value
// replaces the old.
func TestStartEnsuresTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	op := "demo-operator-token-0001"
	agent1, _ := auth.NewToken()
	agent2, _ := auth.NewToken()
	start := func(agent string) *app.Server {
		t.Helper()
		srv, err := app.Start(ctx, app.Config{DatabaseURL: db.URL, Addr: "127.0.0.1:0", OperatorToken: op, AgentToken: agent},
			zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		return srv
	}
	verify := func(srv *app.Server, tok, name string, role auth.Role) {
		t.Helper()
		p, err := srv.Auth.Verify(ctx, tok)
		if err != nil || p.Name != name || p.Role != role {
			t.Fatalf("Verify = %+v, %v; want %s/%s", p, err, name, role)
		}
	}
	for range 2 {
		srv := start(agent1)
		verify(srv, op, auth.BootstrapOperatorName, auth.RoleOperator)
		verify(srv, agent1, auth.AgentTokenName, auth.RoleAgent)
		srv.Stop()
	}
	srv := start(agent2)
	defer srv.Stop()
	verify(srv, agent2, auth.AgentTokenName, auth.RoleAgent)
	if _, err := srv.Auth.Verify(ctx, agent1); err == nil {
		t.Error("the replaced agent token still verifies")
	}
	list, err := srv.Auth.List(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("tokens = %+v, %v; want the operator's and the agent's", list, err)
	}
}

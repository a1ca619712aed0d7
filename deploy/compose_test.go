package deploy_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

func loadCompose(t *testing.T, env []string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"../docker-compose.yml"},
		cli.WithWorkingDirectory(".."), cli.WithEnv(env), cli.WithName("oikos"))
	if err != nil {
		t.Fatal(err)
	}
	return opts.LoadProject(context.Background())
}

// The compose file is validated by the compose specification's own loader, since no Docker
// engine runs here: services, health-gated start order, the scheduler's key in its own volume, and
// build arguments that name real commands.
func TestComposeFile(t *testing.T) {
	p, err := loadCompose(t, []string{"OIKOS_OPERATOR_TOKEN=oik_test"})
	if err != nil {
		t.Fatalf("compose file does not load: %v", err)
	}
	for _, name := range []string{"postgres", "api", "scheduler", "agent"} {
		if _, ok := p.Services[name]; !ok {
			t.Fatalf("service %s missing", name)
		}
	}
	api := p.Services["api"]
	if d, ok := api.DependsOn["postgres"]; !ok || d.Condition != types.ServiceConditionHealthy {
		t.Errorf("api must wait for a healthy postgres, got %+v", api.DependsOn)
	}
	for _, name := range []string{"scheduler", "agent"} {
		s := p.Services[name]
		if d, ok := s.DependsOn["api"]; !ok || d.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s must wait for a healthy api (it migrates), got %+v", name, s.DependsOn)
		}
		if got := s.Environment["OIKOS_API_URL"]; got == nil || *got != "http://api:8080" {
			t.Errorf("%s OIKOS_API_URL = %v", name, got)
		}
	}
	// The scheduler keeps its SSH key in a volume of its own, generated on first start, so a
	// fresh install needs no key file to exist before `docker compose up`.
	sched := p.Services["scheduler"]
	keyFile := sched.Environment["OIKOS_SSH_KEY_FILE"]
	if gen := sched.Environment["OIKOS_SSH_KEY_GENERATE"]; gen == nil || *gen != "true" {
		t.Errorf("scheduler OIKOS_SSH_KEY_GENERATE = %v, want true", gen)
	}
	mountsKey := func(s types.ServiceConfig) bool {
		for _, v := range s.Volumes {
			if v.Source == "sshkey" {
				return true
			}
		}
		return false
	}
	if keyFile == nil || !mountsKey(sched) || !strings.HasPrefix(*keyFile, "/var/lib/oikos/ssh/") {
		t.Errorf("scheduler must keep its key in the sshkey volume: OIKOS_SSH_KEY_FILE %v, volumes %+v", keyFile, sched.Volumes)
	}
	if len(p.Secrets) > 0 {
		t.Errorf("compose declares secrets %v: a file secret that does not exist stops a fresh `docker compose up`", p.Secrets)
	}
	for name, s := range p.Services {
		if name == "scheduler" {
			continue
		}
		if len(s.Secrets) > 0 || mountsKey(s) {
			t.Errorf("%s must not hold the SSH key: only the scheduler does", name)
		}
		if db := s.Environment["OIKOS_DATABASE_URL"]; name != "postgres" && (db == nil || !strings.Contains(*db, "@postgres:5432/")) {
			t.Errorf("%s OIKOS_DATABASE_URL = %v", name, db)
		}
	}
	// Every image is built from a command that exists in the workspace.
	dirs := map[string]string{"oikos-api": "api/cmd/oikos-api", "oikos-scheduler": "scheduler/cmd/oikos-scheduler", "oikos-agent": "agent/cmd/oikos-agent"}
	for _, name := range []string{"api", "scheduler", "agent"} {
		b := p.Services[name].Build
		if b == nil || b.Args["CMD"] == nil {
			t.Fatalf("%s has no build CMD", name)
		}
		dir, ok := dirs[*b.Args["CMD"]]
		if !ok {
			t.Fatalf("%s builds unknown command %s", name, *b.Args["CMD"])
		}
		if _, err := os.Stat(filepath.Join("..", dir, "main.go")); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The Dockerfile knows every command compose asks for.
	df, err := os.ReadFile("docker/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	// The api image carries the dashboard: built from its lock file in a Node stage and
	// copied into the Go build before the api is compiled (it embeds api/web/dist).
	web := regexp.MustCompile(`(?s)FROM node:\S+ AS web.*npm ci.*npm run build.*FROM golang:\S+ AS build.*COPY --from=web /src/api/web/dist ./api/web/dist.*go build`)
	if !web.Match(df) {
		t.Errorf("Dockerfile does not build the dashboard in a Node stage before the Go build")
	}
	for cmd := range dirs {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(cmd) + `\b`).Match(df) {
			t.Errorf("Dockerfile does not build %s", cmd)
		}
	}
}

// OIKOS_AGENT_TOKEN from the environment (.env) reaches the api, which makes sure it exists,
// and the agent, which calls the api with it, and no other service; the agent's port, chat
// and /mcp, is published. Unset, both get it empty (the api makes no agent token).
func TestComposeAgentToken(t *testing.T) {
	const tok = "oik_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	p, err := loadCompose(t, []string{"OIKOS_OPERATOR_TOKEN=oik_test", "OIKOS_AGENT_TOKEN=" + tok})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range p.Services {
		got := s.Environment["OIKOS_AGENT_TOKEN"]
		switch name {
		case "api", "agent":
			if got == nil || *got != tok {
				t.Errorf("%s OIKOS_AGENT_TOKEN = %v, want the environment's", name, got)
			}
		default:
			if got != nil {
				t.Errorf("%s must not receive OIKOS_AGENT_TOKEN", name)
			}
		}
	}
	published := false
	for _, port := range p.Services["agent"].Ports {
		if port.Target == 8092 && port.Published == "8092" {
			published = true
		}
	}
	if !published {
		t.Errorf("agent port 8092 not published: %+v", p.Services["agent"].Ports)
	}
	if got := p.Services["agent"].Environment["OIKOS_AGENT_ADDR"]; got == nil || *got != ":8092" {
		t.Errorf("agent OIKOS_AGENT_ADDR = %v", got)
	}

	p, err = loadCompose(t, []string{"OIKOS_OPERATOR_TOKEN=oik_test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"api", "agent"} {
		if got := p.Services[name].Environment["OIKOS_AGENT_TOKEN"]; got == nil || *got != "" {
			t.Errorf("unset: %s OIKOS_AGENT_TOKEN = %v, want empty", name, got)
		}
	}
}

// OIKOS_SECRETS_KEY from .env reaches the three daemons, the same key for each (a value
// sealed by the api opens in the scheduler and the agent), and not Postgres.
func TestComposeSecretsKey(t *testing.T) {
	const key = "q83vEjRWeJq83vEjRWeJq83vEjRWeJq83vEjRWeJq80="
	p, err := loadCompose(t, []string{"OIKOS_OPERATOR_TOKEN=oik_test", "OIKOS_SECRETS_KEY=" + key})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range p.Services {
		got := s.Environment["OIKOS_SECRETS_KEY"]
		switch name {
		case "api", "scheduler", "agent":
			if got == nil || *got != key {
				t.Errorf("%s OIKOS_SECRETS_KEY = %v, want the environment's", name, got)
			}
		default:
			if got != nil {
				t.Errorf("%s must not receive OIKOS_SECRETS_KEY", name)
			}
		}
	}
}

// Without an operator token compose refuses to start, saying which variable is missing.
func TestComposeRequiresOperatorToken(t *testing.T) {
	_, err := loadCompose(t, nil)
	if err == nil || !strings.Contains(err.Error(), "OIKOS_OPERATOR_TOKEN") {
		t.Fatalf("want an error naming OIKOS_OPERATOR_TOKEN, got %v", err)
	}
}

// A compose stack outlives its database's outage (issue #32): every service comes back by
// itself after a crash or a host reboot (restart unless-stopped or always), Postgres has a
// healthcheck the api waits on at start, and no daemon is restarted because Postgres was
// (depends_on restart: true): each reconnects on its own, and a restart would throw away
// what the scheduler holds for the database while it is away.
func TestComposeSurvivesADatabaseOutage(t *testing.T) {
	p, err := loadCompose(t, []string{"OIKOS_OPERATOR_TOKEN=oik_test"})
	if err != nil {
		t.Fatalf("compose file does not load: %v", err)
	}
	for name, s := range p.Services {
		if s.Restart != types.RestartPolicyUnlessStopped && s.Restart != types.RestartPolicyAlways {
			t.Errorf("%s restart = %q, want unless-stopped or always", name, s.Restart)
		}
		if d, ok := s.DependsOn["postgres"]; ok && d.Restart {
			t.Errorf("%s is restarted with postgres (depends_on restart: true); it must reconnect by itself", name)
		}
	}
	if hc := p.Services["postgres"].HealthCheck; hc == nil || len(hc.Test) == 0 {
		t.Error("postgres has no healthcheck")
	}
}

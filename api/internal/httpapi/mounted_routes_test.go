package httpapi_test

import (
	"context"
	"github.com/oikos-hq/oikos/api/internal/secretsapi"
	"github.com/oikos-hq/oikos/api/internal/secretstore"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/chat"
	"github.com/oikos-hq/oikos/api/internal/chatapi"
	"github.com/oikos-hq/oikos/api/internal/execapi"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/decision"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/httpapi"
	"github.com/oikos-hq/oikos/api/internal/metricsapi"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyapi"
	"github.com/oikos-hq/oikos/api/internal/onboard"
	"github.com/oikos-hq/oikos/api/internal/ratelimit"
	apirequest "github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/websession"
	"github.com/oikos-hq/oikos/api/internal/webui"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// appRoutes are the feature routes exactly as the composition root (api/app) builds them:
// execapi's, metricsapi's and chatapi's tables, mounted by the server with its own.
func appRoutes(t *testing.T, exec *execution.Service, pool *pgxpool.Pool, g *graph.Service) []apirequest.Route {
	t.Helper()
	chatAPI, err := chatapi.New(chatapi.Deps{Chat: chat.NewStore(pool), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chatAPI.Stop)
	dec, err := decision.New(decision.Options{Pool: pool, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	return slices.Concat(execapi.New(execapi.Deps{Service: exec, Decisions: dec, Logger: zerolog.Nop()}).Routes(),
		metricsapi.New(metricsapi.Deps{Pool: pool, Logger: zerolog.Nop()}).Routes(), chatAPI.Routes(),
		notifyapi.New(notifyapi.Deps{Service: notify.NewService(notify.ServiceOptions{Pool: pool}), Logger: zerolog.Nop()}).Routes(),
		onboard.New(onboard.Deps{Pool: pool, Graph: g, Logger: zerolog.Nop()}).Routes(),
		secretsapi.New(secretstore.New(pool, nil)).Routes())
}

// mountedOptions are what a test of the browser's side changes in newMountedEnv: the site
// (trusted proxies, public origin) and the sign-in limit (none by default).
type mountedOptions struct {
	site  *apirequest.Site
	limit *ratelimit.Limiter
}

// newMountedEnv is newEnv's api with the execution and metrics routes mounted as in
// production (no event bus: the SSE stream is not what these tests look at).
func newMountedEnv(t *testing.T, opts ...mountedOptions) *env {
	t.Helper()
	var o mountedOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	ctx := context.Background()
	db := pgtest.New(t)
	g, err := graph.New(graph.Options{Pool: db.Pool, Ontology: apitest.SeedOntology(t), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.SyncOntology(ctx, apitest.SeedOntology(t)); err != nil {
		t.Fatal(err)
	}
	exec, err := execution.New(execution.Options{Pool: db.Pool, Policy: policy.Default(), Graph: g, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(db.Pool)
	health := daemon.NewHealth()
	web, err := webui.New(fstest.MapFS{
		"index.html":         {Data: []byte(`<!doctype html><title>Oikos</title><div id="app"></div>`)},
		"assets/app-1a2b.js": {Data: []byte(`console.log("oikos")`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(httpapi.Deps{Pool: db.Pool, Graph: g, Auth: store, Logger: zerolog.Nop(), Health: health,
		Routes: appRoutes(t, exec, db.Pool, g), Sessions: websession.New(db.Pool, store, 0).WithSignInLimit(o.limit), Web: web,
		Site: o.site})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		srv.Stop()
	})
	e := &env{t: t, pool: db.Pool, graph: g, srv: srv, ts: ts, health: health}
	mk := func(name string, role auth.Role) *client {
		tok, err := store.Create(ctx, name, role)
		if err != nil {
			t.Fatal(err)
		}
		return &client{t: t, base: ts.URL, token: tok}
	}
	e.operator = mk("op", auth.RoleOperator)
	e.agent = mk("nomos", auth.RoleAgent)
	e.readonly = mk("viewer", auth.RoleReadonly)
	e.anon = &client{t: t, base: ts.URL}
	return e
}

// TestSpecCoversEveryRoute checks that every route registered in echo, the feature mounts'
// included, is an operation of openapi.yaml, and that the spec has no operation the server
// lacks (api/app's TestServedRoutesAreTheSpec checks the same of the daemon as composed for
// production).
func TestSpecCoversEveryRoute(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	served := apitest.RoutesMatchSpec(t, e.srv.Routes())
	// The mounts must really be there (a silently empty mount would make both lists agree
	// only if the spec lost the same operations).
	for _, op := range []string{
		"POST /api/v1/executions", "POST /api/v1/executions/actions", "GET /api/v1/executions/{id}/logs/stream",
		"POST /api/v1/approvals/{id}/decision", "GET /api/v1/entities/{ref}/metrics", "GET /api/v1/entities/{ref}/trend",
		"GET /api/v1/audit/drift", "POST /api/v1/classify", "POST /api/v1/chat", "GET /api/v1/sessions",
		"GET /api/v1/sessions/{id}", "DELETE /api/v1/sessions/{id}", "GET /api/v1/sessions/{id}/tool_calls",
		"POST /api/v1/sessions/{id}/assent",
	} {
		if !served[op] {
			t.Errorf("%s is not served", op)
		}
	}
	if len(served) < 40 {
		t.Errorf("only %d routes registered", len(served))
	}
}

// TestMountedFeaturesMatchSpec drives the mounted routes through the whole HTTP surface
// (authentication, role checks, problem rendering) and validates every answer against
// openapi.yaml.
func TestMountedFeaturesMatchSpec(t *testing.T) {
	t.Parallel()
	e := newMountedEnv(t)
	e.create("proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222, "user": "root"})
	e.create("lxc", "web", map[string]any{"vmid": 101, "host": "atlas", "hostname": "web"})

	// Authentication and roles are the api's.
	e.anon.do("GET", "/api/v1/executions", nil).expect(t, http.StatusUnauthorized)
	e.anon.do("GET", "/api/v1/audit/drift", nil).expect(t, http.StatusUnauthorized)
	e.readonly.do("POST", "/api/v1/executions", map[string]any{"target": "lxc:web", "command": "uptime", "purpose": "test"}).
		expect(t, http.StatusForbidden)

	// A read-only command runs at once; its record and logs are readable.
	var ex struct {
		ID, Status string
	}
	e.agent.do("POST", "/api/v1/executions", map[string]any{"target": "lxc:web", "command": "uptime", "purpose": "test"}).
		expect(t, http.StatusCreated).json(t, &ex)
	if ex.Status != "approved" {
		t.Fatalf("uptime: status %q", ex.Status)
	}
	e.readonly.do("GET", "/api/v1/executions/"+ex.ID, nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/executions/"+ex.ID+"/logs", nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/executions?target=lxc:web", nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/executions/0190a000-0000-7000-8000-00000000dead", nil).expect(t, http.StatusNotFound)
	e.operator.do("POST", "/api/v1/executions", map[string]any{"target": "lxc:nope", "command": "uptime", "purpose": "test"}).
		expect(t, http.StatusNotFound)
	e.operator.do("POST", "/api/v1/executions", map[string]any{"target": "lxc:web", "command": "echo 'unterminated", "purpose": "test"}).
		expect(t, http.StatusUnprocessableEntity)

	// Classifying is a read: a readonly token may ask, and nothing is queued.
	var cl struct {
		RiskClass        string `json:"risk_class"`
		ApprovalRequired bool   `json:"approval_required"`
	}
	e.readonly.do("POST", "/api/v1/classify", map[string]any{"target": "lxc:web", "command": "rm -rf /srv/data"}).
		expect(t, http.StatusOK).json(t, &cl)
	if cl.RiskClass != "destructive" || !cl.ApprovalRequired {
		t.Fatalf("classify: %+v", cl)
	}
	e.readonly.do("POST", "/api/v1/classify", map[string]any{"target": "lxc:nope", "command": "uptime"}).expect(t, http.StatusNotFound)

	// A destructive one waits for an approval; deciding it twice is a 409 saying how.
	var pending struct {
		ID         string `json:"id"`
		Status     string `json:"status"`
		ApprovalID string `json:"approval_id"`
	}
	e.agent.do("POST", "/api/v1/executions", map[string]any{"target": "lxc:web", "command": "rm -rf /srv/data", "purpose": "test"}).
		expect(t, http.StatusCreated).json(t, &pending)
	if pending.Status != "pending_approval" || pending.ApprovalID == "" {
		t.Fatalf("destructive command: %+v", pending)
	}
	e.readonly.do("GET", "/api/v1/approvals?status=pending", nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/approvals/"+pending.ApprovalID, nil).expect(t, http.StatusOK)
	e.readonly.do("POST", "/api/v1/approvals/"+pending.ApprovalID+"/decision", map[string]any{"decision": "deny", "via": "api"}).
		expect(t, http.StatusForbidden)
	// Not an agent either, even naming the operator's message it claims to relay.
	if p := e.agent.do("POST", "/api/v1/approvals/"+pending.ApprovalID+"/decision",
		map[string]any{"decision": "approve", "via": "typed_confirmation", "message_id": "made-up-456"}).
		expect(t, http.StatusForbidden).problem(t); !strings.Contains(p.Detail, "only an operator's token may decide an approval") {
		t.Fatalf("agent decision: %+v", p)
	}
	e.operator.do("POST", "/api/v1/approvals/"+pending.ApprovalID+"/decision", map[string]any{"decision": "deny", "via": "api"}).
		expect(t, http.StatusOK)
	e.operator.do("POST", "/api/v1/approvals/"+pending.ApprovalID+"/decision", map[string]any{"decision": "deny", "via": "api"}).
		expect(t, http.StatusConflict)

	// Metrics and drift, rendered by the api's problem handler.
	e.readonly.do("GET", "/api/v1/entities/lxc:web/metrics?name=cpu_pct", nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/entities/lxc:web/metrics", nil).expect(t, http.StatusBadRequest)
	e.readonly.do("GET", "/api/v1/entities/lxc:nope/metrics?name=cpu_pct", nil).expect(t, http.StatusNotFound)
	e.readonly.do("GET", "/api/v1/entities/lxc:web/trend?name=cpu_pct", nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/audit/drift", nil).expect(t, http.StatusNotFound)

	// Onboarding: only an operator adds a machine; bad input names its field and writes
	// nothing; with no scheduler the answer is 202 and the machine is planned.
	add := map[string]any{"type": "proxmox-host", "name": "pve", "address": "192.168.1.10", "wait": "0s"}
	e.agent.do("POST", "/api/v1/hosts", add).expect(t, http.StatusForbidden)
	for field, bad := range map[string]map[string]any{
		"address":     {"type": "host", "name": "x", "address": "pve.lan"},
		"type":        {"type": "service", "name": "x", "address": "192.168.1.10"},
		"port":        {"type": "host", "name": "x", "address": "192.168.1.10", "port": 70000},
		"fingerprint": {"type": "host", "name": "x", "address": "192.168.1.10", "fingerprint": "MD5:aa"},
	} {
		if p := e.operator.do("POST", "/api/v1/hosts", bad).expect(t, http.StatusUnprocessableEntity).problem(t); p.Field != field {
			t.Errorf("POST /hosts %v: field %q, want %q", bad, p.Field, field)
		}
	}
	e.readonly.do("GET", "/api/v1/entities/host:x", nil).expect(t, http.StatusNotFound)
	var host struct {
		Entity  struct{ State string }
		Connect struct{ Status string }
	}
	e.operator.do("POST", "/api/v1/hosts", add).expect(t, http.StatusAccepted).json(t, &host)
	if host.Entity.State != "planned" || host.Connect.Status != "pending" {
		t.Errorf("POST /hosts without a scheduler: %+v", host)
	}
	e.readonly.do("GET", "/api/v1/hosts/proxmox-host:pve", nil).expect(t, http.StatusOK)
	e.readonly.do("GET", "/api/v1/hosts/proxmox-host:nope", nil).expect(t, http.StatusNotFound)
	e.operator.do("POST", "/api/v1/hosts/proxmox-host:pve/confirm", map[string]any{"fingerprint": "SHA256:" + strings.Repeat("A", 43)}).
		expect(t, http.StatusConflict)
	e.readonly.do("GET", "/api/v1/ssh-key", nil).expect(t, http.StatusNotFound)
	e.readonly.do("GET", "/api/v1/schedulers", nil).expect(t, http.StatusOK)
	e.agent.do("POST", "/api/v1/audit/drift/adopt", map[string]any{"all": true}).expect(t, http.StatusNotFound)
	e.agent.do("POST", "/api/v1/audit/drift/adopt", map[string]any{"all": true, "vmids": []int{101}}).
		expect(t, http.StatusUnprocessableEntity)
}

package discover_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/discover"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/httpapi"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// What lxc:media answers, as Debian 12 with systemd and iproute2 print it.
const (
	mediaUnits = `cron.service               loaded active running Regular background program processing daemon
caddy.service              loaded active running Caddy
jellyfin.service           loaded active running Jellyfin Media Server
nginx.service              loaded active running A high performance web server and a reverse proxy server
postgresql@16-main.service loaded active running PostgreSQL Cluster 16-main
ssh.service                loaded active running OpenBSD Secure Shell server
systemd-journald.service   loaded active running Journal Service
`
	mediaListeners = `LISTEN 0      4096         0.0.0.0:8096       0.0.0.0:*    users:(("jellyfin",pid=412,fd=300))
LISTEN 0      4096            [::]:8096          [::]:*    users:(("jellyfin",pid=412,fd=301))
LISTEN 0      4096         0.0.0.0:8920       0.0.0.0:*    users:(("jellyfin",pid=412,fd=310))
LISTEN 0      4096               *:443              *:*    users:(("caddy",pid=300,fd=7))
LISTEN 0      511          0.0.0.0:8081       0.0.0.0:*    users:(("nginx",pid=320,fd=6),("nginx",pid=321,fd=6))
LISTEN 0      200        127.0.0.1:5432       0.0.0.0:*    users:(("postgres",pid=388,fd=6))
LISTEN 0      128          0.0.0.0:22         0.0.0.0:*    users:(("sshd",pid=201,fd=3))
LISTEN 0      4096         0.0.0.0:8123       0.0.0.0:*    users:(("python3",pid=930,fd=11))
`
)

// env is an api serving the discovery routes over a fresh database, with the scheduler
// played: every approved execution on lxc:media is answered as the machine would, one on
// lxc:down fails as a stopped container does, and one on lxc:slow is never claimed.
type env struct {
	t        *testing.T
	pool     *pgxpool.Pool
	url      string
	operator string
	readonly string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	o := apitest.SeedOntology(t)
	g, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.SyncOntology(ctx, o); err != nil {
		t.Fatal(err)
	}
	m := graph.Meta{Actor: "seed"}
	for _, in := range []graph.CreateEntityInput{
		{Type: "proxmox-host", Name: "atlas", Attributes: map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1"}},
		{Type: "lxc", Name: "media", Attributes: map[string]any{"vmid": 101, "host": "atlas"}},
		{Type: "lxc", Name: "web", Attributes: map[string]any{"vmid": 102, "host": "atlas"}},
		{Type: "lxc", Name: "down", Attributes: map[string]any{"vmid": 103, "host": "atlas"}},
		{Type: "lxc", Name: "slow", Attributes: map[string]any{"vmid": 104, "host": "atlas"}},
		{Type: "reverse-proxy", Name: "caddy", Attributes: map[string]any{"unit": "caddy.service"}},
		{Type: "service", Name: "nginx", Attributes: map[string]any{"unit": "nginx.service"}},
	} {
		if _, _, err := g.CreateEntity(ctx, m, in); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range [][2]string{{"reverse-proxy:caddy", "lxc:media"}, {"service:nginx", "lxc:web"}} {
		if _, _, err := g.CreateRelationship(ctx, m, "runs-on", r[0], r[1], nil); err != nil {
			t.Fatal(err)
		}
	}
	exec, err := execution.New(execution.Options{Pool: db.Pool, Policy: policy.Default(), Graph: g, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: db.Pool, Notifier: notifier, Logger: zerolog.Nop(), Poll: 100 * time.Millisecond})
	disc, err := discover.New(discover.Options{Executions: exec, Graph: g, Bus: bus, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	approved := bus.Subscribe(64, "execution.approved")
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(db.Pool)
	srv := httpapi.New(httpapi.Deps{Pool: db.Pool, Graph: g, Auth: store, Logger: zerolog.Nop(), Discover: disc})
	ts := httptest.NewServer(srv)
	e := &env{t: t, pool: db.Pool, url: ts.URL}
	stop := make(chan struct{})
	played := make(chan struct{})
	go func() {
		defer close(played)
		for {
			select {
			case <-stop:
				return
			case ev := <-approved.C:
				e.play(ev)
			}
		}
	}()
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		srv.Stop()
		close(stop)
		<-played
		approved.Close()
		bus.Stop()
		notifier.Stop()
	})
	if e.operator, err = store.Create(ctx, "op", auth.RoleOperator); err != nil {
		t.Fatal(err)
	}
	if e.readonly, err = store.Create(ctx, "viewer", auth.RoleReadonly); err != nil {
		t.Fatal(err)
	}
	return e
}

// play answers one approved execution as the scheduler would (docs/execution-contract.md):
// claim, the output chunks, the end with its event.
func (e *env) play(ev eventbus.Event) {
	var p struct {
		ExecutionID string `json:"execution_id"`
		Target      string `json:"target"`
	}
	if json.Unmarshal(ev.Payload, &p) != nil || p.Target == "lxc:slow" {
		return
	}
	ctx := context.Background()
	err := pg.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		var cmd, target string
		if err := tx.QueryRow(ctx, `UPDATE executions SET status = 'running', started_at = now(), claimed_by = 'test'
			WHERE id = $1 AND status = 'approved' RETURNING command, target_id::text`, p.ExecutionID).Scan(&cmd, &target); err != nil {
			return err
		}
		stream, out, status, code := "stdout", mediaUnits, execution.StatusCompleted, 0
		if cmd == discover.ListenersCommand {
			out = mediaListeners
		}
		if p.Target == "lxc:down" {
			stream, out, status, code = "stderr", "container '103' not running!\n", execution.StatusFailed, 255
		}
		if _, err := tx.Exec(ctx, `INSERT INTO execution_logs (execution_id, seq, stream, data) VALUES ($1, 1, $2, $3)`,
			p.ExecutionID, stream, []byte(out)); err != nil {
			return err
		}
		errText := ""
		if status == execution.StatusFailed {
			errText = "command exited with status 255"
		}
		if _, err := tx.Exec(ctx, `UPDATE executions SET status = $2, exit_code = $3, output = $4, error = $5, finished_at = now(),
			updated_at = now() WHERE id = $1`, p.ExecutionID, status, code, []byte(out), errText); err != nil {
			return err
		}
		_, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "execution." + status, EntityID: target, Actor: "scheduler:test"},
			map[string]any{"execution_id": p.ExecutionID, "status": status, "exit_code": code})
		return err
	})
	if err != nil {
		e.t.Errorf("play %s: %v", p.ExecutionID, err)
	}
}

// do calls the api and validates the answer against openapi.yaml.
func (e *env) do(method, path, token string, body any, out any) int {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := apitest.Validate(req, resp, raw); err != nil {
		e.t.Errorf("%s %s -> %d does not match openapi.yaml: %v\n%s", method, path, resp.StatusCode, err, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

type discovery struct {
	Target    string `json:"target"`
	Proposals []struct {
		Name, Unit, Entity, Note string
		Ports                    []int
		Port                     *int
		Exists                   bool
	} `json:"proposals"`
	Plumbing   []string            `json:"plumbing"`
	Unmatched  []discover.Listener `json:"unmatched_listeners"`
	Executions []struct{ ID, Command, Status string }
}

type problem struct {
	Type, Detail, Field, Code string
	Status                    int
}

type accepted struct {
	Created []struct {
		Slug, Name, Unit string
		Port             *int
		RunsOn           string `json:"runs_on"`
	}
	Skipped []struct{ Name, Reason, Entity string }
}

func TestDiscoverAndAccept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var d discovery
	if st := e.do("POST", "/api/v1/entities/lxc:media/discover/services?timeout=30s", e.operator, nil, &d); st != http.StatusOK {
		t.Fatalf("discover: %d %+v", st, d)
	}
	got := map[string]string{}
	for _, p := range d.Proposals {
		port := 0
		if p.Port != nil {
			port = *p.Port
		}
		got[p.Unit] = strings.TrimSpace(strings.Join([]string{p.Name, jsonOf(p.Ports), jsonOf(port), jsonOf(p.Exists), p.Entity}, " "))
	}
	want := map[string]string{
		"caddy.service":              `caddy [443] 443 true reverse-proxy:caddy`,
		"jellyfin.service":           `jellyfin [8096,8920] 8096 false`,
		"nginx.service":              `nginx-media [8081] 8081 false`,
		"postgresql@16-main.service": `postgresql@16-main [5432] 5432 false`,
	}
	if len(got) != len(want) {
		t.Errorf("proposals %v", got)
	}
	for u, w := range want {
		if got[u] != w {
			t.Errorf("%s: %q, want %q", u, got[u], w)
		}
	}
	for _, p := range d.Proposals {
		if p.Unit == "nginx.service" && !strings.Contains(p.Note, "service:nginx already exists (runs on lxc:web)") {
			t.Errorf("nginx's note: %q", p.Note)
		}
	}
	if strings.Join(d.Plumbing, " ") != "cron.service ssh.service systemd-journald.service" {
		t.Errorf("plumbing %v", d.Plumbing)
	}
	if len(d.Unmatched) != 1 || d.Unmatched[0].Port != 8123 || d.Unmatched[0].Process != "python3" {
		t.Errorf("unmatched %+v", d.Unmatched)
	}
	if len(d.Executions) != 2 || d.Executions[0].Command != discover.UnitsCommand || d.Executions[1].Command != discover.ListenersCommand {
		t.Fatalf("executions %+v", d.Executions)
	}
	// They went through the gate: read_only, run at once, requested by the operator.
	if n := e.count(`SELECT count(*) FROM executions WHERE id = ANY($1) AND risk_class = 'read_only' AND authorised_by = 'auto'
		AND requested_by = 'op' AND status = 'completed'`, []string{d.Executions[0].ID, d.Executions[1].ID}); n != 2 {
		t.Errorf("%d read-only executions", n)
	}

	// Accept the new ones.
	body := map[string]any{"services": []map[string]any{
		{"name": "jellyfin", "unit": "jellyfin.service", "port": 8096},
		{"name": "nginx-media", "unit": "nginx.service", "port": 8081},
		{"name": "postgresql@16-main", "unit": "postgresql@16-main.service"},
	}}
	var a accepted
	var corr string
	if st := e.do("POST", "/api/v1/entities/lxc:media/services", e.operator, body, &a); st != http.StatusCreated {
		t.Fatalf("accept: %d %+v", st, a)
	}
	if len(a.Created) != 3 || len(a.Skipped) != 0 || a.Created[0].Slug != "service:jellyfin" || a.Created[0].RunsOn != "lxc:media" {
		t.Fatalf("accepted %+v", a)
	}
	if n := e.count(`SELECT count(*) FROM relationships r JOIN entities s ON s.id = r.source_id JOIN entities m ON m.id = r.target_id
		WHERE r.type = 'runs-on' AND r.valid_to IS NULL AND m.slug = 'lxc:media' AND s.type = 'service'`); n != 3 {
		t.Errorf("%d runs-on edges", n)
	}
	if err := e.pool.QueryRow(context.Background(), `SELECT correlation_id FROM audit_log a JOIN entities s ON s.id = a.entity_id
		WHERE a.action = 'entity.create' AND s.slug = 'service:jellyfin' AND a.actor = 'op'`).Scan(&corr); err != nil || corr == "" {
		t.Errorf("audit of the create: %q %v", corr, err)
	}
	if n := e.count(`SELECT count(*) FROM audit_log WHERE action = 'relationship.create' AND actor = 'op' AND correlation_id = $1`, corr); n != 3 {
		t.Errorf("%d audited edges in the request", n)
	}
	if n := e.count(`SELECT count(*) FROM events WHERE type IN ('entity.created', 'relationship.created') AND correlation_id = $1`, corr); n != 6 {
		t.Errorf("%d events", n)
	}
	if n := e.count(`SELECT count(*) FROM check_defs c JOIN entities s ON s.id = c.target_id
		WHERE s.slug = 'service:jellyfin' AND c.config->>'script' = 'process'`); n != 1 {
		t.Errorf("jellyfin has %d process checks", n)
	}

	// Discovering again proposes nothing new, and accepting again creates nothing.
	d = discovery{}
	e.do("POST", "/api/v1/entities/lxc:media/discover/services", e.operator, nil, &d)
	for _, p := range d.Proposals {
		if !p.Exists {
			t.Errorf("%s does not exist after the accept: %+v", p.Unit, p)
		}
	}
	entities := e.count(`SELECT count(*) FROM entities WHERE type = 'service'`)
	a = accepted{}
	if st := e.do("POST", "/api/v1/entities/lxc:media/services", e.operator, body, &a); st != http.StatusOK || len(a.Created) != 0 || len(a.Skipped) != 3 {
		t.Fatalf("second accept: %d %+v", st, a)
	}
	if !strings.Contains(a.Skipped[0].Reason, "service:jellyfin already runs on lxc:media") {
		t.Errorf("skip reason %q", a.Skipped[0].Reason)
	}
	// By unit too: the same unit under another name is the same service.
	a = accepted{}
	e.do("POST", "/api/v1/entities/lxc:media/services", e.operator,
		map[string]any{"services": []map[string]any{{"name": "jf", "unit": "jellyfin.service"}, {"name": "nginx", "unit": "nginx.service"}}}, &a)
	if len(a.Created) != 0 || len(a.Skipped) != 2 || a.Skipped[1].Entity != "service:nginx-media" {
		t.Errorf("by unit: %+v", a)
	}
	if n := e.count(`SELECT count(*) FROM entities WHERE type = 'service'`); n != entities {
		t.Errorf("%d services, want %d", n, entities)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestDiscoverErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var p problem
	if st := e.do("POST", "/api/v1/entities/lxc:nope/discover/services", e.operator, nil, &p); st != http.StatusNotFound {
		t.Errorf("unknown entity: %d %+v", st, p)
	}
	p = problem{}
	if st := e.do("POST", "/api/v1/entities/service:nginx/discover/services", e.operator, nil, &p); st != http.StatusUnprocessableEntity ||
		p.Field != "ref" || !strings.Contains(p.Detail, "machine or a guest") {
		t.Errorf("a service: %d %+v", st, p)
	}
	if st := e.do("POST", "/api/v1/entities/lxc:media/discover/services", e.readonly, nil, &p); st != http.StatusForbidden {
		t.Errorf("readonly: %d", st)
	}
	p = problem{}
	if st := e.do("POST", "/api/v1/entities/lxc:media/discover/services?timeout=soon", e.operator, nil, &p); st != http.StatusBadRequest || p.Field != "timeout" {
		t.Errorf("bad timeout: %d %+v", st, p)
	}
	if st := e.do("POST", "/api/v1/entities/lxc:media/discover/services?timeout=1h", e.operator, nil, &p); st != http.StatusBadRequest {
		t.Errorf("long timeout: %d", st)
	}
	p = problem{}
	if st := e.do("POST", "/api/v1/entities/lxc:down/discover/services", e.operator, nil, &p); st != http.StatusBadGateway ||
		!strings.HasSuffix(p.Type, "guest-not-running") || !strings.Contains(p.Detail, "lxc:down is not running") {
		t.Errorf("a stopped guest: %d %+v", st, p)
	}
	p = problem{}
	start := time.Now()
	if st := e.do("POST", "/api/v1/entities/lxc:slow/discover/services?timeout=1s", e.operator, nil, &p); st != http.StatusGatewayTimeout ||
		!strings.HasSuffix(p.Type, "discovery-timeout") || !strings.Contains(p.Detail, "did not finish within 1s") {
		t.Errorf("no scheduler: %d %+v", st, p)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the 1s wait took %s", d)
	}
	// The executions the failed discoveries asked for are recorded, so the operator can see them.
	if n := e.count(`SELECT count(*) FROM executions WHERE target_slug IN ('lxc:down', 'lxc:slow')`); n != 4 {
		t.Errorf("%d executions", n)
	}
}

func TestAcceptRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.count(`SELECT count(*) FROM entities`)
	audits := e.count(`SELECT count(*) FROM audit_log`)
	for _, c := range []struct {
		body   any
		status int
		field  string
	}{
		{`{"services":[{"name":"jellyfin","prot":8096}]}`, http.StatusUnprocessableEntity, "prot"},
		{`{"services":[{"name":"ok"},{"name":""}]}`, http.StatusUnprocessableEntity, "services[1].name"},
		{`{"services":[{"name":"has space"}]}`, http.StatusUnprocessableEntity, "services[0].name"},
		{`{"services":[{"name":"a"},{"name":"a"}]}`, http.StatusUnprocessableEntity, "services[1].name"},
		{`{"services":[{"name":"a","unit":"a b.service"}]}`, http.StatusUnprocessableEntity, "services[0].unit"},
		{`{"services":[{"name":"a","port":70000}]}`, http.StatusUnprocessableEntity, "services[0].port"},
		{`{"services":[]}`, http.StatusUnprocessableEntity, "services"},
		{`{"services":[{"name":"a","port":"80"}]}`, http.StatusUnprocessableEntity, "services.port"},
		{`{"services":`, http.StatusBadRequest, ""},
	} {
		var p problem
		if st := e.do("POST", "/api/v1/entities/lxc:media/services", e.operator, c.body, &p); st != c.status || p.Field != c.field {
			t.Errorf("%s: %d %+v, want %d naming %q", c.body, st, p, c.status, c.field)
		}
	}
	var p problem
	if st := e.do("POST", "/api/v1/entities/lxc:nope/services", e.operator, map[string]any{"services": []map[string]any{{"name": "a"}}}, &p); st != http.StatusNotFound {
		t.Errorf("unknown entity: %d", st)
	}
	if st := e.do("POST", "/api/v1/entities/service:nginx/services", e.operator, map[string]any{"services": []map[string]any{{"name": "a"}}}, &p); st != http.StatusUnprocessableEntity {
		t.Errorf("on a service: %d", st)
	}
	if st := e.do("POST", "/api/v1/entities/lxc:media/services", e.readonly, map[string]any{"services": []map[string]any{{"name": "a"}}}, &p); st != http.StatusForbidden {
		t.Errorf("readonly: %d", st)
	}
	if n := e.count(`SELECT count(*) FROM entities`); n != before {
		t.Errorf("%d entities, want %d", n, before)
	}
	if n := e.count(`SELECT count(*) FROM audit_log`); n != audits {
		t.Errorf("%d audit rows, want %d", n, audits)
	}
	// A name another entity holds is skipped, with the reason, and the rest is created.
	var a accepted
	if st := e.do("POST", "/api/v1/entities/lxc:media/services", e.operator,
		map[string]any{"services": []map[string]any{{"name": "nginx"}, {"name": "vaultwarden", "port": 80}}}, &a); st != http.StatusCreated {
		t.Fatalf("partly taken: %d", st)
	}
	if len(a.Created) != 1 || a.Created[0].Slug != "service:vaultwarden" || len(a.Skipped) != 1 ||
		!strings.Contains(a.Skipped[0].Reason, "service:nginx already exists (runs on lxc:web)") {
		t.Errorf("partly taken: %+v", a)
	}
}

package execapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/execapi"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/decision"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// env is one test's api: its own database with a small fleet, the execution routes on a
// loopback server, and a client per role.
type env struct {
	t        testing.TB
	pool     *pgxpool.Pool
	graph    *graph.Service
	svc      *execution.Service
	ts       *httptest.Server
	operator *client
	agent    *client
	readonly *client
	anon     *client
}

var fleet = []graph.CreateEntityInput{
	{Type: "proxmox-host", Name: "atlas", Attributes: map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222, "user": "root"}},
	{Type: "lxc", Name: "web", Attributes: map[string]any{"vmid": 101, "host": "atlas", "hostname": "web"}},
	{Type: "lxc", Name: "db", Attributes: map[string]any{"vmid": 102, "host": "atlas", "hostname": "db"}},
	{Type: "vm", Name: "ha", Attributes: map[string]any{"vmid": 200, "host": "atlas", "qemu_guest_agent": true}},
	{Type: "vm", Name: "noagent", Attributes: map[string]any{"vmid": 201, "host": "atlas", "qemu_guest_agent": false}},
	{Type: "host", Name: "box", Attributes: map[string]any{"lan_ipv4": "127.0.11.1", "ssh_port": 2222, "user": "root"}},
}

type envOptions struct {
	notifier  bool
	heartbeat time.Duration
}

func newEnv(t testing.TB, opts ...envOptions) *env {
	t.Helper()
	var o envOptions
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
	seed := graph.Meta{Actor: "seed", Role: "operator"}
	for _, in := range fleet {
		if _, _, err := g.CreateEntity(ctx, seed, in); err != nil {
			t.Fatalf("create %s:%s: %v", in.Type, in.Name, err)
		}
	}
	svc, err := execution.New(execution.Options{Pool: db.Pool, Policy: policy.Default(), Graph: g, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decision.New(decision.Options{Pool: db.Pool, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(db.Pool)
	deps := execapi.Deps{Service: svc, Decisions: dec, Auth: store, Logger: zerolog.Nop(), Heartbeat: o.heartbeat}
	var notifier *eventbus.Notifier
	if o.notifier {
		cfg, err := pgx.ParseConfig(db.URL)
		if err != nil {
			t.Fatal(err)
		}
		notifier = eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
		deps.Notifier = notifier
		// Without the notifier's wake-ups a stream would only see new rows at the next
		// poll; a long poll makes a test that depends on them fail instead of pass slowly.
		deps.StreamPoll = time.Minute
	} else {
		deps.StreamPoll = 20 * time.Millisecond
	}
	e := echo.New()
	execapi.Register(e.Group("/api/v1"), deps)
	if notifier != nil {
		if err := notifier.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(e)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
		if notifier != nil {
			notifier.Stop()
		}
	})
	en := &env{t: t, pool: db.Pool, graph: g, svc: svc, ts: ts}
	mk := func(name string, role auth.Role) *client {
		tok, err := store.Create(ctx, name, role)
		if err != nil {
			t.Fatal(err)
		}
		return &client{t: t, base: ts.URL, token: tok}
	}
	en.operator = mk("op", auth.RoleOperator)
	en.agent = mk("nomos", auth.RoleAgent)
	en.readonly = mk("viewer", auth.RoleReadonly)
	en.anon = &client{t: t, base: ts.URL}
	return en
}

// client talks to the test server and validates every response against the spec.
type client struct {
	t     testing.TB
	base  string
	token string
}

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

func (r resp) expect(t testing.TB, status int) resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

// problemJSON is the problem document with the gate's extension members.
type problemJSON struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Field      string `json:"field"`
	Code       string `json:"code"`
	ApprovalID string `json:"approval_id"`
	RiskClass  string `json:"risk_class"`
	Approval   *struct {
		Status string `json:"status"`
	} `json:"approval"`
}

func (r resp) problem(t testing.TB, status int) problemJSON {
	t.Helper()
	r.expect(t, status)
	var p problemJSON
	r.json(t, &p)
	return p
}

// do sends a request (body nil, a string sent raw, or a value marshalled) and returns the
// validated response. It is safe to call from several goroutines.
func (c *client) do(method, path string, body any, headers ...string) resp {
	c.t.Helper()
	r, err := c.try(method, path, body, headers...)
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

func (c *client) try(method, path string, body any, headers ...string) (resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return resp{}, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return resp{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		return resp{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer hr.Body.Close()
	raw, err := io.ReadAll(hr.Body)
	if err != nil {
		return resp{}, err
	}
	if err := checkResponse(c.t, req, hr, raw); err != nil {
		return resp{}, err
	}
	return resp{Status: hr.StatusCode, Header: hr.Header, Body: raw}, nil
}

// checkResponse validates one response against api/openapi.yaml.
func checkResponse(t testing.TB, req *http.Request, hr *http.Response, body []byte) error {
	if hr.StatusCode >= 400 && !strings.HasPrefix(hr.Header.Get("Content-Type"), "application/problem+json") {
		return fmt.Errorf("%s %s: error %d is %q, not problem JSON: %s", req.Method, req.URL.Path, hr.StatusCode,
			hr.Header.Get("Content-Type"), body)
	}
	if err := apitest.Validate(req, hr, body); err != nil {
		return fmt.Errorf("%s %s -> %d does not match openapi.yaml:\n  %w\n  body: %.600s", req.Method, req.URL.RequestURI(),
			hr.StatusCode, err, body)
	}
	return nil
}

// executionJSON is the execution as the api answers it.
type executionJSON struct {
	ID            string   `json:"id"`
	Target        string   `json:"target"`
	Action        string   `json:"action"`
	Command       string   `json:"command"`
	RiskClass     string   `json:"risk_class"`
	DeclaredRisk  *string  `json:"declared_risk"`
	Reasons       []string `json:"reasons"`
	Status        string   `json:"status"`
	AuthorisedBy  string   `json:"authorised_by"`
	ApprovalID    *string  `json:"approval_id"`
	SessionID     *string  `json:"session_id"`
	ExitCode      *int     `json:"exit_code"`
	Output        *string  `json:"output"`
	OutputBase64  *string  `json:"output_base64"`
	AlreadyQueued bool     `json:"already_queued"`
	Message       string   `json:"message"`
	Params        map[string]any
}

type approvalJSON struct {
	ID              string  `json:"id"`
	ExecutionID     string  `json:"execution_id"`
	Status          string  `json:"status"`
	RiskClass       string  `json:"risk_class"`
	Via             *string `json:"via"`
	DecidedBy       *string `json:"decided_by"`
	MessageID       *string `json:"message_id"`
	ExecutionStatus string  `json:"execution_status"`
}

type decisionJSON struct {
	Approval  approvalJSON  `json:"approval"`
	Execution executionJSON `json:"execution"`
	Window    *struct {
		Kind      string `json:"kind"`
		SessionID string `json:"session_id"`
		Target    string `json:"target"`
	} `json:"window"`
}

type listJSON[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// run asks for a command through POST /executions.
func (c *client) run(target, command, session string, extra ...string) resp {
	c.t.Helper()
	body := map[string]any{"target": target, "command": command, "purpose": "test"}
	if session != "" {
		body["session_id"] = session
	}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = extra[i+1]
	}
	return c.do("POST", "/api/v1/executions", body)
}

func (c *client) decide(approvalID, decision, via string, extra ...string) resp {
	c.t.Helper()
	body := map[string]any{"decision": decision, "via": via}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i]] = extra[i+1]
	}
	return c.do("POST", "/api/v1/approvals/"+approvalID+"/decision", body)
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// claim, appendChunk and finish play the scheduler as docs/execution-contract.md describes it.
func (e *env) claim(id string) {
	e.t.Helper()
	tag, err := e.pool.Exec(context.Background(), `UPDATE executions SET status = 'running', started_at = now(), claimed_by = 'test'
		WHERE id = $1 AND status = 'approved'`, id)
	if err != nil || tag.RowsAffected() != 1 {
		e.t.Fatalf("claim %s: %v", id, err)
	}
}

func (e *env) appendChunk(id string, seq int, data []byte) {
	e.t.Helper()
	ctx := context.Background()
	err := pg.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO execution_logs (execution_id, seq, stream, data) VALUES ($1, $2, 'stdout', $3)`, id, seq, data); err != nil {
			return err
		}
		payload, err := json.Marshal(map[string]any{"execution_id": id, "seq": seq})
		if err != nil {
			return err
		}
		return eventbus.Notify(ctx, tx, eventbus.ChannelExecLog, string(payload))
	})
	if err != nil {
		e.t.Fatalf("append chunk: %v", err)
	}
}

func (e *env) finish(id, status string, exitCode int, output []byte) {
	e.t.Helper()
	ctx := context.Background()
	err := pg.InTx(ctx, e.pool, func(tx pgx.Tx) error {
		var target string
		if err := tx.QueryRow(ctx, `UPDATE executions SET status = $2, exit_code = $3, output = $4, finished_at = now(), updated_at = now()
			WHERE id = $1 RETURNING target_id::text`, id, status, exitCode, output).Scan(&target); err != nil {
			return err
		}
		_, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "execution." + status, EntityID: target, Actor: "scheduler:test"},
			map[string]any{"execution_id": id, "status": status, "exit_code": exitCode})
		return err
	})
	if err != nil {
		e.t.Fatalf("finish %s: %v", id, err)
	}
}

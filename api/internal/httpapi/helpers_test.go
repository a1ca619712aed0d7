package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/httpapi"
	apirequest "github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// env is one test's api: its own database, graph service, tokens, event bus and server on a
// loopback port.
type env struct {
	t        testing.TB
	pool     *pgxpool.Pool
	graph    *graph.Service
	srv      *httpapi.Server
	ts       *httptest.Server
	health   *daemon.Health
	operator *client
	agent    *client
	readonly *client
	anon     *client
}

type envOptions struct {
	heartbeat time.Duration
	buffer    int
	routes    []apirequest.Route
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
	store := auth.NewStore(db.Pool)
	cfg, err := pgx.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
	bus := eventbus.NewBus(eventbus.BusOptions{Pool: db.Pool, Notifier: notifier, Logger: zerolog.Nop(), Poll: 200 * time.Millisecond})
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := bus.Start(ctx); err != nil {
		t.Fatal(err)
	}
	health := daemon.NewHealth()
	srv := httpapi.New(httpapi.Deps{Pool: db.Pool, Graph: g, Auth: store, Bus: bus, Logger: zerolog.Nop(), Health: health,
		SSEHeartbeat: o.heartbeat, SSEClientBuffer: o.buffer, Routes: o.routes})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Stop()
		ts.Close()
		bus.Stop()
		notifier.Stop()
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

// client talks to the test server and validates every response it receives against
// api/openapi.yaml: status, headers and body must be what the spec declares.
type client struct {
	t     testing.TB
	base  string
	token string
}

// resp is a received response.
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

func (r resp) problem(t testing.TB) apirequest.Problem {
	t.Helper()
	var p apirequest.Problem
	r.json(t, &p)
	return p
}

// do sends a request; body may be nil, a string/[]byte (sent raw) or a value (marshalled).
func (c *client) do(method, path string, body any, headers ...string) resp {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
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
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer hr.Body.Close()
	raw, err := io.ReadAll(hr.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	checkResponse(c.t, req, hr, raw)
	return resp{Status: hr.StatusCode, Header: hr.Header, Body: raw}
}

// checkResponse validates one response against the spec and checks the headers every
// response carries.
func checkResponse(t testing.TB, req *http.Request, hr *http.Response, body []byte) {
	t.Helper()
	if hr.Header.Get(apirequest.HeaderCorrelationID) == "" {
		t.Errorf("%s %s: no X-Correlation-ID on the response", req.Method, req.URL.Path)
	}
	if hr.StatusCode >= 400 && !strings.HasPrefix(hr.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("%s %s: error %d is %q, not problem JSON: %s", req.Method, req.URL.Path, hr.StatusCode,
			hr.Header.Get("Content-Type"), body)
	}
	if err := apitest.Validate(req, hr, body); err != nil {
		var m *apitest.Mismatch
		// A path the spec does not have answers a 404 problem, which was checked above.
		if !(errors.As(err, &m) && m.UnknownPath && hr.StatusCode == http.StatusNotFound) {
			t.Errorf("%s %s -> %d does not match openapi.yaml:\n  %v\n  body: %.600s", req.Method, req.URL.RequestURI(),
				hr.StatusCode, err, body)
		}
	}
}

// expect fails the test unless the response has the status.
func (r resp) expect(t testing.TB, status int) resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

// entityJSON is the JSON shape of an entity the tests read back.
type entityJSON struct {
	ID           string         `json:"id"`
	Slug         string         `json:"slug"`
	Type         string         `json:"type"`
	Name         string         `json:"name"`
	State        string         `json:"state"`
	Attributes   map[string]any `json:"attributes"`
	Version      int64          `json:"version"`
	Health       string         `json:"health"`
	HealthReason string         `json:"health_reason"`
	LastCheckAt  *time.Time     `json:"last_check_at"`
}

type listJSON[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// create makes an entity through the api (operator) and returns it.
func (e *env) create(typ, name string, attrs map[string]any, state ...string) entityJSON {
	e.t.Helper()
	body := map[string]any{"type": typ, "name": name, "attributes": attrs}
	if len(state) > 0 {
		body["state"] = state[0]
	}
	var out entityJSON
	e.operator.do("POST", "/api/v1/entities", body).expect(e.t, http.StatusCreated).json(e.t, &out)
	return out
}

// link makes an edge through the api.
func (e *env) link(typ, src, dst string) string {
	e.t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	r := e.operator.do("POST", "/api/v1/relationships", map[string]any{"type": typ, "source": src, "target": dst})
	if r.Status != http.StatusCreated && r.Status != http.StatusOK {
		e.t.Fatalf("link %s %s %s: %d %s", src, typ, dst, r.Status, r.Body)
	}
	r.json(e.t, &out)
	return out.ID
}

// setHealth writes an entity_status row, as the scheduler would.
func (e *env) setHealth(slug, health string, changedAgo time.Duration) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `INSERT INTO entity_status (entity_id, health, reason, last_check_at, changed_at)
		SELECT id, $2, 'test', now(), now() - make_interval(secs => $3) FROM entities WHERE slug = $1
		ON CONFLICT (entity_id) DO UPDATE SET health = EXCLUDED.health, reason = EXCLUDED.reason,
			last_check_at = EXCLUDED.last_check_at, changed_at = EXCLUDED.changed_at`, slug, health, changedAgo.Seconds())
	if err != nil {
		e.t.Fatal(err)
	}
}

// count runs a count(*)-style query.
func (e *env) count(sql string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// snapshot fingerprints everything a mutation could touch, so a bad request can be shown
// to have changed nothing.
func (e *env) snapshot() string {
	e.t.Helper()
	var s string
	err := e.pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT count(*) FROM entities),
		(SELECT md5(coalesce(string_agg(slug || state || version || attributes::text, ',' ORDER BY slug), '')) FROM entities),
		(SELECT count(*) FROM relationships),
		(SELECT count(*) FROM relationships WHERE valid_to IS NULL),
		(SELECT count(*) FROM knowledge_entities),
		(SELECT md5(coalesce(string_agg(title || body, ',' ORDER BY entity_id), '')) FROM knowledge_entities),
		(SELECT count(*) FROM check_defs),
		(SELECT count(*) FROM audit_log),
		(SELECT count(*) FROM events),
		(SELECT count(*) FROM idempotency_keys),
		(SELECT md5(coalesce(string_agg(status || coalesce(muted_until::text, ''), ',' ORDER BY id), '')) FROM signals))`).Scan(&s)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

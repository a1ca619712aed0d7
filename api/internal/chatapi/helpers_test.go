package chatapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apitest"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/chat"
	"github.com/oikos-hq/oikos/api/internal/chatapi"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// env is one test's api: its own database, the chat routes on a loopback server in front of
// a fake agent (an httptest server on loopback answering the internal contract), and a client
// per role.
type env struct {
	t          *testing.T
	pool       *pgxpool.Pool
	ts         *httptest.Server
	agentURL   string
	agentToken string
	operator   *client
	agent      *client
	readonly   *client
	anon       *client
}

// newEnv starts the api in front of the fake agent handler(e) returns; a nil handler means an
// agent that is not running (its address refuses connections).
func newEnv(t *testing.T, handler func(e *env) http.Handler) *env {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	tok, err := auth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, pool: db.Pool, agentToken: tok}
	if h := handler(e); h != nil {
		agent := httptest.NewServer(h)
		t.Cleanup(func() {
			agent.CloseClientConnections()
			agent.Close()
		})
		e.agentURL = agent.URL
	} else {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		e.agentURL = "http://" + ln.Addr().String()
		ln.Close()
	}
	store := auth.NewStore(db.Pool)
	ec := echo.New()
	ec.Use(request.Correlation)
	api, err := chatapi.Register(ec.Group("/api/v1"), chatapi.Deps{Chat: chat.NewStore(db.Pool), AgentURL: e.agentURL,
		AgentToken: tok, Auth: store, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewServer(ec)
	t.Cleanup(func() {
		e.ts.CloseClientConnections()
		e.ts.Close()
		api.Stop()
	})
	mk := func(name string, role auth.Role) *client {
		tok, err := store.Create(ctx, name, role)
		if err != nil {
			t.Fatal(err)
		}
		return &client{t: t, base: e.ts.URL, token: tok}
	}
	e.operator = mk("op", auth.RoleOperator)
	e.agent = mk("nomos", auth.RoleAgent)
	e.readonly = mk("viewer", auth.RoleReadonly)
	e.anon = &client{t: t, base: e.ts.URL}
	return e
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// authorised reports whether a request to the fake agent carries the api's agent token.
func (e *env) authorised(r *http.Request) bool {
	return r.Header.Get("Authorization") == "Bearer "+e.agentToken
}

// turn is what the agent receives on POST /internal/chat.
type turn struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	MessageID string `json:"message_id"`
	Actor     string `json:"actor"`
	Role      string `json:"role"`
}

// decodeTurn reads a turn as the agent does: strictly, unknown fields refused.
func decodeTurn(r *http.Request) (turn, error) {
	var tr turn
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(&tr)
	return tr, err
}

// sse writes the agent's side of a stream: headers once, then events, each flushed.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.rc.Flush()
	return s
}

func (s *sse) event(name string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return err
	}
	return s.rc.Flush()
}

func problem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail})
}

// client talks to the test server and validates every response it reads whole against the spec.
type client struct {
	t     *testing.T
	base  string
	token string
}

type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r resp) expect(t *testing.T, status int) resp {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

func (r resp) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

type problemJSON struct {
	Type   string `json:"type"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

func (r resp) problem(t *testing.T, status int) problemJSON {
	t.Helper()
	r.expect(t, status)
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") {
		t.Fatalf("status %d is %q, not problem JSON: %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	var p problemJSON
	r.json(t, &p)
	return p
}

func (c *client) request(ctx context.Context, method, path string, body any) *http.Request {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req
}

// do sends a request, reads the whole answer and validates it against api/openapi.yaml.
func (c *client) do(method, path string, body any) resp {
	c.t.Helper()
	req := c.request(context.Background(), method, path, body)
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer hr.Body.Close()
	raw, err := io.ReadAll(hr.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := apitest.Validate(req, hr, raw); err != nil {
		c.t.Fatalf("%s %s -> %d does not match openapi.yaml:\n  %v\n  body: %.600s", method, req.URL.RequestURI(), hr.StatusCode, err, raw)
	}
	return resp{Status: hr.StatusCode, Header: hr.Header, Body: raw}
}

// open sends POST /chat and returns the response unread, for a test that reads the stream
// event by event.
func (c *client) open(ctx context.Context, body any) *http.Response {
	c.t.Helper()
	hr, err := http.DefaultClient.Do(c.request(ctx, http.MethodPost, "/api/v1/chat", body))
	if err != nil {
		c.t.Fatal(err)
	}
	return hr
}

// event is one server-sent event as read off the wire.
type event struct {
	Name string
	Data string
	Raw  string
}

func (ev event) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(ev.Data), v); err != nil {
		t.Fatalf("event %s: data %q: %v", ev.Name, ev.Data, err)
	}
}

// readEvent reads one event (to its blank line); comments are skipped.
func readEvent(br *bufio.Reader) (event, error) {
	var ev event
	var raw strings.Builder
	for {
		line, err := br.ReadString('\n')
		raw.WriteString(line)
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if ev.Name == "" && ev.Data == "" {
				raw.Reset()
				continue
			}
			ev.Raw = raw.String()
			return ev, nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			ev.Data += strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")
		}
	}
}

// readAll reads every event of a stream to its end.
func readAll(t *testing.T, body io.Reader) []event {
	t.Helper()
	br := bufio.NewReader(body)
	var out []event
	for {
		ev, err := readEvent(br)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read the stream after %d events: %v", len(out), err)
		}
		out = append(out, ev)
	}
}

// chat sends POST /chat, reads the whole stream and validates the answer against the spec.
func (c *client) chat(body any) (resp, []event) {
	c.t.Helper()
	r := c.do(http.MethodPost, "/api/v1/chat", body)
	if r.Status != http.StatusOK {
		return r, nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "text/event-stream" {
		c.t.Fatalf("chat answered %q", ct)
	}
	return r, readAll(c.t, bytes.NewReader(r.Body))
}

func names(evs []event) string {
	var n []string
	for _, ev := range evs {
		n = append(n, ev.Name)
	}
	return strings.Join(n, ",")
}

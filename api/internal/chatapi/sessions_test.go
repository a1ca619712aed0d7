package chatapi_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// The documented shapes, as the fake agent answers them.
const (
	sessionList = `{"items":[{"id":"s-1","title":"Restart caddy","status":"completed","outcome":"success","blocker":"",` +
		`"goal":"restart caddy on web","created_at":"2025-01-02T03:04:05Z","closed_at":"2025-01-02T03:09:05Z",` +
		`"message_count":4,"tool_call_count":2,"duration_seconds":300}],"next_cursor":"c-2"}`
	oneSession = `{"id":"s-1","title":"Restart caddy","created_at":"2025-01-02T03:04:05Z","closed_at":null,` +
		`"task":{"goal":"restart caddy on web","status":"awaiting_input","outcome":"","blocker":""},` +
		`"plan":{"generation":1,"steps":[{"index":1,"text":"check caddy","status":"done"},{"index":2,"text":"restart it","status":"pending"}]},` +
		`"messages":[{"id":1,"role":"user","content":"restart caddy","created_at":"2025-01-02T03:04:05Z","tool_calls":[]},` +
		`{"id":2,"role":"assistant","content":"it needs your approval","created_at":"2025-01-02T03:04:09Z","tool_calls":` +
		`[{"id":"tc-1","name":"run","arguments":{"target":"lxc:web","command":"systemctl restart caddy"},"result":"pending approval","is_error":false}]}]}`
	toolCalls = `{"items":[{"id":"tc-1","name":"run","arguments":{"target":"lxc:web","command":"systemctl restart caddy"},` +
		`"result":"pending approval","is_error":false,"started_at":"2025-01-02T03:04:06Z","finished_at":"2025-01-02T03:04:07Z"}]}`
)

// TestSessionsProxy: the session routes authenticate like every route, then pass the request
// on to the agent's (same path under /internal, same query string, the agent token) and its
// status and body back as they are; the agent's problems come back in the api's problem shape
// with their status, detail and field.
func TestSessionsProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	e := newEnv(t, func(e *env) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			path := r.URL.EscapedPath()
			if path == "/internal/sessions/bad-token" || !e.authorised(r) {
				problem(w, http.StatusUnauthorized, "not the agent's token")
				return
			}
			mu.Lock()
			seen = append(seen, r.Method+" "+path+"?"+r.URL.RawQuery+" "+r.Header.Get("X-Oikos-Actor"))
			mu.Unlock()
			answer := func(body string) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, body)
			}
			switch {
			case r.Method == http.MethodGet && path == "/internal/sessions" && r.URL.Query().Get("status") == "bogus":
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = io.WriteString(w, `{"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"status: \"bogus\" is not a session status","field":"status"}`)
			case r.Method == http.MethodGet && path == "/internal/sessions":
				answer(sessionList)
			case r.Method == http.MethodGet && (path == "/internal/sessions/s-1" || path == "/internal/sessions/mcp:a%2Fb"):
				answer(oneSession)
			case r.Method == http.MethodGet && path == "/internal/sessions/s-1/tool_calls":
				answer(toolCalls)
			case r.Method == http.MethodDelete && path == "/internal/sessions/s-1":
				w.WriteHeader(http.StatusNoContent)
			default:
				problem(w, http.StatusNotFound, "no session at "+path)
			}
		})
	})
	lastSeen := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			return ""
		}
		return seen[len(seen)-1]
	}
	calls := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}

	r := e.readonly.do("GET", "/api/v1/sessions?status=completed,failed&since=7d&limit=2&entity_id=lxc:web", nil).expect(t, http.StatusOK)
	if string(r.Body) != sessionList {
		t.Fatalf("list: %s", r.Body)
	}
	if got := lastSeen(); got != "GET /internal/sessions?status=completed,failed&since=7d&limit=2&entity_id=lxc:web viewer" {
		t.Fatalf("the agent saw %q", got)
	}
	if r := e.operator.do("GET", "/api/v1/sessions/s-1", nil).expect(t, http.StatusOK); string(r.Body) != oneSession {
		t.Fatalf("one session: %s", r.Body)
	}
	e.agent.do("GET", "/api/v1/sessions/mcp:a%2Fb", nil).expect(t, http.StatusOK)
	if got := lastSeen(); got != "GET /internal/sessions/mcp:a%2Fb? nomos" {
		t.Fatalf("a session id with a slash: the agent saw %q", got)
	}
	if r := e.readonly.do("GET", "/api/v1/sessions/s-1/tool_calls", nil).expect(t, http.StatusOK); string(r.Body) != toolCalls {
		t.Fatalf("tool calls: %s", r.Body)
	}
	// Problems: the agent's, in the api's shape.
	p := e.readonly.do("GET", "/api/v1/sessions/gone", nil).problem(t, http.StatusNotFound)
	if !strings.Contains(p.Detail, "no session at /internal/sessions/gone") || !strings.HasSuffix(p.Type, ":not-found") {
		t.Fatalf("unknown session: %+v", p)
	}
	e.readonly.do("GET", "/api/v1/sessions/gone/tool_calls", nil).problem(t, http.StatusNotFound)
	if p := e.readonly.do("GET", "/api/v1/sessions?status=bogus", nil).problem(t, http.StatusUnprocessableEntity); p.Field != "status" ||
		!strings.Contains(p.Detail, "bogus") {
		t.Fatalf("bad filter: %+v", p)
	}
	// An agent that refuses the api's token is the api's failure, not the client's.
	if p := e.operator.do("GET", "/api/v1/sessions/bad-token", nil).problem(t, http.StatusServiceUnavailable); !strings.Contains(p.Detail, "OIKOS_AGENT_TOKEN") {
		t.Fatalf("agent refused the token: %+v", p)
	}

	// Deleting needs a token that may write; the refusals never reach the agent.
	before := calls()
	e.readonly.do("DELETE", "/api/v1/sessions/s-1", nil).problem(t, http.StatusForbidden)
	e.anon.do("GET", "/api/v1/sessions", nil).problem(t, http.StatusUnauthorized)
	e.anon.do("DELETE", "/api/v1/sessions/s-1", nil).problem(t, http.StatusUnauthorized)
	e.readonly.do("GET", "/api/v1/sessions/has%20space", nil).problem(t, http.StatusNotFound)
	if n := calls(); n != before {
		t.Fatalf("%d refused requests reached the agent", n-before)
	}
	if r := e.operator.do("DELETE", "/api/v1/sessions/s-1", nil).expect(t, http.StatusNoContent); len(r.Body) != 0 {
		t.Fatalf("delete answered a body: %s", r.Body)
	}
	if got := lastSeen(); got != "DELETE /internal/sessions/s-1? op" {
		t.Fatalf("delete: the agent saw %q", got)
	}
	e.agent.do("DELETE", "/api/v1/sessions/gone", nil).problem(t, http.StatusNotFound)
}

// TestSessionsAgentDown: an agent that cannot be reached is a 503 saying so.
func TestSessionsAgentDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(*env) http.Handler { return nil })
	for _, path := range []string{"/api/v1/sessions", "/api/v1/sessions/s-1", "/api/v1/sessions/s-1/tool_calls"} {
		if p := e.readonly.do("GET", path, nil).problem(t, http.StatusServiceUnavailable); !strings.Contains(p.Detail, "unreachable") {
			t.Errorf("%s: %+v", path, p)
		}
	}
	e.operator.do("DELETE", "/api/v1/sessions/s-1", nil).problem(t, http.StatusServiceUnavailable)
}

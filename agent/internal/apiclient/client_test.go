package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	api "github.com/oikos-hq/oikos/shared/apiclient"
)

// The agent's calls, typed or passed on, send the caller's token and session and come back
// as one error type worded for a tool result.
func TestCallsAndErrors(t *testing.T) {
	var auth, corr, accept string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, corr, accept = r.Header.Get("Authorization"), r.Header.Get("X-Correlation-ID"), r.Header.Get("Accept")
		switch r.URL.Path {
		case "/api/v1/whoami":
			_, _ = w.Write([]byte(`{"name":"mcp-client","role":"agent"}`))
		case "/api/v1/executions":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`{"type":"urn:oikos:problem:conflict","title":"Conflict","status":409,"detail":"a change waits","approval_id":"ap-1"}`))
		case "/api/v1/executions/x/logs/stream":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"type":"urn:oikos:problem:not-found","title":"Not Found","status":404,"detail":"no execution x","field":"id"}`))
		default:
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("upstream down"))
		}
	}))
	defer srv.Close()
	c, err := apiclient.New(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := c.WhoAmI(ctx, "tok")
	if err != nil || id != (apiclient.Identity{Name: "mcp-client", Role: "agent"}) || auth != "Bearer tok" {
		t.Fatalf("whoami: %+v %v (Authorization %q)", id, err, auth)
	}
	raw, err := c.Send(ctx, http.MethodPost, "tok2", "sess-1", "/api/v1/executions", map[string]any{"target": "lxc:web"}, nil)
	var e *apiclient.Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.ApprovalID != "ap-1" || err.Error() != "api 409: a change waits" || len(raw) == 0 {
		t.Fatalf("send: %v %#v", err, e)
	}
	var shared *api.APIError
	if !errors.As(err, &shared) || apiclient.StatusOf(err) != http.StatusConflict {
		t.Fatalf("the shared error type is not in %v", err)
	}
	if auth != "Bearer tok2" || corr != "sess-1" || accept != "application/json" {
		t.Fatalf("headers: %q %q %q", auth, corr, accept)
	}
	_, err = apiclient.Decode[map[string]any](c.API().GetEntity(ctx, "lxc:web", apiclient.As("tok3", "sess-2")...))
	if err == nil || err.Error() != "api 502: upstream down" || auth != "Bearer tok3" || corr != "sess-2" {
		t.Fatalf("typed call: %v (%q %q)", err, auth, corr)
	}
	if err := c.WaitEnd(ctx, "tok", "", "x"); err == nil || err.Error() != "api 404: no execution x (field id)" {
		t.Fatalf("wait end: %v", err)
	}
	if _, err := c.Get(ctx, "", "", "/api/v1/whoami", nil, nil); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if _, err := c.WhoAmI(ctx, "tok"); err == nil || !strings.HasPrefix(err.Error(), "api unreachable: ") {
		t.Fatalf("closed api: %v", err)
	}
}

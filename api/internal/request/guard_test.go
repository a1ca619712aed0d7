package request

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

// tokens is a Verifier over a fixed table that counts its lookups.
type tokens struct {
	byToken map[string]auth.Principal
	calls   atomic.Int64
}

var errStore = errors.New("store down")

func (v *tokens) Verify(_ context.Context, tok string) (auth.Principal, error) {
	v.calls.Add(1)
	if tok == "broken" {
		return auth.Principal{}, errStore
	}
	p, ok := v.byToken[tok]
	if !ok {
		return auth.Principal{}, auth.ErrUnauthenticated
	}
	return p, nil
}

func newTokens() *tokens {
	return &tokens{byToken: map[string]auth.Principal{
		"op-token":     {Name: "op", Role: auth.RoleOperator},
		"viewer-token": {Name: "viewer", Role: auth.RoleReadonly},
		"agent-token":  {Name: "nomos", Role: auth.RoleAgent},
	}}
}

func TestGuard(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, header string
		perm         auth.Permission
		want         error // nil: admitted
		actor        string
	}{
		{"no header", "", auth.PermRead, auth.ErrUnauthenticated, ""},
		{"other scheme", "Basic b3A6eA==", auth.PermRead, auth.ErrUnauthenticated, ""},
		{"scheme only", "Bearer ", auth.PermRead, auth.ErrUnauthenticated, ""},
		{"unknown token", "Bearer nope", auth.PermRead, auth.ErrUnauthenticated, ""},
		{"store failure passes through", "Bearer broken", auth.PermRead, errStore, ""},
		{"role lacks the permission", "Bearer viewer-token", auth.PermWrite, auth.ErrForbidden, ""},
		{"reader reads", "Bearer viewer-token", auth.PermRead, nil, "viewer"},
		{"agent writes", "Bearer agent-token", auth.PermWrite, nil, "nomos"},
		{"agent passes to relay (the service proves it)", "Bearer agent-token", auth.PermDecide, nil, "nomos"},
		{"reader never decides", "Bearer viewer-token", auth.PermDecide, auth.ErrForbidden, ""},
		{"operator decides", "Bearer op-token", auth.PermDecide, nil, "op"},
		{"scheme is case-insensitive", "bEaReR op-token", auth.PermWrite, nil, "op"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := get("/x")
			if c.header != "" {
				ctx.Request().Header.Set(echo.HeaderAuthorization, c.header)
			}
			var actor string
			err := Guard(newTokens(), c.perm)(func(c echo.Context) error { actor = MetaOf(c).Actor; return nil })(ctx)
			if (c.want == nil) != (err == nil) || (c.want != nil && !errors.Is(err, c.want)) || actor != c.actor {
				t.Errorf("err %v (want %v), actor %q (want %q)", err, c.want, actor, c.actor)
			}
		})
	}
}

// A route guarded twice (a mounted group for read, the route for write) looks the token up
// once and still refuses a role that lacks the route's permission.
func TestGuardTwiceLooksUpOnce(t *testing.T) {
	t.Parallel()
	v := newTokens()
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(noLog())
	g := e.Group("/api", Guard(v, auth.PermRead))
	g.POST("/thing", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }, Guard(v, auth.PermWrite))
	for tok, status := range map[string]int{"op-token": 204, "viewer-token": 403} {
		before := v.calls.Load()
		req := httptest.NewRequest(http.MethodPost, "/api/thing", nil)
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+tok)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != status || v.calls.Load()-before != 1 {
			t.Errorf("%s: %d after %d lookups; want %d after 1", tok, rec.Code, v.calls.Load()-before, status)
		}
	}
}

// A token refused the decide permission is told why: only an operator's token decides, an
// agent's only relaying an operator's chat message the api proves (the guard admits the agent;
// the execution service proves or refuses its relay).
func TestGuardDecideSaysOnlyOperators(t *testing.T) {
	t.Parallel()
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(noLog())
	e.POST("/decide", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }, Guard(newTokens(), auth.PermDecide))
	for tok, status := range map[string]int{"op-token": 204, "agent-token": 204, "viewer-token": 403} {
		req := httptest.NewRequest(http.MethodPost, "/decide", nil)
		req.Header.Set(echo.HeaderAuthorization, "Bearer "+tok)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != status {
			t.Fatalf("%s: %d, want %d: %s", tok, rec.Code, status, rec.Body)
		}
		if status != 403 {
			continue
		}
		var p struct {
			Status int    `json:"status"`
			Detail string `json:"detail"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
			t.Fatalf("%s: %v: %s", tok, err, rec.Body)
		}
		if p.Status != 403 || !strings.Contains(p.Detail, "only an operator's token may decide an approval") ||
			!strings.Contains(p.Detail, "relaying an operator's chat message the api recorded and proves") {
			t.Errorf("%s: problem %+v does not say only an operator decides", tok, p)
		}
	}
}

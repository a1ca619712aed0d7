package request

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// TestToProblem is the one error table of the api: every sentinel, field error and base case
// with the status, kind, field and detail a client sees.
func TestToProblem(t *testing.T) {
	t.Parallel()
	attrErrs := errors.Join(&ontology.FieldError{Field: "vmid", Reason: "expected integer, got string"},
		&ontology.FieldError{Field: "cores", Reason: "expected integer, got boolean"})
	cases := []struct {
		name       string
		err        error
		status     int
		kind       string
		title      string
		field      string
		nErrors    int
		detail     string
		unexpected bool
	}{
		{"bad request", BadRequest("limit", "must be an integer from %d to %d", 1, 500), 400, "malformed-request", "Bad Request", "limit", 1, "must be an integer from 1 to 500", false},
		{"unprocessable", Unprocessable("state", "state is required"), 422, "validation", "Unprocessable Entity", "state", 1, "state is required", false},
		{"wrapped request error", fmt.Errorf("read: %w", BadRequest("cursor", "bad")), 400, "malformed-request", "", "cursor", 1, "bad", false},
		{"joined request errors list both", errors.Join(Unprocessable("a", "x"), Unprocessable("b", "y")), 422, "validation", "", "a", 2, "x", false},
		{"error without kind", &Error{Status: 400, Detail: "d"}, 400, "malformed-request", "", "", 0, "d", false},
		{"request not found", NotFound("no entity %q", "lxc:x"), 404, "not-found", "Not Found", "", 0, `no entity "lxc:x"`, false},
		{"unavailable", Unavailable("off"), 503, "unavailable", "", "", 0, "off", false},
		{"errorf", Errorf(502, "drift-failed", "", "no host: %d", 3), 502, "drift-failed", "", "", 0, "no host: 3", false},
		{"too large", TooLarge(MaxBodyBytes), 413, "payload-too-large", "", "", 0, "request body exceeds 1048576 bytes", false},
		{"max bytes error", &http.MaxBytesError{Limit: 10}, 413, "payload-too-large", "Request Entity Too Large", "", 0, "request body exceeds 10 bytes", false},
		{"unsupported media type", UnsupportedMediaType("text/plain"), 415, "unsupported-media-type", "", "", 0, `Content-Type "text/plain": send application/json`, false},
		{"echo 404", echo.ErrNotFound, 404, "no-route", "", "", 0, "Not Found", false},
		{"echo 405", echo.ErrMethodNotAllowed, 405, "method-not-allowed", "", "", 0, "Method Not Allowed", false},
		{"echo 415", echo.ErrUnsupportedMediaType, 415, "unsupported-media-type", "", "", 0, "Unsupported Media Type", false},
		{"echo other", echo.NewHTTPError(http.StatusTeapot, "tea"), 418, "http-418", "", "", 0, "tea", false},
		{"unauthenticated", auth.ErrUnauthenticated, 401, "unauthorized", "Unauthorized", "", 0, auth.ErrUnauthenticated.Error(), false},
		{"forbidden keeps the sentinel's detail", fmt.Errorf("%w: role readonly may not write", auth.ErrForbidden), 403, "forbidden", "Forbidden", "", 0,
			"token role lacks the permission: role readonly may not write", false},
		{"forbidden says nothing of fields", &apierr.FieldError{Field: "token", Reason: "x", Err: auth.ErrForbidden}, 403, "forbidden", "", "", 0, "token: x", false},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), 503, "unavailable", "", "", 0, "the request was cancelled or timed out", true},
		{"deadline", context.DeadlineExceeded, 503, "unavailable", "", "", 0, "the request was cancelled or timed out", true},
		{"anything else hides its cause", errors.New("connection refused to 10.0.0.1"), 500, "internal", "Internal Server Error", "", 0,
			"internal error; the server log has the cause under this correlation id", true},

		// The api's sentinels, however they are wrapped.
		{"not found", fmt.Errorf("wrap: %w", fmt.Errorf("%w: entity %q", apierr.ErrNotFound, "lxc:x")), 404, "not-found", "Not found", "", 0, `wrap: not found: entity "lxc:x"`, false},
		{"not found naming its field", &apierr.FieldError{Field: "target", Reason: "not found", Err: apierr.ErrNotFound}, 404, "not-found", "Not found", "target", 1, "target: not found", false},
		{"version conflict", fmt.Errorf("%w: at 3", apierr.ErrVersionConflict), 409, "version-conflict", "Version conflict", "", 0, "version conflict: at 3", false},
		{"duplicate", &apierr.FieldError{Field: "name", Reason: "exists", Err: apierr.ErrDuplicate}, 409, "duplicate", "Already exists", "name", 1, "name: exists", false},
		{"conflict", fmt.Errorf("%w: resolved", apierr.ErrConflict), 409, "conflict", "Conflict", "", 0, "conflict: resolved", false},
		{"marked conflict", apierr.Mark(errors.New("signal is resolved"), apierr.ErrConflict), 409, "conflict", "Conflict", "", 0, "signal is resolved", false},
		{"idempotency mismatch", &apierr.FieldError{Field: "Idempotency-Key", Reason: "used", Err: apierr.ErrIdempotencyMismatch}, 422, "idempotency-mismatch", "Idempotency-Key reused with another body", "Idempotency-Key", 1, "Idempotency-Key: used", false},
		{"scheduler owned", &apierr.FieldError{Field: "attributes.health", Reason: "owned", Err: apierr.ErrSchedulerOwned}, 422, "scheduler-owned", "Attribute owned by the scheduler", "attributes.health", 1, "attributes.health: owned", false},
		{"precondition", &apierr.FieldError{Field: "state", Reason: "p", Err: apierr.ErrPreconditionFailed}, 422, "precondition-failed", "Transition precondition failed", "state", 1, "state: p", false},
		{"invalid", apierr.Invalid("name", "name is required"), 422, "validation", "Invalid value", "name", 1, "name: name is required", false},
		{"field error without sentinel", &apierr.FieldError{Field: "type", Reason: "unknown"}, 422, "validation", "Unprocessable Entity", "type", 1, "type: unknown", false},
		{"ontology attributes, every field listed", attrErrs, 422, "invalid-attribute", "Invalid attribute", "attributes.vmid", 2, attrErrs.Error(), false},
		{"unknown type", &apierr.FieldError{Field: "type", Reason: "x", Err: fmt.Errorf("%w: x", ontology.ErrUnknownType)}, 422, "unknown-type", "Unknown entity type", "type", 1, "type: x", false},
		{"illegal transition", &apierr.FieldError{Field: "state", Reason: "no", Err: ontology.ErrIllegalTransition}, 422, "illegal-transition", "Illegal state transition", "state", 1, "state: no", false},
		{"edge not allowed", fmt.Errorf("%w: %w: loves", ontology.ErrEdgeNotAllowed, ontology.ErrUnknownRelationshipType), 422, "edge-not-allowed", "Edge not allowed by the ontology", "", 0, "edge not allowed: unknown relationship type: loves", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, unexpected := ToProblem(c.err)
			if p.Status != c.status || p.Type != "urn:oikos:problem:"+c.kind || p.Field != c.field || len(p.Errors) != c.nErrors ||
				p.Detail != c.detail || unexpected != c.unexpected || (c.title != "" && p.Title != c.title) {
				t.Errorf("ToProblem(%v) = %+v (unexpected %v)", c.err, p, unexpected)
			}
			if p.Title == "" || p.Errors == nil {
				t.Errorf("title %q, errors %v: both must be set", p.Title, p.Errors)
			}
		})
	}
}

// An extended error keeps its class's status and kind and adds its detail and members.
func TestToProblemExtended(t *testing.T) {
	t.Parallel()
	type approval struct{ ID string }
	p, _ := ToProblem(fmt.Errorf("request: %w", &apierr.Extended{Err: apierr.Mark(errors.New("refused: no -n"), apierr.ErrRefused),
		Detail: "no -n", Code: "syntax", ApprovalID: "a1", RiskClass: "destructive", Approval: &approval{ID: "a1"}}))
	if p.Status != 422 || p.Type != ProblemType("execution-refused") || p.Title != "Refused by the gate" || p.Detail != "no -n" ||
		p.Code != "syntax" || p.ApprovalID != "a1" || p.RiskClass != "destructive" || p.Approval == nil || len(p.Errors) != 0 {
		t.Errorf("%+v", p)
	}
	p, _ = ToProblem(&apierr.Extended{Err: apierr.Invalid("params.x", "bad"), Detail: "bad"})
	if p.Status != 422 || p.Field != "params.x" || p.Detail != "bad" || len(p.Errors) != 1 || p.Title != "Invalid value" {
		t.Errorf("%+v", p)
	}
	// An unexpected error says nothing more, extended or not.
	p, unexpected := ToProblem(&apierr.Extended{Err: errors.New("boom"), Detail: "secret", Code: "c"})
	if !unexpected || p.Status != 500 || p.Detail == "secret" || p.Code != "" {
		t.Errorf("%+v", p)
	}
}

func TestIssuesRecognisesFieldErrorsAndDeduplicates(t *testing.T) {
	t.Parallel()
	err := errors.Join(&ontology.FieldError{Field: "vmid", Reason: "bad"}, fmt.Errorf("w: %w", &ontology.FieldError{Field: "vmid", Reason: "bad"}),
		BadRequest("", "no field"), Unprocessable("name", "empty"), &apierr.FieldError{Field: "tags[0]", Reason: "empty"})
	got := Issues(err)
	want := []FieldIssue{{"attributes.vmid", "bad"}, {"name", "empty"}, {"tags[0]", "empty"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Issues = %v, want %v", got, want)
	}
	if Issues(errors.New("plain")) != nil {
		t.Error("a plain error has no issues")
	}
}

// serve runs h behind Correlation with ErrorHandler as echo's, and returns the recorder.
func serve(t *testing.T, method string, h echo.HandlerFunc, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(zerolog.Nop())
	e.Use(Correlation)
	e.Add(method, "/api/v1/things/:id", h)
	req := httptest.NewRequest(method, "/api/v1/things/7", nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

// The bytes on the wire are the contract's: member order, omitted empties, errors never
// null, a trailing newline.
func TestRenderWritesTheProblemDocument(t *testing.T) {
	t.Parallel()
	rec := serve(t, http.MethodGet, func(echo.Context) error { return BadRequest("limit", "must be an integer from 1 to 500") },
		HeaderCorrelationID, "req-1")
	want := `{"type":"urn:oikos:problem:malformed-request","title":"Bad Request","status":400,` +
		`"detail":"must be an integer from 1 to 500","instance":"/api/v1/things/7","field":"limit",` +
		`"errors":[{"field":"limit","reason":"must be an integer from 1 to 500"}],"correlation_id":"req-1"}` + "\n"
	if rec.Code != 400 || rec.Header().Get(echo.HeaderContentType) != ProblemMediaType || rec.Body.String() != want {
		t.Errorf("%d %q\n got %s\nwant %s", rec.Code, rec.Header().Get(echo.HeaderContentType), rec.Body, want)
	}

	rec = serve(t, http.MethodGet, func(echo.Context) error {
		return &apierr.Extended{Err: apierr.Mark(errors.New("refused: x"), apierr.ErrRefused), Detail: "x", Code: "c1"}
	})
	if !strings.Contains(rec.Body.String(), `"code":"c1"`) || strings.Contains(rec.Body.String(), `"approval"`) {
		t.Errorf("extension members: %s", rec.Body)
	}
}

func TestRenderUnauthorizedAndHead(t *testing.T) {
	t.Parallel()
	rec := serve(t, http.MethodGet, func(echo.Context) error { return auth.ErrUnauthenticated })
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") != `Bearer realm="oikos"` || !strings.Contains(rec.Body.String(), `"errors":[]`) {
		t.Errorf("401: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = serve(t, http.MethodHead, func(echo.Context) error { return NotFound("gone") })
	if rec.Code != 404 || rec.Body.Len() != 0 {
		t.Errorf("HEAD: %d %q", rec.Code, rec.Body)
	}
}

// A response already started (a stream that failed midway) is not written over.
func TestRenderLeavesACommittedResponse(t *testing.T) {
	t.Parallel()
	rec := serve(t, http.MethodGet, func(c echo.Context) error {
		if err := c.String(http.StatusOK, "partial"); err != nil {
			return err
		}
		return errors.New("late")
	})
	if rec.Code != 200 || rec.Body.String() != "partial" {
		t.Errorf("%d %q", rec.Code, rec.Body)
	}
}

// Catch renders what it wraps and answers nil, so a bare echo's default handler never sees
// the error.
func TestCatch(t *testing.T) {
	t.Parallel()
	e := echo.New()
	e.GET("/x", func(echo.Context) error { return fmt.Errorf("w: %w", apierr.ErrDuplicate) }, Catch(zerolog.Nop()))
	e.GET("/y", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }, Catch(zerolog.Nop()))
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	if rec.Code != http.StatusConflict || rec.Header().Get(echo.HeaderContentType) != ProblemMediaType ||
		!strings.Contains(rec.Body.String(), `"type":"urn:oikos:problem:duplicate"`) {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/y", nil))
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}

// Mount guards and catches every route alike: no token, the wrong role and a handler's
// error are all problem JSON, on a bare echo.
func TestMount(t *testing.T) {
	t.Parallel()
	e := echo.New()
	ok := func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }
	Mount(e.Group("/api/v1"), newTokens(), zerolog.Nop(),
		GET("/r", auth.PermRead, ok),
		POST("/w", auth.PermWrite, ok),
		GET("/gone", auth.PermRead, func(echo.Context) error { return fmt.Errorf("%w: x", apierr.ErrNotFound) }),
	)
	for _, c := range []struct {
		method, path, token string
		status              int
	}{
		{http.MethodGet, "/api/v1/r", "", 401},
		{http.MethodGet, "/api/v1/r", "viewer-token", 204},
		{http.MethodPost, "/api/v1/w", "viewer-token", 403},
		{http.MethodPost, "/api/v1/w", "op-token", 204},
		{http.MethodGet, "/api/v1/gone", "op-token", 404},
	} {
		req := httptest.NewRequest(c.method, c.path, nil)
		if c.token != "" {
			req.Header.Set(echo.HeaderAuthorization, "Bearer "+c.token)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != c.status || (c.status >= 400 && rec.Header().Get(echo.HeaderContentType) != ProblemMediaType) {
			t.Errorf("%s %s (%q): %d %s", c.method, c.path, c.token, rec.Code, rec.Body)
		}
	}
}

// While the database is away every route answers the same 503 problem with Retry-After,
// never a 500.
func TestRenderDatabaseUnavailable(t *testing.T) {
	t.Parallel()
	e := echo.New()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/entities", nil)
	rec := httptest.NewRecorder()
	c := e.NewContext(req, rec)
	err := fmt.Errorf("list entities: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"})
	if Render(c, err) {
		t.Fatal("a database outage was reported as unexpected")
	}
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if !strings.Contains(rec.Body.String(), ProblemType(KindDatabaseUnavailable)) {
		t.Fatalf("body %s", rec.Body.String())
	}
}

// Another peer refusing a connection (the agent behind chat, a webhook) is not the
// database being away: no database-unavailable 503 and no Retry-After for it.
func TestRenderPeerNetworkErrorIsNotTheDatabase(t *testing.T) {
	t.Parallel()
	e := echo.New()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/chat", nil)
	rec := httptest.NewRecorder()
	c := e.NewContext(req, rec)
	err := fmt.Errorf("forward to the agent: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	Render(c, err)
	if rec.Code == http.StatusServiceUnavailable || strings.Contains(rec.Body.String(), ProblemType(KindDatabaseUnavailable)) {
		t.Fatalf("a peer's refused connection rendered as %d %s", rec.Code, rec.Body.String())
	}
}

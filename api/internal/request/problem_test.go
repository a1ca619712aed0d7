package request

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

var errMine = errors.New("mine")

// mine is a surface's mapper: it knows errMine and nothing else.
func mine(err error) (Problem, bool) {
	if !errors.Is(err, errMine) {
		return Problem{}, false
	}
	return Problem{Status: http.StatusConflict, Type: ProblemType("mine"), Title: "Mine", Detail: err.Error(),
		Code: "c1", Errors: []FieldIssue{{Field: "x", Reason: "taken"}}, Field: "x"}, true
}

func TestToProblem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		err        error
		status     int
		kind       string
		field      string
		nErrors    int
		detail     string
		unexpected bool
	}{
		{"bad request", BadRequest("limit", "too big"), 400, "malformed-request", "limit", 1, "too big", false},
		{"unprocessable", Unprocessable("state", "state is required"), 422, "validation", "state", 1, "state is required", false},
		{"wrapped request error", fmt.Errorf("read: %w", BadRequest("cursor", "bad")), 400, "malformed-request", "cursor", 1, "bad", false},
		{"joined request errors list both", errors.Join(Unprocessable("a", "x"), Unprocessable("b", "y")), 422, "validation", "a", 2, "x", false},
		{"error without kind", &Error{Status: 400, Detail: "d"}, 400, "malformed-request", "", 0, "d", false},
		{"not found", NotFound("no entity %q", "lxc:x"), 404, "not-found", "", 0, `no entity "lxc:x"`, false},
		{"unavailable", Unavailable("off"), 503, "unavailable", "", 0, "off", false},
		{"errorf", Errorf(502, "drift-failed", "", "no host: %d", 3), 502, "drift-failed", "", 0, "no host: 3", false},
		{"too large", TooLarge(MaxBodyBytes), 413, "payload-too-large", "", 0, "request body exceeds 1048576 bytes", false},
		{"max bytes error", &http.MaxBytesError{Limit: 10}, 413, "payload-too-large", "", 0, "request body exceeds 10 bytes", false},
		{"unsupported media type", UnsupportedMediaType("text/plain"), 415, "unsupported-media-type", "", 0, `Content-Type "text/plain": send application/json`, false},
		{"echo 404", echo.ErrNotFound, 404, "no-route", "", 0, "Not Found", false},
		{"echo 405", echo.ErrMethodNotAllowed, 405, "method-not-allowed", "", 0, "Method Not Allowed", false},
		{"echo 415", echo.ErrUnsupportedMediaType, 415, "unsupported-media-type", "", 0, "Unsupported Media Type", false},
		{"echo other", echo.NewHTTPError(http.StatusTeapot, "tea"), 418, "http-418", "", 0, "tea", false},
		{"unauthenticated", auth.ErrUnauthenticated, 401, "unauthorized", "", 0, auth.ErrUnauthenticated.Error(), false},
		{"forbidden keeps the sentinel's detail", fmt.Errorf("%w: role readonly may not write", auth.ErrForbidden), 403, "forbidden", "", 0,
			"token role lacks the permission: role readonly may not write", false},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), 503, "unavailable", "", 0, "the request was cancelled or timed out", true},
		{"deadline", context.DeadlineExceeded, 503, "unavailable", "", 0, "the request was cancelled or timed out", true},
		{"anything else hides its cause", errors.New("connection refused to 10.0.0.1"), 500, "internal", "", 0,
			"internal error; the server log has the cause under this correlation id", true},
		{"the surface's mapper first", fmt.Errorf("x: %w", errMine), 409, "mine", "x", 1, "x: mine", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			p, unexpected := ToProblem(c.err, mine)
			if p.Status != c.status || p.Type != "urn:oikos:problem:"+c.kind || p.Field != c.field || len(p.Errors) != c.nErrors ||
				p.Detail != c.detail || unexpected != c.unexpected {
				t.Errorf("ToProblem(%v) = %+v (unexpected %v)", c.err, p, unexpected)
			}
			if p.Title == "" || p.Errors == nil {
				t.Errorf("title %q, errors %v: both must be set", p.Title, p.Errors)
			}
		})
	}
}

// A 401 or 403 says nothing about fields, whatever the mapper found.
func TestToProblemAuthHasNoFieldDetail(t *testing.T) {
	t.Parallel()
	leaky := func(error) (Problem, bool) {
		return Problem{Status: http.StatusForbidden, Type: ProblemType("forbidden"), Detail: "no",
			Field: "token", Errors: []FieldIssue{{Field: "token", Reason: "expired"}}}, true
	}
	p, _ := ToProblem(errors.New("x"), leaky)
	if p.Field != "" || p.Errors == nil || len(p.Errors) != 0 || p.Title != "Forbidden" {
		t.Errorf("%+v", p)
	}
}

func TestIssuesRecognisesOthersAndDeduplicates(t *testing.T) {
	t.Parallel()
	type fieldErr struct{ error }
	issue := func(err error) (FieldIssue, bool) {
		if fe, ok := err.(fieldErr); ok {
			return FieldIssue{Field: "attributes." + fe.Error(), Reason: "bad"}, true
		}
		return FieldIssue{}, false
	}
	err := errors.Join(fieldErr{errors.New("vmid")}, fmt.Errorf("w: %w", fieldErr{errors.New("vmid")}),
		BadRequest("", "no field"), Unprocessable("name", "empty"))
	got := Issues(err, issue)
	want := []FieldIssue{{"attributes.vmid", "bad"}, {"name", "empty"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Issues = %v, want %v", got, want)
	}
	if Issues(errors.New("plain"), nil) != nil {
		t.Error("a plain error has no issues")
	}
}

// serve runs h behind Correlation with ErrorHandler as echo's, and returns the recorder.
func serve(t *testing.T, method string, h echo.HandlerFunc, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	e := echo.New()
	e.HTTPErrorHandler = ErrorHandler(zerolog.Nop(), mine)
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

	rec = serve(t, http.MethodGet, func(echo.Context) error { return fmt.Errorf("boom: %w", errMine) })
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
	e.GET("/x", func(echo.Context) error { return fmt.Errorf("w: %w", errMine) }, Catch(zerolog.Nop(), mine))
	e.GET("/y", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) }, Catch(zerolog.Nop()))
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	if rec.Code != http.StatusConflict || rec.Header().Get(echo.HeaderContentType) != ProblemMediaType ||
		!strings.Contains(rec.Body.String(), `"type":"urn:oikos:problem:mine"`) {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/y", nil))
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Errorf("%d %s", rec.Code, rec.Body)
	}
}

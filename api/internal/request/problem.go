package request

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
)

// ProblemMediaType is RFC 9457's media type for error bodies.
const ProblemMediaType = "application/problem+json"

// FieldIssue names one field at fault.
type FieldIssue struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Problem is an RFC 9457 problem details body, the one error shape of the whole api. Field
// names the first field at fault (the one a client should fix first); Errors lists every one
// found and is never null. The last four members are extensions a surface sets where a
// client needs them (the execution gate's refusals and lost decisions); they are omitted
// everywhere else, so every surface's problems validate against the same schema.
type Problem struct {
	Type          string       `json:"type"`
	Title         string       `json:"title"`
	Status        int          `json:"status"`
	Detail        string       `json:"detail"`
	Instance      string       `json:"instance,omitempty"`
	Field         string       `json:"field,omitempty"`
	Errors        []FieldIssue `json:"errors"`
	CorrelationID string       `json:"correlation_id,omitempty"`
	// Code is the execution gate's stable refusal code (syntax, no_guest_agent, ...).
	Code string `json:"code,omitempty"`
	// ApprovalID names the pending approval a flood refusal waits on.
	ApprovalID string `json:"approval_id,omitempty"`
	// RiskClass is the class the gate computed before refusing.
	RiskClass string `json:"risk_class,omitempty"`
	// Approval is the approval as it stands, on a decision that lost (409). It is typed any
	// so this package does not depend on the execution service.
	Approval any `json:"approval,omitempty"`
}

// ProblemType builds the type URI of a problem kind. A URN, so it never points at a host.
func ProblemType(kind string) string { return "urn:oikos:problem:" + kind }

// Mapper turns the errors one surface knows (its services' sentinels and types) into a
// problem; ok is false for an error it does not know, which the base mapping then answers.
// A mapper sets Status, Type (ProblemType), Detail and, where it has them, Title, Field and
// Errors; Render fills the rest.
type Mapper func(err error) (p Problem, ok bool)

// ToProblem is the one place an error becomes a problem: the mappers in order, then the
// base mapping (Error, an over-long body, echo's errors, the auth sentinels, a cancelled
// request, else an internal error). unexpected reports a 5xx nobody mapped, which the
// caller must log: its detail says only to look in the log.
func ToProblem(err error, mappers ...Mapper) (p Problem, unexpected bool) {
	matched := false
	for _, m := range mappers {
		if p, matched = m(err); matched {
			break
		}
	}
	if !matched {
		p, unexpected = baseProblem(err)
	}
	if p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden {
		// Say nothing about why a token failed beyond what the sentinel says.
		p.Errors, p.Field = nil, ""
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Errors == nil {
		p.Errors = []FieldIssue{}
	}
	return p, unexpected
}

// baseProblem maps the errors every surface meets.
func baseProblem(err error) (Problem, bool) {
	p := Problem{Detail: err.Error(), Errors: Issues(err, nil)}
	if len(p.Errors) > 0 {
		p.Field = p.Errors[0].Field
	}
	var re *Error
	var mbe *http.MaxBytesError
	var he *echo.HTTPError
	switch {
	case errors.As(err, &re):
		p.Status, p.Type, p.Detail = re.Status, ProblemType(re.kind()), re.Detail
	case errors.As(err, &mbe):
		p.Status, p.Type = http.StatusRequestEntityTooLarge, ProblemType(kindTooLarge)
		p.Detail = tooLargeDetail(mbe.Limit)
	case errors.As(err, &he):
		p.Status, p.Type = he.Code, ProblemType(echoKind(he.Code))
		p.Detail = fmt.Sprint(he.Message)
	case errors.Is(err, auth.ErrUnauthenticated):
		p.Status, p.Type, p.Title = http.StatusUnauthorized, ProblemType("unauthorized"), "Unauthorized"
	case errors.Is(err, auth.ErrForbidden):
		p.Status, p.Type, p.Title = http.StatusForbidden, ProblemType("forbidden"), "Forbidden"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		p.Status, p.Type = http.StatusServiceUnavailable, ProblemType("unavailable")
		p.Detail = "the request was cancelled or timed out"
		return p, true
	default:
		p.Status, p.Type = http.StatusInternalServerError, ProblemType("internal")
		p.Detail = "internal error; the server log has the cause under this correlation id"
		return p, true
	}
	return p, false
}

// echoKind names the problems echo's router raises itself.
func echoKind(code int) string {
	switch code {
	case http.StatusNotFound:
		return "no-route"
	case http.StatusMethodNotAllowed:
		return "method-not-allowed"
	case http.StatusUnsupportedMediaType:
		return kindUnsupportedMediaType
	default:
		return "http-" + fmt.Sprint(code)
	}
}

// Issues collects every field-level error in err's tree, in order and without repeats: each
// Error naming a field, and whatever issue recognises (a surface's own field error types;
// nil for none). A joined error reports every field at fault, not only the first.
func Issues(err error, issue func(error) (FieldIssue, bool)) []FieldIssue {
	var out []FieldIssue
	seen := map[FieldIssue]bool{}
	walkErrors(err, func(e error) {
		var fi FieldIssue
		var ok bool
		if re, isErr := e.(*Error); isErr {
			fi, ok = FieldIssue{Field: re.Field, Reason: re.Detail}, true
		} else if issue != nil {
			fi, ok = issue(e)
		}
		if !ok || fi.Field == "" || seen[fi] {
			return
		}
		seen[fi] = true
		out = append(out, fi)
	})
	return out
}

// walkErrors visits err and everything it wraps, through both Unwrap forms.
func walkErrors(err error, fn func(error)) {
	if err == nil {
		return
	}
	fn(err)
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			walkErrors(e, fn)
		}
	case interface{ Unwrap() error }:
		walkErrors(u.Unwrap(), fn)
	}
}

// Render writes err as problem JSON: the mapped problem with the request's path as Instance
// and its correlation id, WWW-Authenticate on a 401, and no body for HEAD. A response
// already committed (a stream that failed midway) is left alone. unexpected is true when
// err was an unmapped 5xx the caller must log.
func Render(c echo.Context, err error, mappers ...Mapper) (unexpected bool) {
	if c.Response().Committed {
		return false
	}
	p, unexpected := ToProblem(err, mappers...)
	p.Instance = c.Request().URL.Path
	p.CorrelationID = CorrelationID(c)
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="oikos"`)
	}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(p.Status)
		return unexpected
	}
	c.Response().Header().Set(echo.HeaderContentType, ProblemMediaType)
	c.Response().WriteHeader(p.Status)
	_ = json.NewEncoder(c.Response()).Encode(p)
	return unexpected
}

// ErrorHandler is an echo error handler that renders through Render and logs every
// unexpected error with the correlation id the client was given, so the two can be matched.
func ErrorHandler(log zerolog.Logger, mappers ...Mapper) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if Render(c, err, mappers...) {
			log.Error().Err(err).Str("correlation_id", CorrelationID(c)).Str("method", c.Request().Method).
				Str("path", c.Request().URL.Path).Msg("request failed")
		}
	}
}

// Catch is a route-level middleware that renders any error of what it wraps (a guard, the
// handler) as ErrorHandler does, and answers nil. A feature package puts it first on its
// routes so its problems carry its own mapping and it works mounted on a bare echo (as its
// tests do) exactly as behind the api's server.
func Catch(log zerolog.Logger, mappers ...Mapper) echo.MiddlewareFunc {
	handle := ErrorHandler(log, mappers...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := next(c); err != nil {
				handle(err, c)
			}
			return nil
		}
	}
}

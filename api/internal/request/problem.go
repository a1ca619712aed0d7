package request

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
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

// KindDatabaseUnavailable is the problem kind of every answer given while the database is
// unreachable.
const KindDatabaseUnavailable = "database-unavailable"

// RetryAfterSeconds is the Retry-After of a 503: the pool reconnects on the next request,
// so a client may try again soon; the dashboard backs off further on its own.
const RetryAfterSeconds = "2"

// ProblemType builds the type URI of a problem kind. A URN, so it never points at a host.
func ProblemType(kind string) string { return "urn:oikos:problem:" + kind }

// answer is how the api answers one sentinel: its status, problem kind and title.
type answer struct {
	sentinel error
	status   int
	kind     string
	title    string
}

// answers is the api's one table from its sentinels (api/internal/apierr, and the shared
// ontology's validation errors, which graph wraps in field errors) to statuses. The first
// row whose sentinel err wraps wins, so a specific sentinel comes before a general one.
var answers = []answer{
	{ErrCrossOrigin, http.StatusForbidden, "cross-origin", "Cross-origin request refused"},
	{apierr.ErrSchedulerOwned, http.StatusUnprocessableEntity, "scheduler-owned", "Attribute owned by the scheduler"},
	{apierr.ErrNotFound, http.StatusNotFound, "not-found", "Not found"},
	{apierr.ErrVersionConflict, http.StatusConflict, "version-conflict", "Version conflict"},
	{apierr.ErrDuplicate, http.StatusConflict, "duplicate", "Already exists"},
	{apierr.ErrAlreadyDecided, http.StatusConflict, "already-decided", "Already decided"},
	{apierr.ErrConflict, http.StatusConflict, "conflict", "Conflict"},
	{apierr.ErrIdempotencyMismatch, http.StatusUnprocessableEntity, "idempotency-mismatch", "Idempotency-Key reused with another body"},
	{apierr.ErrPreconditionFailed, http.StatusUnprocessableEntity, "precondition-failed", "Transition precondition failed"},
	{apierr.ErrRefused, http.StatusUnprocessableEntity, "execution-refused", "Refused by the gate"},
	{ontology.ErrIllegalTransition, http.StatusUnprocessableEntity, "illegal-transition", "Illegal state transition"},
	{ontology.ErrUndeclaredState, http.StatusUnprocessableEntity, "undeclared-state", "Undeclared state"},
	{ontology.ErrAbstractType, http.StatusUnprocessableEntity, "abstract-type", "Abstract entity type"},
	{ontology.ErrUnknownType, http.StatusUnprocessableEntity, "unknown-type", "Unknown entity type"},
	{ontology.ErrEdgeNotAllowed, http.StatusUnprocessableEntity, "edge-not-allowed", "Edge not allowed by the ontology"},
	{ontology.ErrInvalidAttribute, http.StatusUnprocessableEntity, "invalid-attribute", "Invalid attribute"},
	{apierr.ErrInvalid, http.StatusUnprocessableEntity, "validation", "Invalid value"},
}

// ToProblem is the one place an error becomes a problem, for every surface of the api: the
// api's sentinels through the answers table, then what every request may meet (an Error a
// handler raised, an over-long body, echo's own errors, the auth sentinels), a field error of
// no known sentinel as a validation failure, a cancelled request, else an internal error. An
// *apierr.Extended adds its detail and extension members. unexpected reports a 5xx nobody
// mapped, which the caller must log: its detail says only to look in the log.
func ToProblem(err error) (p Problem, unexpected bool) {
	p, unexpected = problemOf(err)
	var x *apierr.Extended
	if !unexpected && errors.As(err, &x) {
		if x.Detail != "" {
			p.Detail = x.Detail
		}
		p.Code, p.ApprovalID, p.RiskClass, p.Approval = x.Code, x.ApprovalID, x.RiskClass, x.Approval
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

// problemOf maps err to its status, kind, title and detail, and lists its fields at fault.
func problemOf(err error) (Problem, bool) {
	p := Problem{Detail: err.Error(), Errors: Issues(err)}
	if len(p.Errors) > 0 {
		p.Field = p.Errors[0].Field
	}
	for _, a := range answers {
		if errors.Is(err, a.sentinel) {
			p.Status, p.Type, p.Title = a.status, ProblemType(a.kind), a.title
			return p, false
		}
	}
	var fe *apierr.FieldError
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
	case errors.As(err, &fe):
		// A field error of no known sentinel is a plain validation failure.
		p.Status, p.Type = http.StatusUnprocessableEntity, ProblemType(kindValidation)
	case pg.IsUnavailable(err):
		// The database is away (stopped, restarting, unreachable): every route answers the
		// same quick 503 with Retry-After (Render) instead of a 500, and the client retries.
		p.Status, p.Type, p.Title = http.StatusServiceUnavailable, ProblemType(KindDatabaseUnavailable), "Database unavailable"
		p.Detail = "the database is unreachable; retry shortly (GET /healthz says since when)"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		p.Status, p.Type = http.StatusServiceUnavailable, ProblemType(kindUnavailable)
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
// Error and *apierr.FieldError naming a field, and each attribute the ontology refused (as
// attributes.<name>). A joined error reports every field at fault, not only the first.
func Issues(err error) []FieldIssue {
	var out []FieldIssue
	seen := map[FieldIssue]bool{}
	walkErrors(err, func(e error) {
		var fi FieldIssue
		switch x := e.(type) {
		case *Error:
			fi = FieldIssue{Field: x.Field, Reason: x.Detail}
		case *apierr.FieldError:
			fi = FieldIssue{Field: x.Field, Reason: x.Reason}
		case *ontology.FieldError:
			fi = FieldIssue{Field: "attributes." + x.Field, Reason: x.Reason}
		default:
			return
		}
		if fi.Field == "" || seen[fi] {
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
// already committed (a stream that failed midway) is left alone. A refused body (413) is
// first read to its end, within a bound, and the connection is closed after the answer (see
// discardBody), so the client reads the 413 instead of a reset. unexpected is true when err
// was an unmapped 5xx the caller must log.
func Render(c echo.Context, err error) (unexpected bool) {
	if c.Response().Committed {
		return false
	}
	p, unexpected := ToProblem(err)
	p.Instance = c.Request().URL.Path
	p.CorrelationID = CorrelationID(c)
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="oikos"`)
	}
	if p.Status == http.StatusRequestEntityTooLarge {
		discardBody(c)
	}
	if p.Status == http.StatusServiceUnavailable && c.Response().Header().Get("Retry-After") == "" {
		c.Response().Header().Set("Retry-After", RetryAfterSeconds)
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
func ErrorHandler(log zerolog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if Render(c, err) {
			log.Error().Err(err).Str("correlation_id", CorrelationID(c)).Str("method", c.Request().Method).
				Str("path", c.Request().URL.Path).Msg("request failed")
		}
	}
}

// Catch is the route-level middleware Mount puts first on every route: it renders any error
// of what it wraps (the guard, the handler) as ErrorHandler does and answers nil, so a route
// answers the same on the api's server and on a bare echo (as the feature packages' tests
// mount them).
func Catch(log zerolog.Logger) echo.MiddlewareFunc {
	handle := ErrorHandler(log)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if err := next(c); err != nil {
				handle(err, c)
			}
			return nil
		}
	}
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/readmodel"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// problemMediaType is RFC 9457's media type for error bodies.
const problemMediaType = "application/problem+json"

// FieldIssue names one field at fault.
type FieldIssue struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Problem is an RFC 9457 problem details body. Field names the first field at fault (the one
// a client should fix first); Errors lists every one found.
type Problem struct {
	Type          string       `json:"type"`
	Title         string       `json:"title"`
	Status        int          `json:"status"`
	Detail        string       `json:"detail"`
	Instance      string       `json:"instance,omitempty"`
	Field         string       `json:"field,omitempty"`
	Errors        []FieldIssue `json:"errors"`
	CorrelationID string       `json:"correlation_id,omitempty"`
}

// problemType builds the type URI of a problem kind. A URN, so it never points at a host.
func problemType(kind string) string { return "urn:oikos:problem:" + kind }

// apiError is an error a handler raises itself, already knowing its status and field.
type apiError struct {
	status int
	kind   string
	field  string
	detail string
}

func (e *apiError) Error() string {
	if e.field != "" {
		return e.field + ": " + e.detail
	}
	return e.detail
}

// badRequest is a malformed request (400): unparsable JSON, a bad query parameter.
func badRequest(field, format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, kind: "malformed-request", field: field, detail: fmt.Sprintf(format, args...)}
}

// unprocessable is a well-formed request with an invalid value (422).
func unprocessable(field, format string, args ...any) error {
	return &apiError{status: http.StatusUnprocessableEntity, kind: "validation", field: field, detail: fmt.Sprintf(format, args...)}
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

// fieldIssues collects every field-level error in err's tree: graph validation errors and
// the ontology's per-attribute errors (which graph joins, one per bad attribute).
func fieldIssues(err error) []FieldIssue {
	var out []FieldIssue
	seen := map[string]bool{}
	walkErrors(err, func(e error) {
		var fi FieldIssue
		switch x := e.(type) {
		case *graph.ValidationError:
			fi = FieldIssue{Field: x.Field, Reason: x.Reason}
		case *ontology.FieldError:
			fi = FieldIssue{Field: "attributes." + x.Field, Reason: x.Reason}
		case *readmodel.FieldError:
			fi = FieldIssue{Field: x.Field, Reason: x.Reason}
		case *apiError:
			fi = FieldIssue{Field: x.field, Reason: x.detail}
		default:
			return
		}
		if fi.Field == "" || seen[fi.Field+"\x00"+fi.Reason] {
			return
		}
		seen[fi.Field+"\x00"+fi.Reason] = true
		out = append(out, fi)
	})
	return out
}

// mapping is one row of the sentinel → status table.
type mapping struct {
	sentinel error
	status   int
	kind     string
	title    string
}

// sentinels maps every error the api's services return to a status. Order matters only
// where one error wraps several sentinels; the first match wins.
var sentinels = []mapping{
	{auth.ErrUnauthenticated, http.StatusUnauthorized, "unauthorized", "Unauthorized"},
	{auth.ErrForbidden, http.StatusForbidden, "forbidden", "Forbidden"},
	{graph.ErrSchedulerOwned, http.StatusUnprocessableEntity, "scheduler-owned", "Attribute owned by the scheduler"},
	{graph.ErrNotFound, http.StatusNotFound, "not-found", "Not found"},
	{readmodel.ErrNotFound, http.StatusNotFound, "not-found", "Not found"},
	{graph.ErrVersionConflict, http.StatusConflict, "version-conflict", "Version conflict"},
	{graph.ErrDuplicate, http.StatusConflict, "duplicate", "Already exists"},
	{readmodel.ErrConflict, http.StatusConflict, "conflict", "Conflict"},
	{graph.ErrIdempotencyMismatch, http.StatusUnprocessableEntity, "idempotency-mismatch", "Idempotency-Key reused with another body"},
	{graph.ErrPreconditionFailed, http.StatusUnprocessableEntity, "precondition-failed", "Transition precondition failed"},
	{ontology.ErrIllegalTransition, http.StatusUnprocessableEntity, "illegal-transition", "Illegal state transition"},
	{ontology.ErrUndeclaredState, http.StatusUnprocessableEntity, "undeclared-state", "Undeclared state"},
	{ontology.ErrAbstractType, http.StatusUnprocessableEntity, "abstract-type", "Abstract entity type"},
	{ontology.ErrUnknownType, http.StatusUnprocessableEntity, "unknown-type", "Unknown entity type"},
	{ontology.ErrEdgeNotAllowed, http.StatusUnprocessableEntity, "edge-not-allowed", "Edge not allowed by the ontology"},
	{ontology.ErrInvalidAttribute, http.StatusUnprocessableEntity, "invalid-attribute", "Invalid attribute"},
	{graph.ErrInvalid, http.StatusUnprocessableEntity, "validation", "Invalid value"},
}

// toProblem is the one place an error becomes an HTTP answer. It returns the problem and
// whether the error was unexpected (a 5xx the server must log).
func toProblem(err error) (Problem, bool) {
	p := Problem{Errors: fieldIssues(err)}
	if len(p.Errors) > 0 {
		p.Field = p.Errors[0].Field
	}
	p.Detail = err.Error()
	var ae *apiError
	var he *echo.HTTPError
	var mbe *http.MaxBytesError
	var ve *graph.ValidationError
	var fe *readmodel.FieldError
	switch {
	case errors.As(err, &ae):
		p.Status, p.Type, p.Detail = ae.status, problemType(ae.kind), ae.detail
	case errors.As(err, &mbe):
		p.Status, p.Type = http.StatusRequestEntityTooLarge, problemType("payload-too-large")
		p.Detail = fmt.Sprintf("request body exceeds %d bytes", mbe.Limit)
	case errors.As(err, &he):
		p.Status, p.Type = he.Code, problemType(echoKind(he.Code))
		p.Detail = fmt.Sprint(he.Message)
	default:
		for _, m := range sentinels {
			if errors.Is(err, m.sentinel) {
				p.Status, p.Type, p.Title = m.status, problemType(m.kind), m.title
				break
			}
		}
		if p.Status == 0 && errors.As(err, &ve) {
			p.Status, p.Type = http.StatusUnprocessableEntity, problemType("validation")
		}
		if errors.As(err, &ve) && ve.Status != 0 {
			p.Status = ve.Status
		}
		if p.Status == 0 && errors.As(err, &fe) {
			p.Status, p.Type = http.StatusUnprocessableEntity, problemType("validation")
		}
	}
	unexpected := false
	if p.Status == 0 {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			p.Status, p.Type = http.StatusServiceUnavailable, problemType("unavailable")
			p.Detail = "the request was cancelled or timed out"
		default:
			p.Status, p.Type = http.StatusInternalServerError, problemType("internal")
			p.Detail = "internal error; the server log has the cause under this correlation id"
		}
		unexpected = true
	}
	if p.Status == http.StatusUnauthorized || p.Status == http.StatusForbidden {
		// Say nothing about why a token failed beyond what the sentinel says.
		p.Errors, p.Field = []FieldIssue{}, ""
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Errors == nil {
		p.Errors = []FieldIssue{}
	}
	return p, unexpected
}

func echoKind(code int) string {
	switch code {
	case http.StatusNotFound:
		return "no-route"
	case http.StatusMethodNotAllowed:
		return "method-not-allowed"
	case http.StatusUnsupportedMediaType:
		return "unsupported-media-type"
	default:
		return "http-" + fmt.Sprint(code)
	}
}

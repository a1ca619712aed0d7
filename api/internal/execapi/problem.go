package execapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/execution"
)

// problemMediaType is RFC 9457's media type for error bodies.
const problemMediaType = "application/problem+json"

// fieldIssue names one field at fault.
type fieldIssue struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// problem is the api's problem document (the same members as httpapi.Problem) with this
// package's extension members.
type problem struct {
	Type          string       `json:"type"`
	Title         string       `json:"title"`
	Status        int          `json:"status"`
	Detail        string       `json:"detail"`
	Instance      string       `json:"instance,omitempty"`
	Field         string       `json:"field,omitempty"`
	Errors        []fieldIssue `json:"errors"`
	CorrelationID string       `json:"correlation_id,omitempty"`
	// Code is the gate's stable refusal code (syntax, no_guest_agent, approval_pending, ...).
	Code string `json:"code,omitempty"`
	// ApprovalID names the pending approval a flood refusal waits on.
	ApprovalID string `json:"approval_id,omitempty"`
	// RiskClass is the class the gate computed before refusing.
	RiskClass string `json:"risk_class,omitempty"`
	// Approval is the approval as it stands, on a decision that lost (409).
	Approval *execution.Approval `json:"approval,omitempty"`
}

// toProblem maps the errors this package's handlers meet. ok is false for an unexpected
// error, which is left to the server's error handler (logged, 500).
func toProblem(err error) (problem, bool) {
	p := problem{Detail: err.Error(), Errors: []fieldIssue{}}
	var re *requestError
	var fe *execution.FieldError
	var gate *execution.RefusedError
	var ce *execution.ConflictError
	switch {
	case errors.As(err, &re):
		p.Status, p.Field, p.Detail = re.status, re.field, re.detail
		p.Type = kindOr(re.kind, "malformed-request")
	case errors.As(err, &fe):
		p.Status, p.Type, p.Title, p.Field, p.Detail = http.StatusUnprocessableEntity, "validation", "Invalid value", fe.Field, fe.Reason
	case errors.As(err, &gate):
		p.Status, p.Type, p.Title, p.Detail = http.StatusUnprocessableEntity, "execution-refused", "Refused by the gate", gate.Reason
		p.Code, p.ApprovalID, p.RiskClass = gate.Code, gate.ApprovalID, gate.RiskClass
	case errors.As(err, &ce):
		a := ce.Approval
		p.Status, p.Type, p.Title, p.Detail, p.Approval = http.StatusConflict, "already-decided", "Already decided", ce.Reason, &a
	case errors.Is(err, execution.ErrNotFound):
		p.Status, p.Type, p.Title = http.StatusNotFound, "not-found", "Not found"
	case errors.Is(err, execution.ErrForbidden):
		p.Status, p.Type, p.Title = http.StatusForbidden, "forbidden", "Forbidden"
	case errors.Is(err, auth.ErrUnauthenticated):
		p.Status, p.Type, p.Title = http.StatusUnauthorized, "unauthorized", "Unauthorized"
		p.Detail = auth.ErrUnauthenticated.Error()
	case errors.Is(err, auth.ErrForbidden):
		p.Status, p.Type, p.Title = http.StatusForbidden, "forbidden", "Forbidden"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		p.Status, p.Type, p.Detail = http.StatusServiceUnavailable, "unavailable", "the request was cancelled or timed out"
	default:
		return problem{}, false
	}
	p.Type = "urn:oikos:problem:" + p.Type
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	if p.Field != "" {
		p.Errors = []fieldIssue{{Field: p.Field, Reason: p.Detail}}
	}
	return p, true
}

func kindOr(kind, def string) string {
	if kind == "" {
		return def
	}
	return kind
}

// fail writes err as a problem document, or hands an unexpected error to the server's error
// handler.
func (h *handlers) fail(c echo.Context, err error) error {
	p, ok := toProblem(err)
	if !ok {
		return err
	}
	p.Instance = c.Request().URL.Path
	p.CorrelationID = c.Response().Header().Get(headerCorrelationID)
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="oikos"`)
	}
	c.Response().Header().Set(echo.HeaderContentType, problemMediaType)
	c.Response().WriteHeader(p.Status)
	return jsonEncode(c, p)
}

package execapi

import (
	"errors"
	"net/http"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// problemOf is the request.Mapper of the execution service's errors. A gate refusal carries
// the gate's code, the approval a flood refusal waits on and the risk class; a decision that
// lost carries the approval as it now stands. Everything else (bad requests, tokens, a
// cancelled request, internal errors) is request's base mapping.
func problemOf(err error) (request.Problem, bool) {
	p := request.Problem{Detail: err.Error()}
	var fe *execution.FieldError
	var gate *execution.RefusedError
	var ce *execution.ConflictError
	switch {
	case errors.As(err, &fe):
		p.Status, p.Type, p.Title, p.Field, p.Detail = http.StatusUnprocessableEntity, "validation", "Invalid value", fe.Field, fe.Reason
		if fe.Field != "" {
			p.Errors = []request.FieldIssue{{Field: fe.Field, Reason: fe.Reason}}
		}
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
	default:
		return request.Problem{}, false
	}
	p.Type = request.ProblemType(p.Type)
	return p, true
}

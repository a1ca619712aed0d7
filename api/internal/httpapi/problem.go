package httpapi

import (
	"errors"
	"net/http"

	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/readmodel"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// toProblem is the one place an error of this surface becomes an HTTP answer: the graph's,
// the read model's and the ontology's errors here, everything else (bad requests, tokens,
// cancelled requests, internal errors) in request's base mapping. unexpected reports a 5xx
// the server must log.
func toProblem(err error) (p request.Problem, unexpected bool) {
	return request.ToProblem(err, graphProblem)
}

// mapping is one row of the sentinel → status table.
type mapping struct {
	sentinel error
	status   int
	kind     string
	title    string
}

// sentinels maps every error the graph and read services return to a status. Order matters
// only where one error wraps several sentinels; the first match wins.
var sentinels = []mapping{
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

// graphProblem is the request.Mapper of the graph, read-model and ontology errors. A
// validation error may carry its own status (a duplicate name is a 409) over its sentinel's.
func graphProblem(err error) (request.Problem, bool) {
	var p request.Problem
	for _, m := range sentinels {
		if errors.Is(err, m.sentinel) {
			p.Status, p.Type, p.Title = m.status, request.ProblemType(m.kind), m.title
			break
		}
	}
	var ve *graph.ValidationError
	var fe *readmodel.FieldError
	if errors.As(err, &ve) {
		if p.Status == 0 {
			p.Status, p.Type = http.StatusUnprocessableEntity, request.ProblemType("validation")
		}
		if ve.Status != 0 {
			p.Status = ve.Status
		}
	}
	if p.Status == 0 && errors.As(err, &fe) {
		p.Status, p.Type = http.StatusUnprocessableEntity, request.ProblemType("validation")
	}
	if p.Status == 0 {
		return p, false
	}
	p.Detail = err.Error()
	p.Errors = request.Issues(err, fieldIssue)
	if len(p.Errors) > 0 {
		p.Field = p.Errors[0].Field
	}
	return p, true
}

// fieldIssue recognises the field-level errors of graph validation, of the ontology's
// per-attribute checks (which graph joins, one per bad attribute) and of read filters.
func fieldIssue(err error) (request.FieldIssue, bool) {
	switch x := err.(type) {
	case *graph.ValidationError:
		return request.FieldIssue{Field: x.Field, Reason: x.Reason}, true
	case *ontology.FieldError:
		return request.FieldIssue{Field: "attributes." + x.Field, Reason: x.Reason}, true
	case *readmodel.FieldError:
		return request.FieldIssue{Field: x.Field, Reason: x.Reason}, true
	}
	return request.FieldIssue{}, false
}

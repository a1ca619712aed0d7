package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/readmodel"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/ontology"
)

func TestToProblem(t *testing.T) {
	t.Parallel()
	attrErrs := errors.Join(&ontology.FieldError{Field: "vmid", Reason: "expected integer, got string"},
		&ontology.FieldError{Field: "cores", Reason: "expected integer, got boolean"})
	cases := []struct {
		name       string
		err        error
		status     int
		kind       string
		field      string
		nErrors    int
		unexpected bool
	}{
		{"unauthenticated", auth.ErrUnauthenticated, 401, "unauthorized", "", 0, false},
		{"forbidden wraps detail", fmt.Errorf("%w: role readonly", auth.ErrForbidden), 403, "forbidden", "", 0, false},
		{"graph not found", fmt.Errorf("wrap: %w", graph.ErrNotFound), 404, "not-found", "", 0, false},
		{"read not found", fmt.Errorf("%w: entity", readmodel.ErrNotFound), 404, "not-found", "", 0, false},
		{"version conflict", graph.ErrVersionConflict, 409, "version-conflict", "", 0, false},
		{"duplicate as validation error", &graph.ValidationError{Field: "name", Reason: "exists", Status: 409, Err: graph.ErrDuplicate}, 409, "duplicate", "name", 1, false},
		{"signal conflict", fmt.Errorf("%w: resolved", readmodel.ErrConflict), 409, "conflict", "", 0, false},
		{"idempotency mismatch", &graph.ValidationError{Field: "Idempotency-Key", Status: 422, Err: graph.ErrIdempotencyMismatch}, 422, "idempotency-mismatch", "Idempotency-Key", 1, false},
		{"scheduler owned", &graph.ValidationError{Field: "attributes.health", Reason: "owned", Err: graph.ErrSchedulerOwned}, 422, "scheduler-owned", "attributes.health", 1, false},
		{"ontology attributes, every field listed", attrErrs, 422, "invalid-attribute", "attributes.vmid", 2, false},
		{"unknown type", &graph.ValidationError{Field: "type", Reason: "x", Status: 422, Err: fmt.Errorf("%w: x", ontology.ErrUnknownType)}, 422, "unknown-type", "type", 1, false},
		{"validation error without sentinel", &graph.ValidationError{Field: "name", Reason: "empty"}, 422, "validation", "name", 1, false},
		{"read field error", &readmodel.FieldError{Field: "type", Reason: "unknown"}, 422, "validation", "type", 1, false},
		{"bad request", request.BadRequest("limit", "too big"), 400, "malformed-request", "limit", 1, false},
		{"body too large", &http.MaxBytesError{Limit: request.MaxBodyBytes}, 413, "payload-too-large", "", 0, false},
		{"echo 404", echo.ErrNotFound, 404, "no-route", "", 0, false},
		{"echo 405", echo.ErrMethodNotAllowed, 405, "method-not-allowed", "", 0, false},
		{"cancelled", fmt.Errorf("query: %w", context.Canceled), 503, "unavailable", "", 0, true},
		{"anything else", errors.New("connection refused"), 500, "internal", "", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, unexpected := toProblem(c.err)
			if p.Status != c.status || p.Type != request.ProblemType(c.kind) || p.Field != c.field || len(p.Errors) != c.nErrors ||
				unexpected != c.unexpected || p.Title == "" || p.Detail == "" {
				t.Errorf("toProblem(%v) = %+v (unexpected %v)", c.err, p, unexpected)
			}
			if c.status == 500 && p.Detail == c.err.Error() {
				t.Errorf("an internal error leaked its cause: %q", p.Detail)
			}
		})
	}
}

package httpapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
)

// whoAmI is GET /whoami: whom the request's token stands for.
type whoAmI struct {
	Name string    `json:"name"`
	Role auth.Role `json:"role"`
}

// whoami answers from the principal the guard verified and put on the context, so it costs
// no query beyond the token's verification (the agent checks an MCP client's bearer token
// with it on every connection).
func (s *Server) whoami(c echo.Context) error {
	p, ok := request.Principal(c)
	if !ok {
		return auth.ErrUnauthenticated
	}
	return c.JSON(http.StatusOK, whoAmI{Name: p.Name, Role: p.Role})
}

// listChecks is GET /checks: check definitions with their latest result, filtered by target
// (slug or id), kind and health.
func (s *Server) listChecks(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	f := readmodel.CheckFilter{Kinds: request.ListParam(c, "kind"), Health: request.ListParam(c, "health"),
		After: after, Limit: limit}
	if err := request.OneOf("kind", f.Kinds, readmodel.CheckKinds); err != nil {
		return err
	}
	if err := request.OneOf("health", f.Health, readmodel.CheckHealthStates); err != nil {
		return err
	}
	if ref := c.QueryParam("target"); ref != "" {
		t, err := s.reader.ResolveEntity(c.Request().Context(), ref)
		if errors.Is(err, apierr.ErrNotFound) {
			return &apierr.FieldError{Field: "target", Reason: err.Error(), Err: err}
		}
		if err != nil {
			return err
		}
		f.TargetID = t.ID
	}
	p, err := s.reader.ListChecks(c.Request().Context(), f)
	return answerPage(c, p, err)
}

// Package secretsapi is the HTTP surface of the stored secrets (under /api/v1/secrets):
// list names, set a value, remove. Only an operator's token may set or remove one (a secret
// is a credential the daemons will send on the operator's behalf); any token may list names,
// which reveal nothing. No answer ever carries a value.
package secretsapi

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/secretstore"
)

// API is the secrets surface.
type API struct{ s *secretstore.Service }

// New builds the surface on the service.
func New(s *secretstore.Service) *API { return &API{s: s} }

// Routes is the secrets routes (under /api/v1).
func (a *API) Routes() []request.Route {
	return []request.Route{
		request.GET("/secrets", auth.PermRead, a.list),
		request.PUT("/secrets/:name", auth.PermWrite, operator(a.set)),
		request.DELETE("/secrets/:name", auth.PermWrite, operator(a.remove)),
	}
}

// operator admits only an operator's token: auth.PermWrite also admits the agent's, and no
// agent sets the credentials the daemons send.
func operator(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p, _ := request.Principal(c); p.Role != auth.RoleOperator {
			return fmt.Errorf("%w: role %s may not change secrets: only an operator's token may", auth.ErrForbidden, p.Role)
		}
		return h(c)
	}
}

func meta(c echo.Context) secretstore.Meta {
	m := request.MetaOf(c)
	return secretstore.Meta{Actor: m.Actor, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
}

func (a *API) list(c echo.Context) error {
	items, err := a.s.List(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(items, ""))
}

// setInput is the body of a PUT: the value, sent once and never shown again.
type setInput struct {
	Value string `json:"value"`
}

func (a *API) set(c echo.Context) error {
	name, err := request.Param(c, "name")
	if err != nil {
		return err
	}
	var in setInput
	if err := request.DecodeJSON(c, &in); err != nil {
		return err
	}
	info, created, err := a.s.Set(c.Request().Context(), meta(c), name, in.Value)
	if err != nil {
		return err
	}
	if created {
		return c.JSON(http.StatusCreated, info)
	}
	return c.JSON(http.StatusOK, info)
}

func (a *API) remove(c echo.Context) error {
	name, err := request.Param(c, "name")
	if err != nil {
		return err
	}
	if _, err := a.s.Remove(c.Request().Context(), meta(c), name); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

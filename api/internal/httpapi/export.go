package httpapi

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/export"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// exportFleet answers GET /export: the fleet as an inventory file (api/internal/export),
// of the types asked for (type=, repeated or comma-separated; subtypes included).
func (s *Server) exportFleet(c echo.Context) error {
	if s.deps.Pool == nil {
		return request.Unavailable("the export needs the database")
	}
	b, err := export.Write(c.Request().Context(), s.deps.Pool, s.ontology(), request.ListParam(c, "type"))
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Disposition", `inline; filename="fleet.yaml"`)
	return c.Blob(http.StatusOK, "application/yaml", b)
}

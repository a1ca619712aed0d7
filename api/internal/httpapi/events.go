package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/readmodel"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// idCursor parses a cursor that holds an event or audit id.
func idCursor(after string) (int64, error) {
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil || n < 1 {
		return 0, request.BadRequest("cursor", "malformed cursor")
	}
	return n, nil
}

// listEvents is the outbox read oldest first from since (exclusive): how a client catches up.
func (s *Server) listEvents(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	cur, err := idCursor(after)
	if err != nil {
		return err
	}
	since, err := request.IntParam(c, "since", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	f := readmodel.EventFilter{Types: readmodel.NewTypeMatcher(request.ListParam(c, "types")), After: max(since, cur), Limit: limit}
	if ref := c.QueryParam("entity"); ref != "" {
		if f.EntityID, err = s.reader.ResolveID(c.Request().Context(), ref); err != nil {
			return err
		}
	}
	p, err := s.reader.Events(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(p.Items, p.Next))
}

// entityEvents is an entity's timeline, newest first.
func (s *Server) entityEvents(c echo.Context) error {
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	before, err := idCursor(after)
	if err != nil {
		return err
	}
	id, err := s.reader.ResolveID(c.Request().Context(), ref)
	if err != nil {
		return err
	}
	p, err := s.reader.Events(c.Request().Context(), readmodel.EventFilter{EntityID: id, Newest: true, Before: before,
		Types: readmodel.NewTypeMatcher(request.ListParam(c, "types")), Limit: limit})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(p.Items, p.Next))
}

// listAudit is the change log, newest first, optionally for one entity.
func (s *Server) listAudit(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	before, err := idCursor(after)
	if err != nil {
		return err
	}
	f := readmodel.AuditFilter{Actor: c.QueryParam("actor"), Action: c.QueryParam("action"),
		CorrelationID: c.QueryParam("correlation_id"), Before: before, Limit: limit}
	if ref := c.QueryParam("entity"); ref != "" {
		if f.EntityID, err = s.reader.ResolveID(c.Request().Context(), ref); err != nil {
			return err
		}
	}
	p, err := s.reader.Audit(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(p.Items, p.Next))
}

// graphAudit runs the read-only structural audit (G11).
func (s *Server) graphAudit(c echo.Context) error {
	var stuck time.Duration
	if v := c.QueryParam("stuck_after"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return request.BadRequest("stuck_after", "must be a positive duration such as 24h or 90m")
		}
		stuck = d
	}
	rep, err := s.reader.GraphAudit(c.Request().Context(), s.deps.Pool, stuck)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

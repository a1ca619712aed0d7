package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
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

// listEvents is the outbox read oldest first from since: after an event id (exclusive), how
// a client catches up, or from a point in time (a duration back from now such as 7d, or an
// RFC 3339 time; inclusive).
func (s *Server) listEvents(c echo.Context) error {
	limit, cur, err := idPage(c)
	if err != nil {
		return err
	}
	f := readmodel.EventFilter{Types: readmodel.NewTypeMatcher(request.ListParam(c, "types")), After: cur, Limit: limit}
	if v := c.QueryParam("since"); v != "" && strings.Trim(v, "0123456789") == "" {
		since, err := request.IntParam(c, "since", 0, 0, math.MaxInt64)
		if err != nil {
			return err
		}
		f.After = max(since, cur)
	} else if f.Since, _, err = request.SinceParam(c, "since", time.Now()); err != nil {
		return err
	}
	if f.EntityID, err = s.entityParam(c); err != nil {
		return err
	}
	p, err := s.reader.Events(c.Request().Context(), f)
	return answerPage(c, p, err)
}

// entityEvents is an entity's timeline, newest first.
func (s *Server) entityEvents(c echo.Context) error {
	ref, limit, after, err := refPage(c)
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
	return answerPage(c, p, err)
}

// listAudit is the change log, newest first, optionally for one entity.
func (s *Server) listAudit(c echo.Context) error {
	limit, before, err := idPage(c)
	if err != nil {
		return err
	}
	f := readmodel.AuditFilter{Actor: c.QueryParam("actor"), Action: c.QueryParam("action"),
		CorrelationID: c.QueryParam("correlation_id"), Before: before, Limit: limit}
	if f.EntityID, err = s.entityParam(c); err != nil {
		return err
	}
	p, err := s.reader.Audit(c.Request().Context(), f)
	return answerPage(c, p, err)
}

// graphAudit runs the read-only structural audit (G11).
func (s *Server) graphAudit(c echo.Context) error {
	// 0: the report's default (24 h).
	stuck, err := request.DurationParam(c, "stuck_after", 0)
	if err != nil {
		return err
	}
	rep, err := s.reader.GraphAudit(c.Request().Context(), stuck)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rep)
}

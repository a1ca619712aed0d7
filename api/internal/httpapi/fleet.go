package httpapi

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/readmodel"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// healthSummary is the fleet rollup (G10): counts per health state and the entities in the
// requested states (health=down,stale), without check entities or destroyed ones.
func (s *Server) healthSummary(c echo.Context) error {
	health := request.ListParam(c, "health")
	if err := request.OneOf("health", health, readmodel.HealthStates); err != nil {
		return err
	}
	sum, err := s.reader.HealthSummary(c.Request().Context(), health)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, sum)
}

func (s *Server) ontologyTypes(c echo.Context) error {
	return c.JSON(http.StatusOK, request.ListOf(s.ontology().Types(), ""))
}

func (s *Server) ontologyRelationshipTypes(c echo.Context) error {
	return c.JSON(http.StatusOK, request.ListOf(s.ontology().RelationshipTypes(), ""))
}

func (s *Server) listSignals(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	if after != "" && !readmodel.IsUUID(after) {
		return request.BadRequest("cursor", "malformed cursor")
	}
	f := readmodel.SignalFilter{Statuses: request.ListParam(c, "status"), Kind: c.QueryParam("kind"), After: after, Limit: limit}
	if err := request.OneOf("status", f.Statuses, readmodel.SignalStatuses); err != nil {
		return err
	}
	if ref := c.QueryParam("entity"); ref != "" {
		if f.EntityID, err = s.reader.ResolveID(c.Request().Context(), ref); err != nil {
			return err
		}
	}
	p, err := s.reader.ListSignals(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(p.Items, p.Next))
}

// muteBody is the body of POST /signals/{id}/mute.
type muteBody struct {
	Until string `json:"until"`
}

// decideSignal records an operator's (or agent's) decision on a signal raised by the
// scheduler. ack and resolve take no body; mute takes {"until": RFC 3339 time}.
func (s *Server) decideSignal(what string) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, err := request.Param(c, "id")
		if err != nil {
			return err
		}
		var until *time.Time
		if what == readmodel.DecisionMute {
			var b muteBody
			if err := request.DecodeJSON(c, &b); err != nil {
				return err
			}
			t, err := time.Parse(time.RFC3339, b.Until)
			if err != nil {
				return request.Unprocessable("until", "until is required: the RFC 3339 time the mute ends, e.g. 2030-01-02T15:04:05Z")
			}
			until = &t
		}
		m := meta(c)
		sig, err := readmodel.DecideSignal(c.Request().Context(), s.deps.Pool, id, what, until,
			readmodel.Actor{Name: m.Actor, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID})
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, sig)
	}
}

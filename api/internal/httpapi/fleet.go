package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/signals"
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
	if after != "" && !ids.IsUUID(after) {
		return request.BadRequest("cursor", "malformed cursor")
	}
	f := readmodel.SignalFilter{Statuses: request.ListParam(c, "status"), Kind: c.QueryParam("kind"), After: after, Limit: limit}
	if err := request.OneOf("status", f.Statuses, readmodel.SignalStatuses); err != nil {
		return err
	}
	if f.EntityID, err = s.entityParam(c); err != nil {
		return err
	}
	p, err := s.reader.ListSignals(c.Request().Context(), f)
	return answerPage(c, p, err)
}

// listIncidents answers GET /incidents: unresolved first, with affected counts.
func (s *Server) listIncidents(c echo.Context) error {
	limit, _, err := request.Page(c)
	if err != nil {
		return err
	}
	f := readmodel.IncidentFilter{Status: c.QueryParam("status"), Limit: limit}
	if f.Status == "all" {
		f.Status = ""
	}
	if err := request.OneOf("status", []string{f.Status}, []string{"", "open", "resolved"}); err != nil {
		return err
	}
	if f.EntityID, err = s.entityParam(c); err != nil {
		return err
	}
	items, err := s.reader.ListIncidents(c.Request().Context(), f)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// getIncident answers GET /incidents/{id} with the entities affected.
func (s *Server) getIncident(c echo.Context) error {
	id, err := request.Param(c, "id")
	if err != nil {
		return err
	}
	if !ids.IsUUID(id) {
		return fmt.Errorf("%w: incident %q", apierr.ErrNotFound, id)
	}
	in, err := s.reader.GetIncident(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, in)
}

// ackBody is the optional body of POST /signals/{id}/ack.
type ackBody struct {
	Note string `json:"note"`
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
		note := ""
		if what == signals.DecisionAck && c.Request().ContentLength != 0 {
			var b ackBody
			if err := request.DecodeJSON(c, &b); err != nil {
				return err
			}
			if len(b.Note) > 2000 {
				return request.Unprocessable("note", "an acknowledgement note is at most 2000 characters")
			}
			note = strings.TrimSpace(b.Note)
		}
		if what == signals.DecisionMute {
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
		sig, err := signals.Decide(c.Request().Context(), s.deps.Pool, id, what, until,
			signals.By{Name: m.Actor, Note: note, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID})
		if err != nil {
			return signalError(err)
		}
		return c.JSON(http.StatusOK, sig)
	}
}

// signalError makes shared/signals' errors the api's (apierr), message unchanged, so they
// answer as every other missing thing, conflict or invalid field does.
func signalError(err error) error {
	var fe *signals.FieldError
	switch {
	case errors.As(err, &fe):
		return &apierr.FieldError{Field: fe.Field, Reason: fe.Reason}
	case errors.Is(err, signals.ErrNotFound):
		return apierr.Mark(err, apierr.ErrNotFound)
	case errors.Is(err, signals.ErrConflict):
		return apierr.Mark(err, apierr.ErrConflict)
	}
	return err
}

// listSchedulers answers GET /schedulers: the schedulers sharing the fleet and their leases.
func (s *Server) listSchedulers(c echo.Context) error {
	out, err := s.reader.Schedulers(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

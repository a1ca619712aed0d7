package httpapi

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/discover"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// Problem kinds of a discovery whose executions did not give an answer.
const (
	kindDiscoveryFailed  = "discovery-failed"
	kindGuestNotRunning  = "guest-not-running"
	kindDiscoveryTimeout = "discovery-timeout"
)

// discoverServices answers POST /entities/{ref}/discover/services: two read-only executions
// on the machine or guest through the gate, waited for up to ?timeout= (default 60s), and
// the service entities they suggest (api/internal/discover). A discovery whose executions
// failed is a 502, one that did not finish in time a 504.
func (s *Server) discoverServices(c echo.Context) error {
	if s.deps.Discover == nil {
		return request.Unavailable("service discovery is not configured on this api")
	}
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	timeout, err := request.DurationParam(c, "timeout", discover.DefaultTimeout)
	if err != nil {
		return err
	}
	if timeout < discover.MinTimeout || timeout > discover.MaxTimeout {
		return request.BadRequest("timeout", "must be from %s to %s", discover.MinTimeout, discover.MaxTimeout)
	}
	d, err := s.deps.Discover.Propose(c.Request().Context(), meta(c), ref, timeout)
	var f *discover.Failure
	if errors.As(err, &f) {
		switch f.Code {
		case discover.CodeTimeout:
			return request.Errorf(http.StatusGatewayTimeout, kindDiscoveryTimeout, "", "%s", f.Reason)
		case discover.CodeGuestNotRunning:
			return request.Errorf(http.StatusBadGateway, kindGuestNotRunning, "", "%s", f.Reason)
		}
		return request.Errorf(http.StatusBadGateway, kindDiscoveryFailed, "", "%s", f.Reason)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// acceptServices answers POST /entities/{ref}/services: the services of the body created on
// the machine or guest, each with its runs-on edge, in one transaction; those already there
// are skipped. 201 when something was created, 200 when everything was skipped.
func (s *Server) acceptServices(c echo.Context) error {
	if s.deps.Discover == nil {
		return request.Unavailable("service discovery is not configured on this api")
	}
	ref, err := request.Param(c, "ref")
	if err != nil {
		return err
	}
	var b discover.AcceptRequest
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	a, err := s.deps.Discover.Accept(c.Request().Context(), meta(c), ref, b)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if len(a.Created) > 0 {
		status = http.StatusCreated
	}
	return c.JSON(status, a)
}

// Package notifyapi is the HTTP surface of notifications (under /api/v1): channels, rules,
// deliveries and test sends. It checks the caller's role and hands everything else to the
// notify service.
package notifyapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyrender"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/ids"
)

// Deps are what the HTTP surface needs.
type Deps struct {
	Service *notify.Service
	// Sender sends test messages (default: a Transport).
	Sender notifytarget.Sender
	// PublicURL is where the dashboard is, for the test message's link.
	PublicURL string
	Logger    zerolog.Logger
	// Woken is called after a change that may make deliveries due (a channel enabled).
	Woken func()
}

// API is the notifications surface.
type API struct {
	d   Deps
	log zerolog.Logger
}

// New builds the surface.
func New(d Deps) *API {
	if d.Service == nil {
		panic("notifyapi: New needs the service")
	}
	if d.Sender == nil {
		d.Sender = &notifytarget.Transport{Logger: d.Logger}
	}
	return &API{d: d, log: d.Logger.With().Str("component", "notify").Logger()}
}

// Routes is the notification routes (under /api/v1). Anyone may read; only an operator may
// change a channel or a rule or send a test: a channel carries credentials, receives what
// the api knows, and makes the api dial where it points.
func (a *API) Routes() []request.Route {
	r, w := auth.PermRead, auth.PermWrite
	return []request.Route{
		request.GET("/notifications/channels", r, a.listChannels),
		request.POST("/notifications/channels", w, operator(a.createChannel)),
		request.GET("/notifications/channels/:id", r, a.getChannel),
		request.PATCH("/notifications/channels/:id", w, operator(a.updateChannel)),
		request.DELETE("/notifications/channels/:id", w, operator(a.deleteChannel)),
		request.POST("/notifications/channels/:id/test", w, operator(a.testChannel)),
		request.GET("/notifications/rules", r, a.listRules),
		request.POST("/notifications/rules", w, operator(a.createRule)),
		request.DELETE("/notifications/rules/:id", w, operator(a.deleteRule)),
		request.GET("/notifications/deliveries", r, a.listDeliveries),
		request.POST("/notifications/test", w, operator(a.test)),
	}
}

// operator admits only an operator's token: auth.PermWrite also admits the agent's, and no
// agent configures where the api sends what it knows.
func operator(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if p, _ := request.Principal(c); p.Role != auth.RoleOperator {
			return fmt.Errorf("%w: role %s may not configure notifications: only an operator's token may "+
				"(a channel carries credentials and receives what the api knows)", auth.ErrForbidden, p.Role)
		}
		return h(c)
	}
}

func meta(c echo.Context) notify.Meta {
	m := request.MetaOf(c)
	return notify.Meta{Actor: m.Actor, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID}
}

func (a *API) listChannels(c echo.Context) error {
	chs, err := a.d.Service.Channels(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(chs, ""))
}

func (a *API) getChannel(c echo.Context) error {
	id, err := request.Param(c, "id")
	if err != nil {
		return err
	}
	ch, err := a.d.Service.Channel(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ch)
}

func (a *API) createChannel(c echo.Context) error {
	var in notify.ChannelInput
	if err := request.DecodeJSON(c, &in); err != nil {
		return err
	}
	ch, err := a.d.Service.CreateChannel(c.Request().Context(), meta(c), in)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderLocation, "/api/v1/notifications/channels/"+ch.ID)
	return c.JSON(http.StatusCreated, ch)
}

func (a *API) updateChannel(c echo.Context) error {
	id, err := request.Param(c, "id")
	if err != nil {
		return err
	}
	var p notify.ChannelPatch
	if err := request.DecodeJSON(c, &p); err != nil {
		return err
	}
	ch, err := a.d.Service.UpdateChannel(c.Request().Context(), meta(c), id, p)
	if err != nil {
		return err
	}
	if a.d.Woken != nil {
		a.d.Woken()
	}
	return c.JSON(http.StatusOK, ch)
}

func (a *API) deleteChannel(c echo.Context) error {
	id, err := request.Param(c, "id")
	if err != nil {
		return err
	}
	if _, err := a.d.Service.DeleteChannel(c.Request().Context(), meta(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// TestResult is the answer to a test send that was delivered.
type TestResult struct {
	OK         bool `json:"ok"`
	StatusCode *int `json:"status_code,omitempty"`
}

// send delivers a test message now and answers it; a failure is a 502 whose detail is the
// redacted error. Nothing is stored.
func (a *API) send(c echo.Context, t notifytarget.Target, channel string) error {
	n := notifyrender.TestNotification(a.d.PublicURL, channel)
	id := "test:" + request.CorrelationID(c)
	code, err := a.d.Sender.Send(c.Request().Context(), t, notifytarget.Message{ID: id, Kind: n.Kind, Severity: n.Severity,
		Title: n.Title, Body: n.Body, Link: n.Link, Event: notifytarget.EventRef{Type: notify.KindTest}, Payload: []byte(`{}`)})
	if err != nil {
		if c.Request().Context().Err() != nil {
			return context.Cause(c.Request().Context())
		}
		msg := notifytarget.RedactError(err, t.URL, t.Secret)
		a.log.Info().Str("url", notifytarget.RedactURL(t.URL)).Str("error", msg).Str("channel", channel).Msg("test notification not delivered")
		return request.Errorf(http.StatusBadGateway, "notification-failed", "", "the test notification was not delivered: %s", msg)
	}
	res := TestResult{OK: true}
	if code != 0 {
		res.StatusCode = &code
	}
	return c.JSON(http.StatusOK, res)
}

func (a *API) testChannel(c echo.Context) error {
	id, err := request.Param(c, "id")
	if err != nil {
		return err
	}
	ch, t, err := a.d.Service.Target(c.Request().Context(), id)
	if err != nil {
		if ch.ID == "" {
			return err
		}
		return request.Errorf(http.StatusBadGateway, "notification-failed", "", "the test notification was not delivered: %s",
			notifytarget.RedactError(err))
	}
	return a.send(c, t, ch.Name)
}

func (a *API) test(c echo.Context) error {
	var in notify.TestInput
	if err := request.DecodeJSON(c, &in); err != nil {
		return err
	}
	t, err := a.d.Service.CheckTarget(c.Request().Context(), in)
	if err != nil {
		return err
	}
	return a.send(c, t, "")
}

func (a *API) listRules(c echo.Context) error {
	rules, err := a.d.Service.Rules(c.Request().Context(), strings.TrimSpace(c.QueryParam("channel")))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(rules, ""))
}

func (a *API) createRule(c echo.Context) error {
	var in notify.RuleInput
	if err := request.DecodeJSON(c, &in); err != nil {
		return err
	}
	r, err := a.d.Service.CreateRule(c.Request().Context(), meta(c), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

func (a *API) deleteRule(c echo.Context) error {
	id, err := request.Param(c, "id")
	if err != nil {
		return err
	}
	if _, err := a.d.Service.DeleteRule(c.Request().Context(), meta(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) listDeliveries(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	if after != "" && !ids.IsUUID(after) {
		return request.BadRequest("cursor", "malformed cursor; pass next_cursor from the previous page unchanged")
	}
	statuses := request.ListParam(c, "status")
	if err := request.OneOf("status", statuses, notify.Statuses); err != nil {
		return err
	}
	items, next, err := a.d.Service.Deliveries(c.Request().Context(), notify.DeliveryFilter{
		Channel: strings.TrimSpace(c.QueryParam("channel")), Statuses: statuses, Limit: limit, After: after})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(items, next))
}

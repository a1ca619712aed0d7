// Package execapi is the HTTP surface of the gated execution path: requesting executions
// (a shell command or a typed action), reading them and their output (as JSON and as an SSE
// tail), listing approvals and deciding them. The handlers are thin: every rule lives in
// api/internal/execution, and every request it answers is one transaction there.
//
// Errors are RFC 9457 problem documents of the same shape as the rest of the api (rendered by
// api/internal/request, this package mapping only the execution service's errors), with a few
// extension members where a client needs them: `code` and `approval_id` on a gate refusal
// (a flood refusal names the approval it waits on), `approval` on a lost decision.
package execapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Deps are what the handlers need; the composition root builds them.
type Deps struct {
	Service *execution.Service
	// Auth verifies bearer tokens and says what each role may do; used through
	// request.Guard when Guard is nil.
	Auth *auth.Store
	// Guard, when given, is the server's token guard (the one Mounts receive), so a request
	// is verified the same way and once on every route of the api.
	Guard func(auth.Permission) echo.MiddlewareFunc
	// Notifier, when given, wakes log streams as soon as a chunk or a status change is
	// written; Register adds its handlers, so call it before the notifier starts. Without
	// it streams poll (every StreamPoll).
	Notifier *eventbus.Notifier
	Logger   zerolog.Logger
	// StreamPoll is how often a log stream re-reads without a wake-up (default 1 s without a
	// notifier, 5 s with one, as a safety net).
	StreamPoll time.Duration
	// Heartbeat is the interval of a log stream's keep-alive comments (default 15 s).
	Heartbeat time.Duration
}

type handlers struct {
	d   Deps
	hub *logHub
	log zerolog.Logger
}

// Register adds the execution and approval routes to g (mounted at /api/v1).
func Register(g *echo.Group, d Deps) {
	if d.Service == nil || (d.Auth == nil && d.Guard == nil) {
		panic("execapi: Register needs the execution service and the token store or a guard")
	}
	if d.Guard == nil {
		store := d.Auth
		d.Guard = func(perm auth.Permission) echo.MiddlewareFunc { return request.Guard(store, perm) }
	}
	if d.StreamPoll <= 0 {
		d.StreamPoll = time.Second
		if d.Notifier != nil {
			d.StreamPoll = 5 * time.Second
		}
	}
	if d.Heartbeat <= 0 {
		d.Heartbeat = 15 * time.Second
	}
	h := &handlers{d: d, hub: newLogHub(), log: d.Logger.With().Str("component", "execapi").Logger()}
	if d.Notifier != nil {
		h.hub.listen(d.Notifier)
	}
	// Catch comes first on every route so that any error, the guard's included, is rendered
	// with this package's mapping (its problems keep their extension members), on the api's
	// server and on a bare echo alike.
	catch := request.Catch(h.log, problemOf)
	r, w, decide := d.Guard(auth.PermRead), d.Guard(auth.PermWrite), d.Guard(auth.PermDecide)
	g.POST("/executions", h.requestRun, catch, w)
	g.POST("/executions/actions", h.requestAction, catch, w)
	g.GET("/executions", h.list, catch, r)
	g.GET("/executions/:id", h.get, catch, r)
	g.GET("/executions/:id/logs", h.logs, catch, r)
	g.GET("/executions/:id/logs/stream", h.stream, catch, r)
	g.GET("/approvals", h.listApprovals, catch, r)
	g.GET("/approvals/:id", h.getApproval, catch, r)
	// Only an operator's token decides (auth.PermDecide): an agent's relay of an operator's
	// chat message cannot be proved yet. The decide guard comes first so that its refusal,
	// which says so, is what an agent or readonly token gets; the route is a write as well;
	// and the service refuses any role but operator on its own.
	g.POST("/approvals/:id/decision", h.decide, catch, decide, w)
}

func meta(c echo.Context) execution.Meta {
	m := request.MetaOf(c)
	return execution.Meta{Actor: m.Actor, Role: m.Role, Method: m.Method, Path: m.Path}
}

// runBody is POST /executions.
type runBody struct {
	Target         string `json:"target"`
	Command        string `json:"command"`
	Purpose        string `json:"purpose"`
	DeclaredRisk   string `json:"declared_risk"`
	SessionID      string `json:"session_id"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// actionBody is POST /executions/actions.
type actionBody struct {
	Action         string          `json:"action"`
	Target         string          `json:"target"`
	Params         json.RawMessage `json:"params"`
	Purpose        string          `json:"purpose"`
	DeclaredRisk   string          `json:"declared_risk"`
	SessionID      string          `json:"session_id"`
	TimeoutSeconds int             `json:"timeout_seconds"`
}

func (h *handlers) requestRun(c echo.Context) error {
	var b runBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	return h.request(c, execution.Request{Target: b.Target, Action: execution.ActionRun, Command: b.Command,
		Purpose: b.Purpose, DeclaredRisk: b.DeclaredRisk, SessionID: b.SessionID, TimeoutSeconds: b.TimeoutSeconds})
}

func (h *handlers) requestAction(c echo.Context) error {
	var b actionBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if strings.TrimSpace(b.Action) == "" {
		return &execution.FieldError{Field: "action", Reason: "is required (one of " + strings.Join(execution.TypedActions(), ", ") + ")"}
	}
	return h.request(c, execution.Request{Target: b.Target, Action: b.Action, Params: b.Params,
		Purpose: b.Purpose, DeclaredRisk: b.DeclaredRisk, SessionID: b.SessionID, TimeoutSeconds: b.TimeoutSeconds})
}

func (h *handlers) request(c echo.Context, r execution.Request) error {
	e, err := h.d.Service.Request(c.Request().Context(), meta(c), r)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if e.AlreadyQueued {
		status = http.StatusOK
	} else {
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/executions/"+e.ID)
	}
	return c.JSON(status, e)
}

func (h *handlers) list(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	p, err := h.d.Service.List(c.Request().Context(), execution.ListFilter{
		Target: c.QueryParam("target"), Actions: request.ListParam(c, "action"), Statuses: request.ListParam(c, "status"),
		CorrelationID: c.QueryParam("correlation_id"), SessionID: c.QueryParam("session_id"), After: after, Limit: limit})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(p.Items, p.Next))
}

// maxSeq is the largest chunk seq a client may resume after (seq is a Postgres integer).
const maxSeq = 1<<31 - 1

// pathID is the :id path parameter, unescaped where it can be; one that cannot is passed on
// as sent, so it answers 404 like any other unknown id.
func pathID(c echo.Context) string {
	v, err := url.PathUnescape(c.Param("id"))
	if err != nil {
		return c.Param("id")
	}
	return v
}

func (h *handlers) get(c echo.Context) error {
	e, err := h.d.Service.Get(c.Request().Context(), pathID(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

func (h *handlers) logs(c echo.Context) error {
	after, err := request.IntParam(c, "after", 0, 0, maxSeq)
	if err != nil {
		return err
	}
	limit, err := request.IntParam(c, "limit", 1000, 1, 1000)
	if err != nil {
		return err
	}
	l, err := h.d.Service.Logs(c.Request().Context(), pathID(c), int(after), int(limit))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (h *handlers) listApprovals(c echo.Context) error {
	limit, after, err := request.Page(c)
	if err != nil {
		return err
	}
	p, err := h.d.Service.ListApprovals(c.Request().Context(), execution.ApprovalFilter{
		Statuses: request.ListParam(c, "status"), SessionID: c.QueryParam("session_id"), After: after, Limit: limit})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, request.ListOf(p.Items, p.Next))
}

func (h *handlers) getApproval(c echo.Context) error {
	a, err := h.d.Service.GetApproval(c.Request().Context(), pathID(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (h *handlers) decide(c echo.Context) error {
	var d execution.Decision
	if err := request.DecodeJSON(c, &d); err != nil {
		return err
	}
	res, err := h.d.Service.Decide(c.Request().Context(), meta(c), pathID(c), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

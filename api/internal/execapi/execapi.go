// Package execapi is the HTTP surface of the gated execution path: requesting executions
// (a shell command or a typed action), reading them and their output (as JSON and as an SSE
// tail), listing approvals and deciding them (an agent's token only relaying an operator's
// chat message the api proves), assenting to a session's plan, and classifying a command as
// the gate would without asking to run it (POST /classify, which writes nothing). The
// handlers are thin: every rule lives in api/internal/execution, and every request it answers
// is one transaction there.
//
// The routes are a request.Route table (Routes), mounted like every other surface's. Errors
// are RFC 9457 problem documents of the same shape as the rest of the api, rendered by
// api/internal/request from the execution service's errors, which are the api's (apierr);
// a few carry extension members where a client needs them: `code` and `approval_id` on a
// gate refusal (a flood refusal names the approval it waits on), `approval` on a lost
// decision.
package execapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/decision"
	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Deps are what the handlers need; the composition root builds them.
type Deps struct {
	Service *execution.Service
	// Decisions decides approvals and records assents to plans.
	Decisions *decision.Service
	// Auth verifies bearer tokens for Register (the api's server mounts Routes behind its
	// own guard instead).
	Auth *auth.Store
	// Notifier, when given, wakes log streams as soon as a chunk or a status change is
	// written; New adds its handlers, so call it before the notifier starts. Without
	// it streams poll (every StreamPoll).
	Notifier *eventbus.Notifier
	Logger   zerolog.Logger
	// StreamPoll is how often a log stream re-reads without a wake-up (default 1 s without a
	// notifier, 5 s with one, as a safety net).
	StreamPoll time.Duration
	// Heartbeat is the interval of a log stream's keep-alive comments (default 15 s).
	Heartbeat time.Duration
}

// API is the execution surface: its route table and the log streams' wake-ups.
type API struct {
	d   Deps
	hub *logHub
	log zerolog.Logger
}

// New builds the surface; with a Notifier it registers its handlers on it, so call it
// before the notifier starts.
func New(d Deps) *API {
	if d.Service == nil || d.Decisions == nil {
		panic("execapi: New needs the execution service and the decision service")
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
	a := &API{d: d, hub: newLogHub(), log: d.Logger.With().Str("component", "execapi").Logger()}
	if d.Notifier != nil {
		a.hub.listen(d.Notifier)
	}
	return a
}

// Routes is the execution and approval routes (under /api/v1). The execution service's
// errors are the api's already; request renders them.
func (a *API) Routes() []request.Route {
	r, w := auth.PermRead, auth.PermWrite
	return []request.Route{
		request.POST("/executions", w, a.requestRun),
		request.POST("/executions/actions", w, a.requestAction),
		request.GET("/executions", r, a.list),
		// Classification writes nothing, so any token may ask (readonly included).
		request.POST("/classify", r, a.classify),
		request.GET("/executions/:id", r, a.get),
		request.GET("/executions/:id/logs", r, a.logs),
		request.GET("/executions/:id/logs/stream", r, a.stream),
		request.GET("/approvals", r, a.listApprovals),
		request.GET("/approvals/:id", r, a.getApproval),
		// auth.PermDecide: an operator decides; an agent's token only approves by relaying an
		// operator's chat message the api recorded, which the service proves (or refuses, with
		// an audit row) before anything changes; a readonly token is refused by the guard.
		request.POST("/approvals/:id/decision", auth.PermDecide, a.decide),
		// An assent to a session's plan, proved from the operator's chat message the same way;
		// it opens the session's assent window.
		request.POST("/sessions/:id/assent", auth.PermDecide, a.assentToPlan),
	}
}

// Register mounts Routes on g (mounted at /api/v1) behind a guard over d.Auth, as the api's
// server mounts them behind its own: for a standalone surface (the CLI's tests).
func Register(g *echo.Group, d Deps) {
	if d.Auth == nil {
		panic("execapi: Register needs the token store")
	}
	a := New(d)
	request.Mount(g, d.Auth, a.log, a.Routes()...)
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

func (h *API) requestRun(c echo.Context) error {
	var b runBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	return h.request(c, execution.Request{Target: b.Target, Action: execution.ActionRun, Command: b.Command,
		Purpose: b.Purpose, DeclaredRisk: b.DeclaredRisk, SessionID: b.SessionID, TimeoutSeconds: b.TimeoutSeconds})
}

func (h *API) requestAction(c echo.Context) error {
	var b actionBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	if strings.TrimSpace(b.Action) == "" {
		return apierr.Invalid("action", "is required (one of %s)", strings.Join(execution.TypedActions(), ", "))
	}
	return h.request(c, execution.Request{Target: b.Target, Action: b.Action, Params: b.Params,
		Purpose: b.Purpose, DeclaredRisk: b.DeclaredRisk, SessionID: b.SessionID, TimeoutSeconds: b.TimeoutSeconds})
}

func (h *API) request(c echo.Context, r execution.Request) error {
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

// classifyBody is POST /classify.
type classifyBody struct {
	Command      string `json:"command"`
	Target       string `json:"target"`
	DeclaredRisk string `json:"declared_risk"`
}

// classify answers what the gate would decide for a command on a target (risk class,
// reasons, whether it would wait for an approval) through the gate's own code, writing
// nothing. An unknown target is a 404 naming the field.
func (h *API) classify(c echo.Context) error {
	var b classifyBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	cl, err := h.d.Service.Classify(c.Request().Context(), execution.ClassifyRequest{
		Command: b.Command, Target: b.Target, DeclaredRisk: b.DeclaredRisk})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, cl)
}

func (h *API) list(c echo.Context) error {
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

func (h *API) get(c echo.Context) error {
	e, err := h.d.Service.Get(c.Request().Context(), pathID(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

func (h *API) logs(c echo.Context) error {
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

func (h *API) listApprovals(c echo.Context) error {
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

func (h *API) getApproval(c echo.Context) error {
	a, err := h.d.Service.GetApproval(c.Request().Context(), pathID(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

func (h *API) decide(c echo.Context) error {
	var d execution.Decision
	if err := request.DecodeJSON(c, &d); err != nil {
		return err
	}
	res, err := h.d.Decisions.Decide(c.Request().Context(), meta(c), pathID(c), d)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

// assentBody is POST /sessions/{id}/assent.
type assentBody struct {
	MessageID string `json:"message_id"`
}

func (h *API) assentToPlan(c echo.Context) error {
	var b assentBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	res, err := h.d.Decisions.AssentToPlan(c.Request().Context(), meta(c), pathID(c), b.MessageID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

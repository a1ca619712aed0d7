// Package execapi is the HTTP surface of the gated execution path: requesting executions
// (a shell command or a typed action), reading them and their output (as JSON and as an SSE
// tail), listing approvals and deciding them. The handlers are thin: every rule lives in
// api/internal/execution, and every request it answers is one transaction there.
//
// Errors are RFC 9457 problem documents of the same shape as the rest of the api, with a few
// extension members where a client needs them: `code` and `approval_id` on a gate refusal
// (a flood refusal names the approval it waits on), `approval` on a lost decision.
package execapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Deps are what the handlers need; the composition root builds them.
type Deps struct {
	Service *execution.Service
	// Auth verifies bearer tokens and says what each role may do.
	Auth *auth.Store
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

// headerCorrelationID is the api's correlation header; the api's middleware sets it on the
// response and problems repeat it.
const headerCorrelationID = "X-Correlation-ID"

// maxBodyBytes caps a request body (a command is at most 64 KiB).
const maxBodyBytes = 1 << 20

type handlers struct {
	d   Deps
	hub *logHub
	log zerolog.Logger
}

// Register adds the execution and approval routes to g (mounted at /api/v1).
func Register(g *echo.Group, d Deps) {
	if d.Service == nil || d.Auth == nil {
		panic("execapi: Register needs the execution service and the token store")
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
	r, w := h.require(auth.PermRead), h.require(auth.PermWrite)
	g.POST("/executions", h.requestRun, w)
	g.POST("/executions/actions", h.requestAction, w)
	g.GET("/executions", h.list, r)
	g.GET("/executions/:id", h.get, r)
	g.GET("/executions/:id/logs", h.logs, r)
	g.GET("/executions/:id/logs/stream", h.stream, r)
	g.GET("/approvals", h.listApprovals, r)
	g.GET("/approvals/:id", h.getApproval, r)
	// Deciding is checked by the service: operators decide any way, an agent only relays an
	// operator's chat message (with its id), a readonly token never reaches it.
	g.POST("/approvals/:id/decision", h.decide, w)
}

const ctxPrincipal = "oikos.execapi.principal"

// require checks the bearer token and the role's permission.
func (h *handlers) require(perm auth.Permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			tok, ok := cutBearer(c.Request().Header.Get(echo.HeaderAuthorization))
			if !ok {
				return h.fail(c, auth.ErrUnauthenticated)
			}
			p, err := h.d.Auth.Verify(c.Request().Context(), tok)
			if err != nil {
				return h.fail(c, err)
			}
			if !p.Role.Can(perm) {
				return h.fail(c, fmt.Errorf("%w: role %s may not %s", auth.ErrForbidden, p.Role, perm))
			}
			c.Set(ctxPrincipal, p)
			return next(c)
		}
	}
}

func cutBearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	return h[len(prefix):], true
}

func meta(c echo.Context) execution.Meta {
	p, _ := c.Get(ctxPrincipal).(auth.Principal)
	return execution.Meta{Actor: p.Name, Role: string(p.Role), Method: c.Request().Method, Path: c.Request().URL.Path}
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
	if err := decodeJSON(c, &b); err != nil {
		return h.fail(c, err)
	}
	return h.request(c, execution.Request{Target: b.Target, Action: execution.ActionRun, Command: b.Command,
		Purpose: b.Purpose, DeclaredRisk: b.DeclaredRisk, SessionID: b.SessionID, TimeoutSeconds: b.TimeoutSeconds})
}

func (h *handlers) requestAction(c echo.Context) error {
	var b actionBody
	if err := decodeJSON(c, &b); err != nil {
		return h.fail(c, err)
	}
	if strings.TrimSpace(b.Action) == "" {
		return h.fail(c, &execution.FieldError{Field: "action", Reason: "is required (one of " + strings.Join(execution.TypedActions(), ", ") + ")"})
	}
	return h.request(c, execution.Request{Target: b.Target, Action: b.Action, Params: b.Params,
		Purpose: b.Purpose, DeclaredRisk: b.DeclaredRisk, SessionID: b.SessionID, TimeoutSeconds: b.TimeoutSeconds})
}

func (h *handlers) request(c echo.Context, r execution.Request) error {
	e, err := h.d.Service.Request(c.Request().Context(), meta(c), r)
	if err != nil {
		return h.fail(c, err)
	}
	status := http.StatusCreated
	if e.AlreadyQueued {
		status = http.StatusOK
	} else {
		c.Response().Header().Set(echo.HeaderLocation, "/api/v1/executions/"+e.ID)
	}
	return c.JSON(status, e)
}

// list is the shape of every list answer.
type list[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

func listOf[T any](items []T, next string) list[T] {
	l := list[T]{Items: items}
	if l.Items == nil {
		l.Items = []T{}
	}
	if next != "" {
		cur := base64.RawURLEncoding.EncodeToString([]byte(next))
		l.NextCursor = &cur
	}
	return l
}

// page reads limit and cursor (base64url of the sort key of the last item seen).
func page(c echo.Context) (int, string, error) {
	limit, err := intParam(c, "limit", 50, 1, 500)
	if err != nil {
		return 0, "", err
	}
	var after string
	if cur := c.QueryParam("cursor"); cur != "" {
		b, err := base64.RawURLEncoding.DecodeString(cur)
		if err != nil || len(b) == 0 {
			return 0, "", &requestError{status: http.StatusBadRequest, field: "cursor",
				detail: "malformed cursor; pass next_cursor from the previous page unchanged"}
		}
		after = string(b)
	}
	return limit, after, nil
}

func intParam(c echo.Context, name string, def, lo, hi int) (int, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &requestError{status: http.StatusBadRequest, field: name, detail: fmt.Sprintf("must be an integer from %d to %d", lo, hi)}
	}
	return n, nil
}

// listParam splits a comma-separated query parameter (also accepted repeated).
func listParam(c echo.Context, name string) []string {
	var out []string
	for _, v := range c.QueryParams()[name] {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

func (h *handlers) list(c echo.Context) error {
	limit, after, err := page(c)
	if err != nil {
		return h.fail(c, err)
	}
	p, err := h.d.Service.List(c.Request().Context(), execution.ListFilter{
		Target: c.QueryParam("target"), Actions: listParam(c, "action"), Statuses: listParam(c, "status"),
		CorrelationID: c.QueryParam("correlation_id"), SessionID: c.QueryParam("session_id"), After: after, Limit: limit})
	if err != nil {
		return h.fail(c, err)
	}
	return c.JSON(http.StatusOK, listOf(p.Items, p.Next))
}

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
		return h.fail(c, err)
	}
	return c.JSON(http.StatusOK, e)
}

func (h *handlers) logs(c echo.Context) error {
	after, err := intParam(c, "after", 0, 0, 1<<31-1)
	if err != nil {
		return h.fail(c, err)
	}
	limit, err := intParam(c, "limit", 1000, 1, 1000)
	if err != nil {
		return h.fail(c, err)
	}
	l, err := h.d.Service.Logs(c.Request().Context(), pathID(c), after, limit)
	if err != nil {
		return h.fail(c, err)
	}
	return c.JSON(http.StatusOK, l)
}

func (h *handlers) listApprovals(c echo.Context) error {
	limit, after, err := page(c)
	if err != nil {
		return h.fail(c, err)
	}
	p, err := h.d.Service.ListApprovals(c.Request().Context(), execution.ApprovalFilter{
		Statuses: listParam(c, "status"), SessionID: c.QueryParam("session_id"), After: after, Limit: limit})
	if err != nil {
		return h.fail(c, err)
	}
	return c.JSON(http.StatusOK, listOf(p.Items, p.Next))
}

func (h *handlers) getApproval(c echo.Context) error {
	a, err := h.d.Service.GetApproval(c.Request().Context(), pathID(c))
	if err != nil {
		return h.fail(c, err)
	}
	return c.JSON(http.StatusOK, a)
}

func (h *handlers) decide(c echo.Context) error {
	var d execution.Decision
	if err := decodeJSON(c, &d); err != nil {
		return h.fail(c, err)
	}
	res, err := h.d.Service.Decide(c.Request().Context(), meta(c), pathID(c), d)
	if err != nil {
		return h.fail(c, err)
	}
	return c.JSON(http.StatusOK, res)
}

// requestError is a malformed request found by the handler itself.
type requestError struct {
	status int
	kind   string
	field  string
	detail string
}

func (e *requestError) Error() string { return e.detail }

// decodeJSON reads the body strictly: one JSON object of the right shape, no unknown field,
// nothing after it.
func decodeJSON(c echo.Context, dst any) error {
	req := c.Request()
	if ct := req.Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return &requestError{status: http.StatusUnsupportedMediaType, kind: "unsupported-media-type",
				detail: fmt.Sprintf("Content-Type %q: send application/json", ct)}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, maxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &requestError{status: http.StatusRequestEntityTooLarge, kind: "payload-too-large",
				detail: fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes)}
		}
		return &requestError{status: http.StatusBadRequest, detail: "read body: " + err.Error()}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return &requestError{status: http.StatusBadRequest, detail: "a JSON request body is required"}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return &requestError{status: http.StatusBadRequest, detail: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, err)}
		case errors.As(err, &te):
			if te.Field == "" {
				return &requestError{status: http.StatusUnprocessableEntity, kind: "validation", detail: "the body must be a JSON object"}
			}
			return &requestError{status: http.StatusUnprocessableEntity, kind: "validation", field: te.Field,
				detail: fmt.Sprintf("expected %s, got %s", te.Type.Kind(), te.Value)}
		}
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			name = strings.Trim(name, `"`)
			return &requestError{status: http.StatusUnprocessableEntity, kind: "validation", field: name,
				detail: fmt.Sprintf("unknown field %q", name)}
		}
		return &requestError{status: http.StatusBadRequest, detail: "malformed JSON: " + err.Error()}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &requestError{status: http.StatusBadRequest, detail: "the body must hold a single JSON value; found more after it"}
	}
	return nil
}

// Package chatapi is chat through the api (docs/behaviours.md A5, A10): POST /chat records the
// message itself (api/internal/chat: chat_messages, with its audit row and chat.message event)
// and only then forwards the turn to the agent, relaying the agent's server-sent events to the
// client byte for byte; the session routes (GET /sessions, GET and DELETE /sessions/{id}, GET
// /sessions/{id}/tool_calls) authenticate the client as every route does and proxy to the
// agent's own.
//
// The internal contract with the agent (oikos-agent, OIKOS_AGENT_URL, default
// http://127.0.0.1:8092), every request carrying `Authorization: Bearer <OIKOS_AGENT_TOKEN>`
// and the request's X-Correlation-ID:
//
//   - POST /internal/chat, body {"session_id", "message", "message_id", "actor", "role"}
//     (message_id: the api's record; actor and role: the token that sent it), answered with a
//     text/event-stream that starts with `event: session` {"session_id", "message_id"} and
//     ends with `event: done`; between them delta, tool_use, tool_result, approval_required,
//     plan, task, status and error events (any name passes: the relay copies events as they
//     are). The api writes every event to its client as it arrives
//     (a flush per blank line). A client that leaves does not stop the turn: the api reads the
//     agent's stream to its end anyway (detached from the client, bounded by TurnTimeout) and
//     discards the rest. An agent that cannot be reached, or answers anything but a 2xx event
//     stream, is answered to the client as a stream too: `event: session`, `event: error`
//     {"message"}, `event: done` {"finish_reason": "error"}; so is a stream that ends without
//     its done.
//   - GET /internal/sessions (the client's query string as is), GET /internal/sessions/{id},
//     GET /internal/sessions/{id}/tool_calls, DELETE /internal/sessions/{id}: the agent's
//     status and JSON body go back as they are; its problem documents are re-rendered by the
//     api's one mapper (same status, detail and field), so a client reads one problem shape.
//     An agent that refuses the api's token (401, 403) or cannot be reached is a 503.
//   - POST /internal/llm/check, body the client's POST /llm/check as it came (overrides of
//     the model server, all optional): the agent probes its model server and answers a
//     shared/llmcheck.Report, passed on as it is (llmcheck.go).
package chatapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/chat"
	"github.com/oikos-hq/oikos/api/internal/request"
)

// Defaults for Deps.
const (
	DefaultAgentURL     = "http://127.0.0.1:8092"
	DefaultTurnTimeout  = 15 * time.Minute
	DefaultProxyTimeout = 30 * time.Second
	// maxProxyBody bounds a session answer the api passes on.
	maxProxyBody = 16 << 20
	// maxAgentProblem bounds what is read of an agent's refusal.
	maxAgentProblem = 64 << 10
	// maxFrame is how much of one event the relay holds before passing it on unfinished.
	maxFrame = 1 << 20
)

// Deps are what the chat surface needs; the composition root builds them.
type Deps struct {
	Chat *chat.Store
	// AgentURL is the agent's base URL (OIKOS_AGENT_URL; default DefaultAgentURL).
	AgentURL string
	// AgentToken is OIKOS_AGENT_TOKEN, which the agent accepts from the api alone. Without it
	// every turn answers an error event and the session routes 503.
	AgentToken string
	// Client talks to the agent (default: a 5 s dial timeout, 30 s for the response headers, no
	// overall timeout, so a stream may last; no proxy).
	Client *http.Client
	// TurnTimeout bounds reading one turn's stream, detached from the client (default 15 min).
	TurnTimeout time.Duration
	// ProxyTimeout bounds one session request (default 30 s).
	ProxyTimeout time.Duration
	// Auth verifies bearer tokens for Register (the api's server mounts Routes behind its own
	// guard instead).
	Auth   *auth.Store
	Logger zerolog.Logger
}

// API is the chat and session surface.
type API struct {
	d     Deps
	agent *url.URL
	log   zerolog.Logger
	// base ends the turns still being read when the api stops.
	base context.Context
	stop context.CancelFunc
}

// New builds the surface; it fails on an AgentURL that is not an http(s) URL.
func New(d Deps) (*API, error) {
	if d.Chat == nil {
		return nil, errors.New("chatapi: the chat store is required")
	}
	if d.AgentURL == "" {
		d.AgentURL = DefaultAgentURL
	}
	u, err := url.Parse(strings.TrimRight(d.AgentURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("chatapi: agent URL %q: want http(s)://host:port", d.AgentURL)
	}
	if d.Client == nil {
		d.Client = &http.Client{Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ResponseHeaderTimeout: 30 * time.Second,
			MaxIdleConnsPerHost:   16,
			IdleConnTimeout:       90 * time.Second,
		}}
	}
	if d.TurnTimeout <= 0 {
		d.TurnTimeout = DefaultTurnTimeout
	}
	if d.ProxyTimeout <= 0 {
		d.ProxyTimeout = DefaultProxyTimeout
	}
	base, stop := context.WithCancel(context.Background())
	return &API{d: d, agent: u, log: d.Logger.With().Str("component", "chatapi").Logger(), base: base, stop: stop}, nil
}

// Stop ends the turns whose streams are still being read for clients that left. Safe twice.
func (a *API) Stop() { a.stop() }

// Routes is the chat and session routes (under /api/v1). Chatting needs a token that may
// write (an operator's or an agent's; the record keeps which); reading sessions any token;
// deleting one a token that may write.
func (a *API) Routes() []request.Route {
	r, w := auth.PermRead, auth.PermWrite
	return []request.Route{
		request.POST("/chat", w, a.chat),
		request.GET("/sessions", r, a.proxy("")),
		request.GET("/sessions/:id", r, a.proxy("")),
		request.DELETE("/sessions/:id", w, a.proxy("")),
		request.GET("/sessions/:id/tool_calls", r, a.proxy("/tool_calls")),
		request.POST("/llm/check", w, a.llmCheck),
	}
}

// Register mounts Routes on g (mounted at /api/v1) behind a guard over d.Auth: for a
// standalone surface (the tests).
func Register(g *echo.Group, d Deps) (*API, error) {
	if d.Auth == nil {
		return nil, errors.New("chatapi: Register needs the token store")
	}
	a, err := New(d)
	if err != nil {
		return nil, err
	}
	request.Mount(g, d.Auth, a.log, a.Routes()...)
	return a, nil
}

// chatBody is POST /chat.
type chatBody struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
}

// turnRequest is POST /internal/chat, the agent's side.
type turnRequest struct {
	SessionID string `json:"session_id"`
	Message   string `json:"message"`
	MessageID string `json:"message_id"`
	Actor     string `json:"actor"`
	Role      string `json:"role"`
}

// chat records the message, then forwards the turn and relays its stream. Everything before
// the record is an ordinary problem answer; from the record on, the answer is a stream.
func (a *API) chat(c echo.Context) error {
	var b chatBody
	if err := request.DecodeJSON(c, &b); err != nil {
		return err
	}
	m := request.MetaOf(c)
	msg, err := a.d.Chat.Record(c.Request().Context(), chat.Meta{Actor: m.Actor, Role: m.Role, Method: m.Method,
		Path: m.Path, CorrelationID: m.CorrelationID}, b.SessionID, b.Message)
	if err != nil {
		return err
	}
	// The turn is the agent's to finish: it does not end with the client, only with the
	// agent's stream, TurnTimeout or the api's Stop.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), a.d.TurnTimeout)
	defer cancel()
	defer context.AfterFunc(a.base, cancel)()
	resp, turnErr := a.startTurn(ctx, m, msg)
	if resp != nil {
		defer resp.Body.Close()
	}
	w, err := request.StartStream(c, 0)
	rl := &relay{w: w, gone: err != nil, log: a.log.With().Str("session_id", msg.SessionID).Str("message_id", msg.ID).Logger()}
	if turnErr != nil {
		a.log.Warn().Err(turnErr).Str("session_id", msg.SessionID).Str("message_id", msg.ID).Msg("chat turn not started")
		rl.event("session", map[string]string{"session_id": msg.SessionID, "message_id": msg.ID})
		rl.fail(turnErr.Error())
		return nil
	}
	rl.copy(resp.Body)
	return nil
}

// startTurn posts the turn to the agent and returns its response once it is a 2xx event
// stream; anything else is an error saying what the agent did.
func (a *API) startTurn(ctx context.Context, m request.Meta, msg chat.Message) (*http.Response, error) {
	if a.d.AgentToken == "" {
		return nil, errors.New("the api has no OIKOS_AGENT_TOKEN to reach the agent with; the message was recorded, but no turn ran")
	}
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(turnRequest{SessionID: msg.SessionID, Message: msg.Text, MessageID: msg.ID,
		Actor: msg.TokenName, Role: msg.TokenRole}); err != nil {
		return nil, fmt.Errorf("encode the turn: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.agent.String()+"/internal/chat", &body)
	if err != nil {
		return nil, fmt.Errorf("build the turn request: %w", err)
	}
	a.agentHeaders(req, m)
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := a.d.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the agent is unreachable (%s): %v", a.agent.Redacted(), unwrapURL(err))
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		detail := problemDetail(resp)
		return nil, fmt.Errorf("the agent refused the turn: %d %s%s", resp.StatusCode, http.StatusText(resp.StatusCode), detail)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get(echo.HeaderContentType)); mt != "text/event-stream" {
		resp.Body.Close()
		return nil, fmt.Errorf("the agent answered the turn with %q, not an event stream", resp.Header.Get(echo.HeaderContentType))
	}
	return resp, nil
}

// agentHeaders sets what every request to the agent carries: the agent's token (the agent
// accepts it from the api alone), the correlation id and, for the agent's log, who asked.
func (a *API) agentHeaders(req *http.Request, m request.Meta) {
	req.Header.Set(echo.HeaderAuthorization, "Bearer "+a.d.AgentToken)
	if m.CorrelationID != "" {
		req.Header.Set(request.HeaderCorrelationID, m.CorrelationID)
	}
	for k, v := range map[string]string{"X-Oikos-Actor": m.Actor, "X-Oikos-Role": m.Role} {
		if v != "" && !strings.ContainsAny(v, "\r\n\x00") {
			req.Header.Set(k, v)
		}
	}
}

// unwrapURL drops the *url.Error wrapper (its text repeats method and URL).
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// agentProblem is the part of an agent's problem document the api passes on.
type agentProblem struct {
	Title  string `json:"title"`
	Detail string `json:"detail"`
	Field  string `json:"field"`
}

// problemDetail reads an agent's refusal and returns ": <detail>" when it has one.
func problemDetail(resp *http.Response) string {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxAgentProblem))
	var p agentProblem
	if json.Unmarshal(raw, &p) == nil && p.Detail != "" {
		return ": " + p.Detail
	}
	if s := strings.TrimSpace(string(raw)); s != "" && len(s) <= 300 && !strings.ContainsAny(s, "\x00") {
		return ": " + s
	}
	return ""
}

// relay writes one turn's stream to the client. Once a write fails the client is gone; the
// agent's stream is still read to its end, and discarded.
type relay struct {
	w    *request.Stream
	gone bool
	log  zerolog.Logger
	// partial: part of the current event was passed on before its end (an event over maxFrame).
	partial bool
}

func (r *relay) send(frames []byte) {
	if r.gone || len(frames) == 0 {
		return
	}
	if err := r.w.Frames(frames); err != nil {
		r.gone = true
		r.log.Info().Err(err).Msg("chat client left; reading the turn to its end")
	}
}

func (r *relay) event(name string, data any) {
	if r.gone {
		return
	}
	if err := r.w.Event("", name, data); err != nil {
		r.gone = true
	}
}

// fail ends the client's stream with an error and done.
func (r *relay) fail(message string) {
	if r.partial {
		r.send([]byte("\n\n"))
		r.partial = false
	}
	r.event("error", map[string]string{"message": message})
	r.event("done", map[string]string{"finish_reason": "error"})
}

// copy reads the agent's stream line by line and passes each event on when its blank line
// arrives, so the client gets every event as soon as the agent sent it, in order and byte for
// byte. A stream that breaks, or ends without `event: done`, gets an error and a done of the
// api's own.
func (r *relay) copy(body io.Reader) {
	br := bufio.NewReaderSize(body, 64<<10)
	var frame []byte
	lineStart, event, done := true, "", false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if lineStart && bytes.HasPrefix(chunk, []byte("event:")) {
				event = strings.TrimSpace(string(bytes.TrimPrefix(chunk, []byte("event:"))))
			}
			blank := lineStart && (string(chunk) == "\n" || string(chunk) == "\r\n")
			frame = append(frame, chunk...)
			lineStart = chunk[len(chunk)-1] == '\n'
			switch {
			case blank:
				r.send(frame)
				frame, r.partial = frame[:0], false
				if event == "done" {
					done = true
				}
				event = ""
			case len(frame) >= maxFrame:
				r.send(frame)
				frame, r.partial = frame[:0], true
			}
		}
		switch {
		case err == nil || errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && done:
			return
		case errors.Is(err, io.EOF):
			r.log.Warn().Bool("done", done).Msg("the agent's turn stream ended without its done event")
			r.fail("the agent's stream ended before the turn was done")
			return
		default:
			r.log.Warn().Err(err).Msg("reading the agent's turn stream failed")
			r.fail("the agent's stream broke off: " + err.Error())
			return
		}
	}
}

// proxy answers a session route from the agent's route of the same path under /internal
// (suffix after the session id), with the client's query string.
func (a *API) proxy(suffix string) echo.HandlerFunc {
	return func(c echo.Context) error {
		path := "/internal/sessions"
		if c.Param("id") != "" {
			id := pathID(c)
			if !chat.ValidSessionID(id) {
				return request.NotFound("no session %q (a session id is 1 to 128 of A-Z a-z 0-9 . _ : @ / -)", id)
			}
			path += "/" + url.PathEscape(id) + suffix
		}
		if a.d.AgentToken == "" {
			return request.Unavailable("sessions are the agent's, and the api has no OIKOS_AGENT_TOKEN to reach it with")
		}
		target := a.agent.String() + path
		if q := c.Request().URL.RawQuery; q != "" {
			target += "?" + q
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), a.d.ProxyTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, c.Request().Method, target, nil)
		if err != nil {
			return request.BadRequest("", "cannot pass this request on to the agent: %v", err)
		}
		a.agentHeaders(req, request.MetaOf(c))
		req.Header.Set("Accept", echo.MIMEApplicationJSON)
		resp, err := a.d.Client.Do(req)
		if err != nil {
			if c.Request().Context().Err() != nil {
				return c.Request().Context().Err()
			}
			return request.Unavailable("the agent is unreachable (%s): %v", a.agent.Redacted(), unwrapURL(err))
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxProxyBody+1))
		if err != nil {
			return request.Unavailable("reading the agent's answer failed: %v", err)
		}
		if len(body) > maxProxyBody {
			return request.Unavailable("the agent's answer is over %d bytes", maxProxyBody)
		}
		switch st := resp.StatusCode; {
		case st == http.StatusUnauthorized || st == http.StatusForbidden:
			return request.Unavailable("the agent refused the api's token (%d); OIKOS_AGENT_TOKEN must be the same for the api and the agent", st)
		case st >= 400:
			return agentError(st, body)
		case st == http.StatusNoContent || len(body) == 0:
			return c.NoContent(st)
		default:
			ct := resp.Header.Get(echo.HeaderContentType)
			if ct == "" {
				ct = echo.MIMEApplicationJSON
			}
			return c.Blob(st, ct, body)
		}
	}
}

// agentError re-renders an agent's problem through the api's one mapper: its status, detail
// and field, under the api's problem kinds.
func agentError(status int, body []byte) error {
	var p agentProblem
	_ = json.Unmarshal(body, &p)
	detail := p.Detail
	if detail == "" {
		detail = p.Title
	}
	if detail == "" {
		detail = fmt.Sprintf("the agent answered %d %s", status, http.StatusText(status))
	}
	kind := "agent-error"
	switch status {
	case http.StatusBadRequest:
		kind = "malformed-request"
	case http.StatusNotFound:
		kind = "not-found"
	case http.StatusConflict:
		kind = "conflict"
	case http.StatusUnprocessableEntity:
		kind = "validation"
	case http.StatusServiceUnavailable:
		kind = "unavailable"
	}
	return request.Errorf(status, kind, p.Field, "%s", detail)
}

// pathID is the :id path parameter, unescaped where it can be (a session id may hold a /,
// sent as %2F).
func pathID(c echo.Context) string {
	v, err := url.PathUnescape(c.Param("id"))
	if err != nil {
		return c.Param("id")
	}
	return v
}

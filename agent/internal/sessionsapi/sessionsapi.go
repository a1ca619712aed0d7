// Package sessionsapi serves the agent's sessions on the agent's own HTTP listener, under
// /internal/sessions; the api proxies them to operators as /api/v1/sessions. It reads the
// agent's tables through agent/internal/storage (no SQL here) and deletes a session with its
// audit row and its event in one transaction.
//
//	GET    /internal/sessions                 the list, newest first, by keyset pages
//	GET    /internal/sessions/{id}            one session: task, current plan, transcript
//	GET    /internal/sessions/{id}/tool_calls the session's tool calls in order
//	DELETE /internal/sessions/{id}            the session and everything that hangs off it
//
// Every request carries the agent's own token (Authorization: Bearer); errors are RFC 9457
// problem JSON.
package sessionsapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// ActorHeader names who asked for a change; the api sets it to the operator's token name
// when it proxies a request. Without it the actor is "agent".
const ActorHeader = "X-Oikos-Actor"

// Audit action and event type of a deletion.
const (
	ActionDelete = "session.delete"
	EventDeleted = "session.deleted"
)

// maxActorLen bounds the actor taken from ActorHeader.
const maxActorLen = 200

// errAwaitsApproval refuses to delete a session whose task waits on an approval.
var errAwaitsApproval = errors.New("the session waits on an approval; deny or let it finish first")

type handler struct {
	pool  *storage.Pool
	token [sha256.Size]byte
	// open is false when the agent has no token: every request is then refused.
	open bool
	log  zerolog.Logger
	now  func() time.Time
}

// New returns the handler of the sessions endpoints. token is the agent's own bearer token
// (OIKOS_AGENT_TOKEN); a request must present exactly it. With an empty token every request
// is refused with 401.
func New(pool *storage.Pool, token string, log zerolog.Logger) http.Handler {
	h := &handler{pool: pool, token: sha256.Sum256([]byte(token)), open: token != "", log: log, now: time.Now}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /internal/sessions", h.list)
	mux.HandleFunc("GET /internal/sessions/{id}", h.get)
	mux.HandleFunc("GET /internal/sessions/{id}/tool_calls", h.toolCalls)
	mux.HandleFunc("DELETE /internal/sessions/{id}", h.delete)
	return h.authenticate(mux)
}

// authenticate refuses, with 401 problem JSON, a request without the agent's token. Both
// sides are hashed before the constant-time compare, so neither the token's bytes nor its
// length leak through timing.
func (h *handler) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			unauthorized(w, "no bearer token: send Authorization: Bearer <the agent's token>")
			return
		}
		sum := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(sum[:], h.token[:]) != 1 || !h.open {
			unauthorized(w, "the bearer token is not the agent's token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(r *http.Request) (string, bool) {
	const p = "bearer "
	v := r.Header.Get("Authorization")
	if len(v) <= len(p) || !strings.EqualFold(v[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(v[len(p):]), true
}

// listItem is one session of the list.
type listItem struct {
	ID              string     `json:"id"`
	Title           string     `json:"title"`
	Status          string     `json:"status"`
	Outcome         string     `json:"outcome"`
	Blocker         string     `json:"blocker"`
	Goal            string     `json:"goal"`
	CreatedAt       time.Time  `json:"created_at"`
	ClosedAt        *time.Time `json:"closed_at"`
	MessageCount    int64      `json:"message_count"`
	ToolCallCount   int64      `json:"tool_call_count"`
	DurationSeconds int64      `json:"duration_seconds"`
}

type listAnswer struct {
	Items      []listItem `json:"items"`
	NextCursor *string    `json:"next_cursor"`
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r.URL.Query(), h.now())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	page, err := storage.ListSessions(r.Context(), h.pool, f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := listAnswer{Items: make([]listItem, 0, len(page.Items))}
	for _, s := range page.Items {
		out.Items = append(out.Items, listItem{
			ID: s.ID, Title: s.Title, Status: s.Status, Outcome: s.Outcome, Blocker: s.Blocker, Goal: s.Goal,
			CreatedAt: s.CreatedAt.UTC(), ClosedAt: utc(s.ClosedAt), MessageCount: s.MessageCount,
			ToolCallCount: s.ToolCallCount, DurationSeconds: s.DurationSeconds,
		})
	}
	if page.Next != nil {
		c := page.Next.String()
		out.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, out)
}

type detailAnswer struct {
	ID        string     `json:"id"`
	Title     string     `json:"title"`
	CreatedAt time.Time  `json:"created_at"`
	ClosedAt  *time.Time `json:"closed_at"`
	Task      task       `json:"task"`
	Plan      plan       `json:"plan"`
	Messages  []message  `json:"messages"`
}

type task struct {
	Goal    string `json:"goal"`
	Status  string `json:"status"`
	Outcome string `json:"outcome"`
	Blocker string `json:"blocker"`
}

type plan struct {
	// Generation is the current plan's generation (0: no plan proposed yet, no steps).
	Generation int    `json:"generation"`
	Steps      []step `json:"steps"`
}

type step struct {
	// Index counts from 1: the stored 0-based idx + 1, the number update_plan_step takes.
	Index  int    `json:"index"`
	Text   string `json:"text"`
	Status string `json:"status"`
}

type message struct {
	ID        int64     `json:"id"`
	Role      string    `json:"role"`
	Content   string    `json:"content"`
	CreatedAt time.Time `json:"created_at"`
	ToolCalls []call    `json:"tool_calls"`
}

type call struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Result    string          `json:"result"`
	IsError   bool            `json:"is_error"`
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	var (
		sess       storage.Session
		steps      []storage.Step
		transcript []storage.TranscriptMessage
	)
	// One snapshot for the session, its plan and its transcript.
	err := storage.InTx(ctx, h.pool, func(tx storage.DB) error {
		if err := storage.ReadSnapshot(ctx, tx); err != nil {
			return err
		}
		var err error
		if sess, err = storage.GetSession(ctx, tx, id, false); err != nil {
			return err
		}
		if sess.PlanGeneration > 0 {
			if steps, err = storage.Steps(ctx, tx, id, sess.PlanGeneration); err != nil {
				return err
			}
		}
		transcript, err = storage.Transcript(ctx, tx, id)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := detailAnswer{
		ID: sess.ID, Title: storage.SessionTitle(sess, transcript), CreatedAt: sess.CreatedAt.UTC(), ClosedAt: utc(sess.ClosedAt),
		Task:     task{Goal: sess.Goal, Status: sess.Status, Outcome: sess.Outcome, Blocker: sess.Blocker},
		Plan:     plan{Generation: sess.PlanGeneration, Steps: make([]step, 0, len(steps))},
		Messages: make([]message, 0, len(transcript)),
	}
	for _, s := range steps {
		out.Plan.Steps = append(out.Plan.Steps, step{Index: s.Index + 1, Text: s.Text, Status: s.Status})
	}
	for _, m := range transcript {
		msg := message{ID: m.ID, Role: m.Role, Content: m.Content, CreatedAt: m.CreatedAt.UTC(), ToolCalls: make([]call, 0, len(m.Calls))}
		for _, c := range m.Calls {
			msg.ToolCalls = append(msg.ToolCalls, call{ID: c.ID, Name: c.Name, Arguments: object(c.Arguments), Result: c.Result, IsError: c.IsError})
		}
		out.Messages = append(out.Messages, msg)
	}
	writeJSON(w, http.StatusOK, out)
}

type callItem struct {
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	Arguments  json.RawMessage `json:"arguments"`
	Result     string          `json:"result"`
	IsError    bool            `json:"is_error"`
	StartedAt  time.Time       `json:"started_at"`
	FinishedAt *time.Time      `json:"finished_at"`
}

type callsAnswer struct {
	Items []callItem `json:"items"`
}

// toolCalls lists every call of the session in order, those of an MCP session (which belong
// to no message) included.
func (h *handler) toolCalls(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	var calls []storage.ToolCall
	err := storage.InTx(ctx, h.pool, func(tx storage.DB) error {
		if err := storage.ReadSnapshot(ctx, tx); err != nil {
			return err
		}
		if _, err := storage.GetSession(ctx, tx, id, false); err != nil {
			return err
		}
		var err error
		calls, err = storage.ToolCalls(ctx, tx, id)
		return err
	})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := callsAnswer{Items: make([]callItem, 0, len(calls))}
	for _, c := range calls {
		out.Items = append(out.Items, callItem{ID: c.ID, Name: c.Name, Arguments: object(c.Arguments), Result: c.Result,
			IsError: c.IsError, StartedAt: c.StartedAt.UTC(), FinishedAt: utc(c.FinishedAt)})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	actor := strings.TrimSpace(r.Header.Get(ActorHeader))
	if actor == "" {
		actor = "agent"
	}
	if len(actor) > maxActorLen {
		actor = actor[:maxActorLen]
	}
	if err := h.deleteSession(r.Context(), r.PathValue("id"), actor, r.Method, r.URL.Path); err != nil {
		h.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// deleteSession deletes a session (its messages, tool calls, plan steps, questions and
// activity by cascade) with its audit row and its session.deleted event, in one transaction
// on the session's locked row. The lock also waits out a task change in flight and keeps a
// turn from adding messages or calls to the session until the delete commits.
func (h *handler) deleteSession(ctx context.Context, id, actor, method, path string) error {
	return storage.InTx(ctx, h.pool, func(tx storage.DB) error {
		sess, err := storage.GetSession(ctx, tx, id, true)
		if err != nil {
			return err
		}
		// A task that waits on an approval is not deleted: the api still holds a pending
		// approval for the session, and its decision would then run (or be denied) for a
		// task nobody can see any more. The operator denies it, or lets it finish, first.
		// Any other session, open or closed, may be deleted.
		if sess.Status == storage.StatusAwaitingInput && sess.Awaiting == "approval" {
			return errAwaitsApproval
		}
		gone, err := storage.DeleteSession(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, audit.Row{Actor: actor, Action: ActionDelete, Method: method, Path: path,
			CorrelationID: id, Before: sess}); err != nil {
			return err
		}
		_, err = eventbus.Append(ctx, tx, eventbus.Event{Type: EventDeleted, CorrelationID: id, Actor: actor}, map[string]any{
			"session_id": id, "title": sess.Title, "status": sess.Status, "outcome": sess.Outcome,
			"messages": gone.Messages, "tool_calls": gone.ToolCalls,
		})
		return err
	})
}

// object returns stored arguments as a JSON object: tools take objects, so anything else
// (never written by the agent) is wrapped as {"value": ...} rather than dropped.
func object(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0 || string(t) == "null":
		return json.RawMessage(`{}`)
	case t[0] == '{':
		return t
	}
	b, err := json.Marshal(map[string]json.RawMessage{"value": t})
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		problem(w, http.StatusInternalServerError, "Internal Server Error", "could not encode the answer", "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

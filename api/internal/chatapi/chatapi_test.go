package chatapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/api/internal/ids"
)

// TestChatRecordsThenForwards: the api records the message itself (row, audit row, event)
// before it forwards the turn, so the agent receives the id of a committed row; the turn
// carries who sent it; the agent's stream reaches the client byte for byte; a message without
// a session starts a new one, and the session can be continued.
func TestChatRecordsThenForwards(t *testing.T) {
	t.Parallel()
	turns := make(chan turn, 4)
	var mu sync.Mutex
	var wrote bytes.Buffer // every byte the agent's last turn wrote
	e := newEnv(t, func(e *env) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost || r.URL.Path != "/internal/chat" {
				problem(w, http.StatusNotFound, "not a route of the fake agent")
				return
			}
			if !e.authorised(r) || r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("X-Correlation-ID") == "" {
				problem(w, http.StatusUnauthorized, "the api must present the agent token, ask for a stream and pass its correlation id")
				return
			}
			tr, err := decodeTurn(r)
			if err != nil {
				problem(w, http.StatusBadRequest, err.Error())
				return
			}
			// The record exists, committed, before the agent hears of the message.
			var text, name, role, session string
			if err := e.pool.QueryRow(r.Context(), `SELECT text, token_name, token_role, session_id FROM chat_messages WHERE id = $1`,
				tr.MessageID).Scan(&text, &name, &role, &session); err != nil {
				problem(w, http.StatusUnprocessableEntity, "no record of message "+tr.MessageID+": "+err.Error())
				return
			}
			if text != tr.Message || name != tr.Actor || role != tr.Role || session != tr.SessionID {
				problem(w, http.StatusUnprocessableEntity, fmt.Sprintf("the record %q %s %s %s differs from the turn %+v", text, name, role, session, tr))
				return
			}
			turns <- tr
			frames := []string{
				"event: session\ndata: " + mustJSON(map[string]string{"session_id": tr.SessionID, "message_id": tr.MessageID}) + "\n\n",
				": the agent's own comment\n\n",
				"event: delta\ndata: {\"text\":\"Restarting \\u003ccaddy\\u003e \"}\n\n",
				"id: 7\nevent: tool_use\ndata: {\"id\":\"tc-1\",\ndata: \"name\":\"run\"}\n\n",
				"event: tool_result\r\ndata: {\"id\":\"tc-1\",\"name\":\"run\",\"content\":\"ok\",\"is_error\":false}\r\n\r\n",
				"event: delta\ndata: {\"text\":\"done.\"}\n\n",
				"event: done\ndata: {\"finish_reason\":\"stop\"}\n\n",
			}
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			w.WriteHeader(http.StatusOK)
			rc := http.NewResponseController(w)
			mu.Lock()
			defer mu.Unlock()
			wrote.Reset()
			for _, f := range frames {
				_, _ = io.WriteString(w, f)
				wrote.WriteString(f)
				_ = rc.Flush()
			}
		})
	})
	before := e.count(`SELECT count(*) FROM chat_messages`)
	r, evs := e.operator.chat(map[string]any{"message": "restart caddy on web, please"})
	if names(evs) != "session,delta,tool_use,tool_result,delta,done" {
		t.Fatalf("events %s", names(evs))
	}
	tr := <-turns
	mu.Lock()
	if !bytes.Equal(r.Body, wrote.Bytes()) {
		t.Errorf("the client got\n%q\nthe agent wrote\n%q", r.Body, wrote.Bytes())
	}
	mu.Unlock()
	if !ids.IsUUID(tr.SessionID) || !ids.IsUUID(tr.MessageID) || tr.Actor != "op" || tr.Role != "operator" ||
		tr.Message != "restart caddy on web, please" {
		t.Fatalf("turn %+v: want a new session, the record's id, the operator", tr)
	}
	var sessionEv struct {
		SessionID string `json:"session_id"`
		MessageID string `json:"message_id"`
	}
	evs[0].decode(t, &sessionEv)
	if sessionEv.SessionID != tr.SessionID || sessionEv.MessageID != tr.MessageID {
		t.Fatalf("session event %+v, turn %+v", sessionEv, tr)
	}
	if n := e.count(`SELECT count(*) FROM chat_messages`); n != before+1 {
		t.Fatalf("%d messages recorded", n-before)
	}
	var actor, auditText, auditRole string
	if err := e.pool.QueryRow(context.Background(), `SELECT actor, after->>'text', after->>'token_role' FROM audit_log
		WHERE action = 'chat.message' AND correlation_id = $1 AND after->>'message_id' = $2`, tr.SessionID, tr.MessageID).
		Scan(&actor, &auditText, &auditRole); err != nil {
		t.Fatalf("audit row of the message: %v", err)
	}
	if actor != "op" || auditText != tr.Message || auditRole != "operator" {
		t.Fatalf("audit row: actor %q text %q role %q", actor, auditText, auditRole)
	}
	var payload map[string]any
	var raw []byte
	if err := e.pool.QueryRow(context.Background(), `SELECT actor, payload FROM events WHERE type = 'chat.message' AND correlation_id = $1`,
		tr.SessionID).Scan(&actor, &raw); err != nil {
		t.Fatalf("chat.message event: %v", err)
	}
	if err := json.Unmarshal(raw, &payload); err != nil || actor != "op" || payload["message_id"] != tr.MessageID || payload["token_role"] != "operator" {
		t.Fatalf("chat.message event: actor %q payload %s (%v)", actor, raw, err)
	}
	if _, ok := payload["text"]; ok {
		t.Fatalf("the chat.message event, which every reader sees, carries the text: %s", raw)
	}

	// The session continues, by any token that may write; the record keeps the role.
	_, evs = e.agent.chat(map[string]any{"session_id": tr.SessionID, "message": "status?"})
	if names(evs) != "session,delta,tool_use,tool_result,delta,done" {
		t.Fatalf("second turn: events %s", names(evs))
	}
	tr2 := <-turns
	if tr2.SessionID != tr.SessionID || tr2.Actor != "nomos" || tr2.Role != "agent" || tr2.MessageID == tr.MessageID {
		t.Fatalf("second turn %+v", tr2)
	}
	if n := e.count(`SELECT count(*) FROM chat_messages WHERE session_id = $1`, tr.SessionID); n != 2 {
		t.Fatalf("%d messages in the session", n)
	}
	// A chosen session id of the full alphabet, and a message at the limit, pass.
	long := strings.Repeat("é", 8<<10) // 16 KiB of UTF-8
	_, evs = e.operator.chat(map[string]any{"session_id": "mcp:a.b_c@d/e-1", "message": long})
	if len(evs) == 0 || names(evs) != "session,delta,tool_use,tool_result,delta,done" {
		t.Fatalf("chosen session: events %s", names(evs))
	}
	if tr3 := <-turns; tr3.SessionID != "mcp:a.b_c@d/e-1" || tr3.Message != long {
		t.Fatalf("chosen session: turn %+v", tr3.SessionID)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestChatRefusals: what is refused before the record is a problem document, records nothing
// and never reaches the agent.
func TestChatRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(e *env) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e.t.Errorf("a refused chat reached the agent: %s %s", r.Method, r.URL)
			problem(w, http.StatusTeapot, "no")
		})
	})
	cases := []struct {
		name   string
		c      *client
		body   any
		status int
		field  string
	}{
		{"no token", e.anon, map[string]any{"message": "hi"}, http.StatusUnauthorized, ""},
		{"readonly", e.readonly, map[string]any{"message": "yes"}, http.StatusForbidden, ""},
		{"empty", e.operator, map[string]any{"message": ""}, http.StatusUnprocessableEntity, "message"},
		{"white space", e.operator, map[string]any{"message": " \n\t "}, http.StatusUnprocessableEntity, "message"},
		{"missing", e.operator, map[string]any{"session_id": "s-1"}, http.StatusUnprocessableEntity, "message"},
		{"over 16 KiB", e.operator, map[string]any{"message": strings.Repeat("x", 16<<10+1)}, http.StatusUnprocessableEntity, "message"},
		{"NUL", e.operator, map[string]any{"message": "yes\u0000"}, http.StatusUnprocessableEntity, "message"},
		{"bad session", e.operator, map[string]any{"session_id": "has space", "message": "hi"}, http.StatusUnprocessableEntity, "session_id"},
		{"long session", e.operator, map[string]any{"session_id": strings.Repeat("s", 129), "message": "hi"}, http.StatusUnprocessableEntity, "session_id"},
		{"unknown field", e.operator, map[string]any{"message": "hi", "role": "operator"}, http.StatusUnprocessableEntity, "role"},
		{"not JSON", e.operator, "{", http.StatusBadRequest, ""},
	}
	for _, c := range cases {
		r, _ := c.c.chat(c.body)
		p := r.problem(t, c.status)
		if p.Field != c.field {
			t.Errorf("%s: field %q, want %q (%+v)", c.name, p.Field, c.field, p)
		}
	}
	if n := e.count(`SELECT (SELECT count(*) FROM chat_messages) + (SELECT count(*) FROM audit_log) + (SELECT count(*) FROM events)`); n != 0 {
		t.Fatalf("refused chats wrote %d rows", n)
	}
}

// TestChatStreamsAsItComes: every event reaches the client before the agent writes the next
// (the fake agent waits for the client to have read each one), in order.
func TestChatStreamsAsItComes(t *testing.T) {
	t.Parallel()
	const n = 5
	step := make(chan struct{})
	e := newEnv(t, func(e *env) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tr, err := decodeTurn(r)
			if err != nil {
				problem(w, http.StatusBadRequest, err.Error())
				return
			}
			s := startSSE(w)
			_ = s.event("session", map[string]string{"session_id": tr.SessionID, "message_id": tr.MessageID})
			for i := range n + 1 {
				select {
				case <-step:
				case <-time.After(20 * time.Second):
					_ = s.event("error", map[string]string{"message": fmt.Sprintf("the client never read event %d: the api held it back", i)})
					return
				}
				if i == n {
					_ = s.event("done", map[string]string{"finish_reason": "stop"})
					return
				}
				_ = s.event("delta", map[string]string{"text": fmt.Sprint(i)})
			}
		})
	})
	hr := e.operator.open(context.Background(), map[string]any{"message": "hi"})
	defer hr.Body.Close()
	if hr.StatusCode != http.StatusOK || hr.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", hr.StatusCode, hr.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(hr.Body)
	if ev, err := readEvent(br); err != nil || ev.Name != "session" {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	for i := range n {
		step <- struct{}{}
		ev, err := readEvent(br)
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Text string }
		ev.decode(t, &d)
		if ev.Name != "delta" || d.Text != fmt.Sprint(i) {
			t.Fatalf("event %d: %s %s", i, ev.Name, ev.Data)
		}
	}
	step <- struct{}{}
	if ev, err := readEvent(br); err != nil || ev.Name != "done" {
		t.Fatalf("last event %+v, %v", ev, err)
	}
	if ev, err := readEvent(br); err != io.EOF {
		t.Fatalf("after done: %+v, %v; want the end of the stream", ev, err)
	}
}

// TestChatAgentFailures: an agent that cannot be reached, refuses the turn, answers something
// else than a stream, or ends its stream without done: the client still reads one stream
// shape, session first and done (finish_reason error) last, and the message stays recorded.
func TestChatAgentFailures(t *testing.T) {
	t.Parallel()
	down := newEnv(t, func(*env) http.Handler { return nil })
	_, evs := down.operator.chat(map[string]any{"message": "hello?"})
	checkFailed(t, "agent down", evs, "unreachable")
	var session struct {
		SessionID string `json:"session_id"`
		MessageID string `json:"message_id"`
	}
	evs[0].decode(t, &session)
	if n := down.count(`SELECT count(*) FROM chat_messages WHERE id = $1 AND session_id = $2`, session.MessageID, session.SessionID); n != 1 {
		t.Fatalf("the message of a turn the agent never saw is not recorded (%+v)", session)
	}

	e := newEnv(t, func(e *env) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tr, err := decodeTurn(r)
			if err != nil {
				problem(w, http.StatusBadRequest, err.Error())
				return
			}
			switch tr.Message {
			case "refuse":
				problem(w, http.StatusServiceUnavailable, "no model provider is configured")
			case "json":
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok":true}`)
			case "cut":
				s := startSSE(w)
				_ = s.event("session", map[string]string{"session_id": tr.SessionID, "message_id": tr.MessageID})
				_ = s.event("delta", map[string]string{"text": "half an ans"})
				_, _ = io.WriteString(w, "event: delta\ndata: {\"te")
			}
		})
	})
	_, evs = e.operator.chat(map[string]any{"message": "refuse"})
	checkFailed(t, "refused", evs, "503", "no model provider is configured")
	_, evs = e.operator.chat(map[string]any{"message": "json"})
	checkFailed(t, "not a stream", evs, "not an event stream")
	_, evs = e.operator.chat(map[string]any{"message": "cut"})
	if names(evs) != "session,delta,error,done" {
		t.Fatalf("cut stream: events %s", names(evs))
	}
	checkFailed(t, "cut", []event{evs[0], evs[2], evs[3]}, "ended before the turn was done")
}

// checkFailed: session, error (naming each of want), done with finish_reason error.
func checkFailed(t *testing.T, name string, evs []event, want ...string) {
	t.Helper()
	if names(evs) != "session,error,done" {
		t.Fatalf("%s: events %s, want session,error,done", name, names(evs))
	}
	var s struct {
		SessionID string `json:"session_id"`
		MessageID string `json:"message_id"`
	}
	evs[0].decode(t, &s)
	if s.SessionID == "" || !ids.IsUUID(s.MessageID) {
		t.Fatalf("%s: session event %s", name, evs[0].Data)
	}
	var msg struct{ Message string }
	evs[1].decode(t, &msg)
	for _, w := range want {
		if !strings.Contains(msg.Message, w) {
			t.Errorf("%s: error %q does not say %q", name, msg.Message, w)
		}
	}
	var done struct {
		FinishReason string `json:"finish_reason"`
	}
	evs[2].decode(t, &done)
	if done.FinishReason != "error" {
		t.Fatalf("%s: done %s", name, evs[2].Data)
	}
}

// TestChatClientLeaves: a client that disconnects mid-turn does not stop it. The api keeps
// reading the agent's stream to its end (far more than socket buffers hold, so an api that
// stopped reading would block the agent's writes, and one that hung up would fail them) and
// discards it.
func TestChatClientLeaves(t *testing.T) {
	t.Parallel()
	left := make(chan struct{})
	type outcome struct {
		events      int
		writeErr    error
		hungUp      error
		lastWritten string
	}
	finished := make(chan outcome, 1)
	e := newEnv(t, func(e *env) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tr, err := decodeTurn(r)
			if err != nil {
				problem(w, http.StatusBadRequest, err.Error())
				return
			}
			s := startSSE(w)
			_ = s.event("session", map[string]string{"session_id": tr.SessionID, "message_id": tr.MessageID})
			_ = s.event("delta", map[string]string{"text": "first"})
			<-left
			_ = s.rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			big := strings.Repeat("x", 8<<10)
			var o outcome
			for i := 0; i < 1024 && o.writeErr == nil; i++ { // 8 MiB
				if o.writeErr = s.event("delta", map[string]string{"text": big}); o.writeErr == nil {
					o.events++
				}
			}
			if o.writeErr == nil {
				if o.writeErr = s.event("done", map[string]string{"finish_reason": "stop"}); o.writeErr == nil {
					o.lastWritten = "done"
				}
			}
			o.hungUp = r.Context().Err()
			finished <- o
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	hr := e.operator.open(ctx, map[string]any{"message": "a long job"})
	br := bufio.NewReader(hr.Body)
	for _, want := range []string{"session", "delta"} {
		if ev, err := readEvent(br); err != nil || ev.Name != want {
			t.Fatalf("want %s, got %+v %v", want, ev, err)
		}
	}
	cancel()
	hr.Body.Close()
	close(left)
	select {
	case o := <-finished:
		if o.writeErr != nil || o.lastWritten != "done" || o.events != 1024 {
			t.Fatalf("after the client left the agent wrote %d events and then failed: %v (last %q)", o.events, o.writeErr, o.lastWritten)
		}
		if o.hungUp != nil {
			t.Fatalf("the api hung up on the agent: %v", o.hungUp)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the agent never finished writing its turn: the api stopped reading")
	}
}

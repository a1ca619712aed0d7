package chat_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sseEvent is one server-sent event of a chat stream.
type sseEvent struct {
	Name string
	Data json.RawMessage
	At   time.Time
}

// turn is what a client saw of one POST /api/v1/chat.
type turn struct {
	Status    int
	Body      string // a non-stream answer (a refusal before the message was recorded)
	Events    []sseEvent
	SessionID string
	MessageID string
	Finish    string   // the done event's finish_reason
	Errors    []string // the error events' messages
	Start     time.Time
	// FirstDelta is when the client read the first delta event (zero when none came).
	FirstDelta time.Time
	End        time.Time
}

// names are the event names in order.
func (t turn) names() []string {
	out := make([]string, len(t.Events))
	for i, e := range t.Events {
		out[i] = e.Name
	}
	return out
}

// text is the turn's streamed text (its deltas joined).
func (t turn) text() string {
	var b strings.Builder
	for _, e := range t.Events {
		if e.Name == "delta" {
			var d struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(e.Data, &d)
			b.WriteString(d.Text)
		}
	}
	return b.String()
}

// of lists the events named name.
func (t turn) of(name string) []sseEvent {
	var out []sseEvent
	for _, e := range t.Events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

type chatOpts struct {
	// LeaveAfterFirstDelta closes the connection once the first delta arrived (a client that
	// goes away mid-stream).
	LeaveAfterFirstDelta bool
	// NoSession sends no session_id (the api makes one).
	NoSession bool
}

// chat sends one operator message with token and reads the stream to its done event.
func (s *stack) chat(tb testing.TB, token, session, message string) turn {
	tb.Helper()
	return s.chatWith(tb, token, session, message, chatOpts{})
}

func (s *stack) chatWith(tb testing.TB, token, session, message string, o chatOpts) turn {
	tb.Helper()
	body := map[string]string{"message": message}
	if !o.NoSession {
		body["session_id"] = session
	}
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.apiURL+"/api/v1/chat", bytes.NewReader(b))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	t := turn{Start: time.Now()}
	resp, err := httpClient.Do(req)
	if err != nil {
		tb.Fatalf("POST /api/v1/chat: %v", err)
	}
	defer resp.Body.Close()
	t.Status = resp.StatusCode
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(resp.Body)
		t.Body, t.End = string(raw), time.Now()
		return t
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var name string
	var data []byte
	for {
		line, err := br.ReadString('\n')
		if line = strings.TrimRight(line, "\r\n"); line != "" || err == nil {
			switch {
			case strings.HasPrefix(line, "event:"):
				name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				if len(data) > 0 {
					data = append(data, '\n')
				}
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " ")...)
			case line == "" && (name != "" || len(data) > 0):
				e := sseEvent{Name: name, Data: json.RawMessage(bytes.Clone(data)), At: time.Now()}
				t.Events = append(t.Events, e)
				name, data = "", data[:0]
				switch e.Name {
				case "session":
					var v struct {
						SessionID string `json:"session_id"`
						MessageID string `json:"message_id"`
					}
					_ = json.Unmarshal(e.Data, &v)
					t.SessionID, t.MessageID = v.SessionID, v.MessageID
				case "delta":
					if t.FirstDelta.IsZero() {
						t.FirstDelta = e.At
					}
					if o.LeaveAfterFirstDelta {
						t.End = time.Now()
						return t // the deferred Close drops the connection
					}
				case "error":
					var v struct {
						Message string `json:"message"`
					}
					_ = json.Unmarshal(e.Data, &v)
					t.Errors = append(t.Errors, v.Message)
				case "done":
					var v struct {
						FinishReason string `json:"finish_reason"`
					}
					_ = json.Unmarshal(e.Data, &v)
					t.Finish = v.FinishReason
					t.End = time.Now()
					return t
				}
			}
		}
		if err != nil {
			t.End = time.Now()
			tb.Errorf("the chat stream of %q ended without done: %v (events %v)", message, err, t.names())
			return t
		}
	}
}

package loop

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/agent/internal/llm"
	"github.com/oikos-hq/oikos/testkit/llmsim"
)

const script = `
model: m
chunk_size: 5
rules:
  - name: parallel
    when: {user_matches: "parallel"}
    reply:
      content: "Looking at both."
      tool_calls:
        - {name: get_entity, arguments: {ref: "lxc:jellyfin"}}
        - {name: run, arguments: {target: "lxc:a", command: "echo \"quoted\" && ls", purpose: "p"}}
  - name: empty
    when: {user_matches: "empty"}
    reply: {empty: true}
  - name: refuse
    when: {user_matches: "refuse"}
    reply: {refusal: "I can't help with that"}
  - name: fail
    when: {user_matches: "fail"}
    reply: {error: {status: 500, message: "provider down"}}
`

func newModelLoop(t *testing.T) *Loop {
	t.Helper()
	s, err := llmsim.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := llmsim.Start(t, s)
	return &Loop{cfg: Config{Model: "m", Backoff: []time.Duration{time.Millisecond}}, model: llm.New(llm.Config{BaseURL: base, Model: "m"}), log: zerolog.Nop()}
}

type events struct {
	mu sync.Mutex
	ev []Event
}

func (e *events) sink(ev Event) { e.mu.Lock(); e.ev = append(e.ev, ev); e.mu.Unlock() }

func (e *events) text() string {
	var b strings.Builder
	for _, ev := range e.ev {
		if ev.Name == "delta" {
			b.WriteString(ev.Data.(map[string]any)["text"].(string))
		}
	}
	return b.String()
}

func user(s string) []openai.ChatCompletionMessage {
	return []openai.ChatCompletionMessage{{Role: "system", Content: "sys"}, {Role: "user", Content: s}}
}

// Text arrives as several deltas; parallel tool calls are rebuilt by index with their
// arguments intact.
func TestStreamRebuildsParallelToolCalls(t *testing.T) {
	t.Parallel()
	l := newModelLoop(t)
	var e events
	a, err := l.ask(context.Background(), user("parallel please"), []openai.Tool{{Type: "function", Function: &openai.FunctionDefinition{Name: "x", Parameters: []byte(`{"type":"object"}`)}}}, true, e.sink)
	if err != nil {
		t.Fatal(err)
	}
	if e.text() != "Looking at both." || len(e.ev) < 3 {
		t.Fatalf("deltas: %q in %d events", e.text(), len(e.ev))
	}
	if len(a.Calls) != 2 || a.Calls[0].Name != "get_entity" || a.Calls[1].Name != "run" ||
		a.Calls[1].Arguments != `{"target":"lxc:a","command":"echo \"quoted\" \u0026\u0026 ls","purpose":"p"}` && a.Calls[1].Arguments != `{"target":"lxc:a","command":"echo \"quoted\" && ls","purpose":"p"}` {
		t.Fatalf("calls: %+v", a.Calls)
	}
	if a.Finish != "tool_calls" {
		t.Fatalf("finish: %s", a.Finish)
	}
}

// An empty answer and a refusal are retried, then surfaced with the finish reason; a
// provider error is surfaced as the model not answering.
func TestEmptyRefusalAndErrorSurfaced(t *testing.T) {
	t.Parallel()
	l := newModelLoop(t)
	for msg, want := range map[string]string{
		"empty":  "empty or unusable response (finish_reason=stop)",
		"refuse": "refused (finish_reason=content_filter): I can't help with that",
		"fail":   "did not answer",
	} {
		var e events
		_, err := l.ask(context.Background(), user(msg), nil, false, e.sink)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", msg, err, want)
		}
		if e.text() != "" {
			t.Errorf("%s: text shown: %q", msg, e.text())
		}
	}
}

func TestAskUnderWireModes(t *testing.T) {
	t.Parallel()
	s, err := llmsim.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	defs := []openai.Tool{
		{Type: "function", Function: &openai.FunctionDefinition{Name: "get_entity", Parameters: []byte(`{"type":"object"}`)}},
		{Type: "function", Function: &openai.FunctionDefinition{Name: "run", Parameters: []byte(`{"type":"object"}`)}},
	}
	for _, mode := range llmsim.ModeNames() {
		w := llmsim.Modes[mode]
		if w.Refusing() {
			continue
		}
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			base, _ := llmsim.Start(t, s, llmsim.Options{Wire: w})
			l := &Loop{cfg: Config{Model: "m", Backoff: []time.Duration{time.Millisecond}}, log: zerolog.Nop(),
				model: llm.New(llm.Config{BaseURL: base, Model: "m", RetryBase: time.Millisecond, StatusAfter: 50 * time.Millisecond})}
			var e events
			a, err := l.ask(context.Background(), user("parallel please"), defs, true, e.sink)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Calls) != 2 || a.Calls[0].Name != "get_entity" || a.Calls[1].Name != "run" || a.Finish != "tool_calls" {
				t.Fatalf("calls %+v finish %s", a.Calls, a.Finish)
			}
			shown := e.text()
			for _, bad := range []string{"LLMSIM-THOUGHT", "<think>", "<tool_call>", "lxc:thought"} {
				if strings.Contains(shown, bad) || strings.Contains(a.Content, bad) {
					t.Fatalf("%q reached the operator: %q / %q", bad, shown, a.Content)
				}
			}
			statuses := 0
			for _, ev := range e.ev {
				if ev.Name == "status" {
					statuses++
				}
			}
			if (w.Flaky != 0 || w.FirstByteDelay > 0) != (statuses > 0) {
				t.Fatalf("%d status events", statuses)
			}
		})
	}
}

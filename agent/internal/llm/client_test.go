package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

const script = `
model: m
chunk_size: 3
rules:
  - name: parallel
    when: {user_matches: "parallel"}
    reply:
      content: "Looking at both <b>now</b>."
      tool_calls:
        - {name: get_entity, arguments: {ref: "lxc:jellyfin"}}
        - {name: run, arguments: {target: "lxc:a", command: "echo \"quoted\" && ls <x>", purpose: "p"}}
  - name: single
    when: {user_matches: "single"}
    reply:
      tool_calls:
        - {name: get_health_summary, arguments: {health: "down"}}
  - name: prose
    reply: {content: "All 12 services are up; x < y and {\"a\": 1} is JSON."}
`

func tools(names ...string) []openai.Tool {
	var out []openai.Tool
	for _, n := range names {
		out = append(out, openai.Tool{Type: "function", Function: &openai.FunctionDefinition{Name: n, Parameters: json.RawMessage(`{"type":"object"}`)}})
	}
	return out
}

func user(s string) []openai.ChatCompletionMessage {
	return []openai.ChatCompletionMessage{{Role: "system", Content: "sys"}, {Role: "user", Content: s}}
}

func client(t *testing.T, w llmsim.Wire, cfg Config) *Client {
	t.Helper()
	s, err := llmsim.Parse([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	base, _ := llmsim.Start(t, s, llmsim.Options{Wire: w})
	cfg.BaseURL, cfg.Model = base, "m"
	if cfg.RetryBase == 0 {
		cfg.RetryBase = time.Millisecond
	}
	return New(cfg)
}

type seen struct {
	text   strings.Builder
	status []Status
}

func (s *seen) events() Events {
	return Events{Text: func(t string) { s.text.WriteString(t) }, Status: func(st Status) { s.status = append(s.status, st) }}
}

var allTools = tools("get_entity", "run", "get_health_summary")

// Every wire mode that answers gives the same answer: the calls with their arguments intact,
// the text without reasoning or text calls, both in the answer and in what streamed.
func TestEveryModeGivesTheSameAnswer(t *testing.T) {
	t.Parallel()
	for _, name := range llmsim.ModeNames() {
		w := llmsim.Modes[name]
		if w.Refusing() {
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := client(t, w, Config{})
			var s seen
			a, err := c.Stream(context.Background(), Request{Messages: user("parallel please"), Tools: allTools}, s.events())
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Calls) != 2 || a.Calls[0].Name != "get_entity" || a.Calls[1].Name != "run" {
				t.Fatalf("calls: %+v", a.Calls)
			}
			var args map[string]string
			if err := json.Unmarshal([]byte(a.Calls[1].Arguments), &args); err != nil || args["command"] != `echo "quoted" && ls <x>` {
				t.Fatalf("arguments: %s (%v)", a.Calls[1].Arguments, err)
			}
			if a.Calls[0].ID == "" || a.Calls[0].ID == a.Calls[1].ID {
				t.Fatalf("ids: %q %q", a.Calls[0].ID, a.Calls[1].ID)
			}
			want := "Looking at both <b>now</b>."
			if w.TextCalls == "json" {
				want = "" // the format answers the calls alone
			}
			if a.Content != want || s.text.String() != want {
				t.Fatalf("content %q, streamed %q, want %q", a.Content, s.text.String(), want)
			}
			if w.Reasoning != "" && !strings.Contains(a.Reasoning, "LLMSIM-THOUGHT") {
				t.Fatalf("reasoning not kept apart: %q", a.Reasoning)
			}
			if w.Flaky != 0 && a.Attempts != 2 {
				t.Fatalf("attempts %d, want 2", a.Attempts)
			}

			// One call alone, no content.
			s = seen{}
			a, err = c.Stream(context.Background(), Request{Messages: user("single"), Tools: allTools}, s.events())
			if err != nil || len(a.Calls) != 1 || a.Calls[0].Arguments != `{"health":"down"}` || a.Content != "" || s.text.String() != "" {
				t.Fatalf("single: %+v %q %v", a, s.text.String(), err)
			}

			// Prose with JSON and a < in it stays prose.
			s = seen{}
			a, err = c.Stream(context.Background(), Request{Messages: user("how is it"), Tools: allTools}, s.events())
			prose := `All 12 services are up; x < y and {"a": 1} is JSON.`
			if err != nil || len(a.Calls) != 0 || a.Content != prose || s.text.String() != prose || strings.Contains(a.Content, "LLMSIM") {
				t.Fatalf("prose: %+v %q %v", a, s.text.String(), err)
			}
		})
	}
}

// A server refusing tools is an error naming its message and what to change.
func TestToolsRefused(t *testing.T) {
	t.Parallel()
	for mode, fix := range map[string]string{
		"refuse-tools-ollama":   "does not support tools",
		"refuse-tools-llamacpp": "start llama-server with --jinja",
		"refuse-tools-vllm":     "--enable-auto-tool-choice",
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := client(t, llmsim.Modes[mode], Config{})
			_, err := c.Stream(context.Background(), Request{Messages: user("single"), Tools: allTools}, Events{})
			var tr *ToolsRefused
			if !errors.As(err, &tr) || !strings.Contains(err.Error(), fix) || !strings.Contains(err.Error(), "Nomos needs tools") {
				t.Fatalf("%v", err)
			}
			// Without tools the same server answers.
			if a, err := c.Stream(context.Background(), Request{Messages: user("how")}, Events{}); err != nil || a.Content == "" {
				t.Fatalf("without tools: %+v %v", a, err)
			}
		})
	}
}

// A slow first byte is waited for, with a status, up to the first-byte timeout.
func TestFirstByte(t *testing.T) {
	t.Parallel()
	slow := llmsim.Wire{FirstByteDelay: 400 * time.Millisecond}
	c := client(t, slow, Config{FirstByte: 5 * time.Second, StatusAfter: 50 * time.Millisecond})
	var s seen
	a, err := c.Stream(context.Background(), Request{Messages: user("how")}, s.events())
	if err != nil || a.Content == "" || len(s.status) == 0 || s.status[0].State != "waiting" {
		t.Fatalf("%+v %v %+v", a, err, s.status)
	}
	c = client(t, slow, Config{FirstByte: 50 * time.Millisecond})
	_, err = c.Stream(context.Background(), Request{Messages: user("how")}, Events{})
	if !errors.Is(err, ErrFirstByte) || !strings.Contains(err.Error(), "OIKOS_LLM_FIRST_BYTE_TIMEOUT") {
		t.Fatalf("%v", err)
	}
}

// Retries stop at the limit and say why; a status tells each retry.
func TestRetriesExhausted(t *testing.T) {
	t.Parallel()
	c := client(t, llmsim.Wire{Flaky: 429}, Config{Retries: -1})
	_, err := c.Stream(context.Background(), Request{Messages: user("how")}, Events{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 429 || !strings.Contains(err.Error(), "Rate limit") {
		t.Fatalf("%v", err)
	}
	c = client(t, llmsim.Wire{Flaky: 503, RetryAfter: 1}, Config{})
	var s seen
	start := time.Now()
	if _, err := c.Stream(context.Background(), Request{Messages: user("how")}, s.events()); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < time.Second || len(s.status) != 1 || s.status[0].State != "retrying" || s.status[0].RetryIn < time.Second {
		t.Fatalf("Retry-After not honoured: %s %+v", time.Since(start), s.status)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	c := New(Config{RetryBase: time.Second, RetryMax: 8 * time.Second})
	for n := 1; n <= 6; n++ {
		d := c.backoff(n, 0)
		max := time.Second << (n - 1)
		if max > 8*time.Second {
			max = 8 * time.Second
		}
		if d < max/2 || d > max {
			t.Errorf("retry %d: %s not in [%s, %s]", n, d, max/2, max)
		}
	}
	if d := c.backoff(1, 20*time.Second); d < 20*time.Second || d > 22*time.Second {
		t.Errorf("Retry-After 20s: %s", d)
	}
	if retryAfter("Wed, 21 Oct 2015 07:28:00 GMT", time.Date(2015, 10, 21, 7, 27, 0, 0, time.UTC)) != time.Minute {
		t.Error("HTTP date")
	}
}

func TestErrorShapes(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"error":{"message":"m1","type":"t","code":"c"}}`:                                          "m1",
		`{"error":{"code":400,"message":"the request exceeds","type":"exceed_context_size_error"}}`: "the request exceeds",
		`{"error":"model 'x' not found"}`:                                                           "model 'x' not found",
		`{"object":"error","message":"m4","type":"BadRequestError","code":400}`:                     "m4",
		`<html>bad gateway</html>`:                                                                  "<html>bad gateway</html>",
	} {
		if e := parseAPIError(400, nil, []byte(body)); e.Message != want {
			t.Errorf("%s: %q", body, e.Message)
		}
	}
}

// The filter holds what may be a tag, however the content is cut.
func TestTextFilterAnyCut(t *testing.T) {
	t.Parallel()
	in := "<think>plan {\"name\":\"run\",\"arguments\":{}}</think>\n\nDone <i>. <tool_call>\n{\"name\": \"run\", \"arguments\": {\"target\": \"lxc:a\"}}\n</tool_call>"
	for size := 1; size <= len(in); size++ {
		r := newReader(true, map[string]bool{"run": true}, nil)
		var shown strings.Builder
		r.text.emit = func(s string) { shown.WriteString(s) }
		for i := 0; i < len(in); i += size {
			r.text.write(in[i:min(i+size, len(in))])
		}
		a := r.finish()
		if shown.String() != "Done <i>." || len(a.Calls) != 1 || a.Calls[0].Arguments != `{"target": "lxc:a"}` || !strings.Contains(a.Reasoning, "plan") {
			t.Fatalf("cut %d: shown %q, %+v", size, shown.String(), a)
		}
	}
}

// A text call of a tool that was not offered stays text; so does JSON after prose.
func TestTextCallsOnlyOfferedTools(t *testing.T) {
	t.Parallel()
	r := newReader(true, map[string]bool{"run": true}, nil)
	r.text.write(`{"name": "delete_everything", "arguments": {}}`)
	if a := r.finish(); len(a.Calls) != 0 || a.Content == "" {
		t.Fatalf("%+v", a)
	}
	r = newReader(false, nil, nil)
	r.text.write(`{"name": "run", "arguments": {}}`)
	if a := r.finish(); len(a.Calls) != 0 || a.Content == "" {
		t.Fatalf("no tools offered: %+v", a)
	}
	r = newReader(true, map[string]bool{"run": true}, nil)
	r.text.write("```json\n{\"name\": \"run\", \"parameters\": {\"target\": \"x\"}}\n```")
	if a := r.finish(); len(a.Calls) != 1 || a.Calls[0].Arguments != `{"target": "x"}` || a.Content != "" {
		t.Fatalf("fenced: %+v", a)
	}
	// A lone </think> (the template opened the block) ends the reasoning.
	r = newReader(false, nil, nil)
	r.text.write("thinking hard</think>\n\nThe answer.")
	if a := r.finish(); a.Content != "The answer." || a.Reasoning != "thinking hard" {
		t.Fatalf("lone close: %+v", a)
	}
}

// A long reasoning block streamed a token at a time is read in linear time.
func TestLongThinkIsLinear(t *testing.T) {
	t.Parallel()
	r := newReader(true, nil, nil)
	r.text.write("<think>")
	for i := 0; i < 200000; i++ {
		r.text.write("tok ")
	}
	r.text.write("</think>answer")
	if a := r.finish(); a.Content != "answer" || len(a.Reasoning) != 800000 {
		t.Fatalf("%q %d", a.Content, len(a.Reasoning))
	}
}

// The context-exceeded refusals of llama-server, vLLM and OpenAI, as their sources show them
// (docs/llm-providers.md), are recognised with the window and the prompt's size.
func TestContextExceededRecognised(t *testing.T) {
	for name, c := range map[string]struct {
		status         int
		body           string
		window, prompt int
	}{
		"llama-server": {400, `{"error":{"code":400,"message":"request (4476 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":4476,"n_ctx":4096}}`, 4096, 4476},
		"vllm":         {400, `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, 16384, 112946},
		"openai":       {400, `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 8227 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, 8192, 8227},
	} {
		ce, ok := AsContextExceeded(fmt.Errorf("wrapped: %w", parseAPIError(c.status, http.Header{}, []byte(c.body))))
		if !ok || ce.Window != c.window || ce.Prompt != c.prompt {
			t.Errorf("%s: %v %+v", name, ok, ce)
		}
	}
	if _, ok := AsContextExceeded(parseAPIError(400, http.Header{}, []byte(`{"error":{"message":"bad tools"}}`))); ok {
		t.Error("another 400 taken for a context-exceeded refusal")
	}
}

// A call written as text may name a registered tool the context budget did not offer
// (Request.Callable); a name neither offered nor callable stays text.
func TestTextCallsOfCallableTools(t *testing.T) {
	t.Parallel()
	c := client(t, llmsim.Modes["hermes-text"], Config{})
	only := []openai.Tool{allTools[0]}
	a, err := c.Stream(context.Background(), Request{Messages: user("parallel please"), Tools: only, Callable: []string{"get_entity", "run"}}, Events{})
	if err != nil || len(a.Calls) != 2 {
		t.Fatalf("callable: %+v %v", a, err)
	}
	a, err = c.Stream(context.Background(), Request{Messages: user("parallel please"), Tools: only}, Events{})
	if err != nil || len(a.Calls) != 0 || !strings.Contains(a.Content, "<tool_call>") {
		t.Fatalf("not callable: %+v %v", a, err)
	}
}

package llmsim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

const wireScript = `
model: m
chunk_size: 4
rules:
  - when: {user_matches: "two"}
    reply:
      content: "Both."
      tool_calls:
        - {name: get_entity, arguments: {ref: "lxc:a"}}
        - {name: run, arguments: {target: "lxc:a", command: "ls"}}
  - reply: {content: "plain"}
`

// wirePost sends a streamed request with tools and returns the status, headers and data lines.
func wirePost(t *testing.T, base, user string) (int, http.Header, []string) {
	t.Helper()
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + user +
		`"}],"tools":[{"type":"function","function":{"name":"get_entity","parameters":{}}},{"type":"function","function":{"name":"run","parameters":{}}}]}`
	resp, err := http.Post(base+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			lines = append(lines, d)
		}
	}
	if resp.StatusCode != 200 {
		lines = []string{string(data)}
	}
	return resp.StatusCode, resp.Header, lines
}

func serve(t *testing.T, w llmsim.Wire) string {
	t.Helper()
	base, _ := llmsim.Start(t, mustParse(t, wireScript), llmsim.Options{Wire: w})
	return base
}

func TestWireModes(t *testing.T) {
	t.Parallel()
	all := func(lines []string) string { return strings.Join(lines, "\n") }

	// Whole calls at index 0, Ollama's ids, finish stop.
	_, _, lines := wirePost(t, serve(t, llmsim.Wire{ToolCalls: "whole", IndexZero: true, IDs: "ollama", FinishStop: true}), "two")
	s := all(lines)
	if strings.Count(s, `"index":0,"id":"call_`) != 2 || strings.Contains(s, `"index":1`) || !strings.Contains(s, `"arguments":"{\"target\":\"lxc:a\",\"command\":\"ls\"}"`) ||
		!strings.Contains(s, `"finish_reason":"stop"`) {
		t.Fatalf("whole calls:\n%s", s)
	}
	// No usage.
	_, _, lines = wirePost(t, serve(t, llmsim.Wire{NoUsage: true}), "two")
	if strings.Contains(all(lines), "usage") {
		t.Fatalf("usage sent:\n%s", all(lines))
	}
	// Hermes text: calls in the content, no tool_calls, finish stop.
	_, _, lines = wirePost(t, serve(t, llmsim.Modes["hermes-text"]), "two")
	var content strings.Builder
	for _, l := range lines {
		var c struct {
			Choices []struct {
				Delta struct {
					Content   string `json:"content"`
					ToolCalls []any  `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(l), &c) == nil && len(c.Choices) > 0 {
			content.WriteString(c.Choices[0].Delta.Content)
			if len(c.Choices[0].Delta.ToolCalls) > 0 {
				t.Fatal("hermes-text sent tool_calls")
			}
		}
	}
	if content.String() != "Both.\n<tool_call>\n{\"name\":\"get_entity\",\"arguments\":{\"ref\":\"lxc:a\"}}\n</tool_call>\n<tool_call>\n{\"name\":\"run\",\"arguments\":{\"target\":\"lxc:a\",\"command\":\"ls\"}}\n</tool_call>" {
		t.Fatalf("hermes content: %q", content.String())
	}
	// Reasoning field.
	_, _, lines = wirePost(t, serve(t, llmsim.Modes["reasoning"]), "two")
	if !strings.Contains(all(lines), `"reasoning":"LLMS`) {
		t.Fatalf("reasoning:\n%s", all(lines))
	}
	// Flaky: the first attempt refused with Retry-After, the same request then answered.
	base := serve(t, llmsim.Modes["flaky-429-retry-after"])
	if st, h, _ := wirePost(t, base, "two"); st != 429 || h.Get("Retry-After") != "1" {
		t.Fatalf("flaky: %d %v", st, h)
	}
	if st, _, _ := wirePost(t, base, "two"); st != 200 {
		t.Fatalf("retry: %d", st)
	}
	// Tools refused in each server's words; no tools, an answer.
	for mode, want := range map[string]string{"refuse-tools-ollama": "does not support tools", "refuse-tools-llamacpp": "--jinja", "refuse-tools-vllm": `"object":"error"`} {
		if st, _, l := wirePost(t, serve(t, llmsim.Modes[mode]), "two"); st/100 != 4 && st != 500 || !strings.Contains(all(l), want) {
			t.Errorf("%s: %d %s", mode, st, all(l))
		}
	}
	// Slow first byte.
	base = serve(t, llmsim.Wire{FirstByteDelay: 200 * time.Millisecond})
	start := time.Now()
	wirePost(t, base, "x")
	if time.Since(start) < 200*time.Millisecond {
		t.Fatal("no delay")
	}
	if _, err := llmsim.ParseMode("ollama+no-usage"); err != nil {
		t.Fatal(err)
	}
	if _, err := llmsim.ParseMode("kobold"); err == nil || !strings.Contains(err.Error(), "known:") {
		t.Fatal(err)
	}
}

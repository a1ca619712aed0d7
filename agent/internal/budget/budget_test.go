package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// testTools are 37 tools of about the registry's sizes (15 KB of schemas in all).
func testTools() []openai.Tool {
	names := []string{"get_output", "set_goal", "propose_plan", "update_plan_step", "complete_task", "ask_operator",
		"run", "get_entity", "list_entities", "get_health_summary", "search_knowledge", "get_execution", "wait_execution",
		"inspect_path", "get_event_timeline", "query_metrics", "get_trend", "http_get", "ping_service", "list_lxcs",
		"get_blast_radius", "get_relations", "create_entity", "create_relationship", "end_relationship", "upsert_knowledge",
		"get_knowledge_content", "get_entity_knowledge", "audit_knowledge_graph", "discover_infra_drift", "classify_command",
		"request_execution", "set_entity_state", "update_entity_attributes", "list_checks", "list_secrets", "ping"}
	var out []openai.Tool
	for _, n := range names {
		params := fmt.Sprintf(`{"type":"object","properties":{"ref":{"type":"string","description":"the entity slug %s refers to, e.g. lxc:jellyfin"},"description":{"type":"string","description":"a parameter named description"},"limit":{"type":"integer","description":"how many, at most","minimum":1}},"required":["ref"],"additionalProperties":false}`, n)
		out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{Name: n,
			Description: "Do " + strings.ReplaceAll(n, "_", " ") + " for an entity. It answers JSON with the details a model may want to read further.",
			Parameters:  json.RawMessage(params)}})
	}
	return out
}

func sys() openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: "system", Content: strings.Repeat("You are Nomos, the homelab's operator. ", 60)}
}

func user(s string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: "user", Content: s}
}

func callMsg(id, name string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: "assistant", ToolCalls: []openai.ToolCall{{ID: id, Type: "function",
		Function: openai.FunctionCall{Name: name, Arguments: `{"target":"lxc:jellyfin","command":"journalctl -n 2000"}`}}}}
}

func result(id, text string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: "tool", ToolCallID: id, Content: text}
}

func journal(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "Dec 07 10:%02d:%02d jellyfin[412]: [INF] Scan of library %d finished in %d ms\n", i/60%60, i%60, i, i*7)
	}
	return b.String()
}

// count is what llmsim's window counts: bytes / 3 of every text, the same floor as Count.
func requestTokens(f Fitted) int {
	n := 0
	for _, m := range f.Messages {
		n += Count(m.Content)
		for _, c := range m.ToolCalls {
			n += Count(c.Function.Name) + Count(c.Function.Arguments)
		}
	}
	raw, _ := json.Marshal(f.Tools)
	return n + Count(string(raw))
}

func TestShortConversationUntouched(t *testing.T) {
	b := New(Config{Window: 32768}, testTools())
	msgs := []openai.ChatCompletionMessage{sys(), user("how is the fleet?")}
	f, err := b.Fit(msgs, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Steps) != 0 || len(f.Tools) != 37 || f.Messages[1].Content != "how is the fleet?" {
		t.Errorf("steps %v, %d tools", f.Steps, len(f.Tools))
	}
	if got := requestTokens(f); got > f.Tokens {
		t.Errorf("the request counts %d, Fit said %d", got, f.Tokens)
	}
}

func TestCompactSchemas(t *testing.T) {
	c := compactTool(testTools()[0])
	raw, _ := json.Marshal(c)
	s := string(raw)
	if strings.Contains(s, "refers to") || !strings.Contains(s, `"description":{"type":"string"}`) || !strings.Contains(s, `"minimum":1`) {
		t.Errorf("compact: %s", s)
	}
	if strings.Contains(c.Function.Description, "answers JSON") {
		t.Errorf("description not cut to its first sentence: %q", c.Function.Description)
	}
}

// A long conversation with big tool output fits an 8k window, keeps the current question, the
// first question and get_output, and says where the rest is.
func TestBigConversationFits8k(t *testing.T) {
	b := New(Config{Window: 8192}, testTools())
	msgs := []openai.ChatCompletionMessage{sys(), user("first: why is jellyfin slow?")}
	for turn := 0; turn < 30; turn++ {
		if turn > 0 {
			msgs = append(msgs, user(fmt.Sprintf("turn %d: and now?", turn)))
		}
		for it := 0; it < 3; it++ {
			id := fmt.Sprintf("c%d-%d", turn, it)
			msgs = append(msgs, callMsg(id, "run"), result(id, journal(400)))
		}
		msgs = append(msgs, openai.ChatCompletionMessage{Role: "assistant", Content: "Scans are slow on library 3."})
	}
	msgs = append(msgs, user("show me the journal of jellyfin again"))
	msgs = append(msgs, callMsg("last", "run"), result("last", journal(2000)))
	f, err := b.Fit(msgs, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Tokens > b.Config().Input() || requestTokens(f) > f.Tokens {
		t.Errorf("tokens %d (request %d), budget %d", f.Tokens, requestTokens(f), b.Config().Input())
	}
	var all strings.Builder
	for _, m := range f.Messages {
		all.WriteString(m.Content + "\n")
	}
	s := all.String()
	for _, want := range []string{"first: why is jellyfin slow?", "show me the journal of jellyfin again", `get_output {"id": "last", "offset": `, "earlier messages of this session are left out"} {
		if !strings.Contains(s, want) {
			t.Errorf("the fitted request lacks %q (steps %v)", want, f.Steps)
		}
	}
	offered := map[string]bool{}
	for _, tl := range f.Tools {
		offered[tl.Function.Name] = true
	}
	if !offered["get_output"] || !offered["run"] || !offered["set_goal"] {
		t.Errorf("offered %v (steps %v)", offered, f.Steps)
	}
	// Every tool message answers a call of the request: no orphan left by the summary.
	calls := map[string]bool{}
	for _, m := range f.Messages {
		for _, c := range m.ToolCalls {
			calls[c.ID] = true
		}
		if m.Role == "tool" && !calls[m.ToolCallID] {
			t.Errorf("tool message %s without its call", m.ToolCallID)
		}
	}
	t.Logf("steps %v, %d tokens of %d, %d tools", f.Steps, f.Tokens, f.Limit, len(f.Tools))
}

func TestCutAndPage(t *testing.T) {
	j := journal(500)
	c := Cut("abc", j, 2000)
	if len(c) > 2000 || !strings.Contains(c, `get_output {"id": "abc", "offset": `) || !strings.HasPrefix(j, c[:1500]) {
		t.Fatalf("cut %d bytes: %s", len(c), c[len(c)-200:])
	}
	// Paging from the handle's offset to the end gives the whole text back.
	var off int
	_, _ = fmt.Sscanf(c[strings.LastIndex(c, `"offset": `):], `"offset": %d`, &off)
	got := j[:off]
	for i := 0; i < 100 && off < len(j); i++ {
		p := Page("abc", j, off, 3000)
		body := p[:strings.LastIndex(p, "\n…[")]
		got += body
		off += len(body)
	}
	if got != j {
		t.Errorf("paged text differs: %d of %d bytes", len(got), len(j))
	}
	if Cut("x", "short", 100) != "short" {
		t.Error("short text cut")
	}
	// A JSON object stays JSON.
	items := make([]map[string]any, 300)
	for i := range items {
		items[i] = map[string]any{"slug": fmt.Sprintf("lxc:guest-%d", i), "health": "ok"}
	}
	raw, _ := json.Marshal(map[string]any{"counts": map[string]int{"ok": 300}, "items": items})
	cj := Cut("j", string(raw), 4096)
	var back struct {
		Items []any             `json:"items"`
		Cut   map[string]string `json:"_cut"`
		More  string            `json:"_more"`
	}
	if len(cj) > 4096 || json.Unmarshal([]byte(cj), &back) != nil || len(back.Items) == 0 || back.Cut["items"] == "" || !strings.Contains(back.More, "get_output") {
		t.Errorf("json cut: %.300s", cj)
	}
}

// A server that counted more than Fit did gets a request refitted under its own figures.
func TestHarderAfterServerRefusal(t *testing.T) {
	b := New(Config{Window: 8192}, testTools())
	msgs := []openai.ChatCompletionMessage{sys(), user("look"), callMsg("a", "run"), result("a", journal(3000))}
	f, err := b.Fit(msgs, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := b.Fit(msgs, true, &Harder{Window: 6000, Prompt: f.Tokens * 2, Estimate: f.Tokens})
	if err != nil {
		t.Fatal(err)
	}
	if g.Tokens*2 > 6000-b.Config().Answer || g.Limit >= f.Limit {
		t.Errorf("harder: %d tokens, limit %d (first %d, %d)", g.Tokens, g.Limit, f.Tokens, f.Limit)
	}
}

func TestTooSmall(t *testing.T) {
	b := New(Config{Window: 1024, Answer: 512}, testTools())
	_, err := b.Fit([]openai.ChatCompletionMessage{sys(), user("hi")}, true, nil)
	var tb *TooBig
	if !errors.As(err, &tb) || !strings.Contains(err.Error(), "OIKOS_LLM_CONTEXT_TOKENS") || !strings.Contains(err.Error(), "1024") {
		t.Errorf("err %v", err)
	}
}

func TestDefaults(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.Window != 8192 || c.Answer != 1024 || c.Input() != 7168 {
		t.Errorf("%+v", c)
	}
	if c := (Config{Window: 32768}).WithDefaults(); c.Answer != 4096 {
		t.Errorf("%+v", c)
	}
}

// BenchmarkFitPerToolCall: the budgeter's cost for one model request after a tool call, on a
// session of 10 turns with 3 results of run each (about 12 KB of JSON, as run answers), 37
// tools: the request after each tool call is fitted once (goal ≤ 2 ms per tool call). Each
// op adds a new result, as a turn does, so the cut cache holds the old ones only.
func BenchmarkFitPerToolCall(b *testing.B) {
	for _, window := range []int{8192, 32768} {
		b.Run(fmt.Sprintf("window=%d", window), func(b *testing.B) {
			bg := New(Config{Window: window}, testTools())
			msgs := []openai.ChatCompletionMessage{sys(), user("first")}
			for turn := 0; turn < 10; turn++ {
				msgs = append(msgs, user(fmt.Sprintf("turn %d", turn)))
				for it := 0; it < 3; it++ {
					id := fmt.Sprintf("c%d-%d", turn, it)
					// As run answers: an execution as JSON, its output a string.
					raw, _ := json.Marshal(map[string]any{"id": id, "status": "completed", "exit_code": 0, "output": journal(150)})
					msgs = append(msgs, callMsg(id, "run"), result(id, string(raw)))
				}
			}
			fresh, _ := json.Marshal(map[string]any{"status": "completed", "output": journal(150)})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := fmt.Sprintf("new-%d", i)
				req := append(msgs[:len(msgs):len(msgs)], callMsg(id, "run"), result(id, string(fresh)))
				if _, err := bg.Fit(req, true, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

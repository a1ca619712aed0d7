package llmsim_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

const rulesScript = `
model: sim
rules:
  - name: after-goal-and-search
    when:
      after_tools: [set_goal, search_knowledge]
      tool_result_of: search_knowledge
    reply: {content: "researched after the goal: {{last_tool_result}}"}
  - name: search-only
    when: {tool_result_of: search_knowledge}
    reply: {content: "search without a goal"}
  - name: entity-down
    when:
      tool_result_of: get_entity
      tool_result_matches: '"health":\s*"down"'
    reply: {content: "{{arg:slug}} is {{arg:health}} since {{arg:since|a while}}; attrs {{arg:attributes}}, first tag {{arg:tags.0}}, missing [{{arg:nope.x}}]"}
  - name: entity-any
    when: {tool_result_of: get_entity}
    reply: {content: "entity answered"}
  - name: plan-once
    when:
      user_matches: "(?i)^plan (?P<what>\\w+)"
      not_after_tools: [propose_plan]
      last_role: user
    reply:
      tool_calls:
        - name: propose_plan
          arguments: {steps: ["look at {{match:what}}", "fix {{match:1}}", "write back"]}
  - name: plan-done
    when:
      user_matches: "(?i)^plan"
      after_tools: [propose_plan]
      turn_calls_at_least: 1
      turn_calls_at_most: 1
    reply: {content: "planned ({{model}})"}
  - name: too-many
    when: {turn_calls_at_least: 2, last_role: tool}
    reply: {content: "two calls or more"}
  - name: strict-system
    when: {system_matches: "(?m)^mode: strict$", user_not_matches: "please"}
    reply: {content: "strict"}
  - name: no-tools
    when: {has_tools: false, last_role: user}
    reply: {content: "no tools offered"}
  - name: from-assistant
    when: {last_role: assistant}
    reply: {content: "continuing"}
`

func answerOf(t *testing.T, c *openai.Client, req openai.ChatCompletionRequest) streamed {
	t.Helper()
	if req.Model == "" {
		req.Model = "sim"
	}
	got, err := streamChat(t, c, req)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRuleConditions(t *testing.T) {
	t.Parallel()
	c, _ := start(t, rulesScript)
	ts := tools("set_goal", "search_knowledge", "get_entity", "propose_plan")

	// after_tools in order, then tool_result_of by tool_call_id.
	got := answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{
		user("restart jellyfin"),
		call("", "a1", "set_goal", `{"goal":"g"}`), result("a1", "goal set"),
		call("", "a2", "search_knowledge", `{"query":"q"}`), result("a2", "two runbooks"),
	}})
	if got.content != "researched after the goal: two runbooks" {
		t.Fatalf("after_tools: %q", got.content)
	}
	// set_goal before the latest user message does not count.
	got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{
		user("restart jellyfin"),
		call("", "a1", "set_goal", `{"goal":"g"}`), result("a1", "goal set"),
		user("now search"),
		call("", "a2", "search_knowledge", `{"query":"q"}`), result("a2", "two runbooks"),
	}})
	if got.content != "search without a goal" {
		t.Fatalf("after_tools is per turn: %q", got.content)
	}
	// Parallel results: the one of get_entity is found by its id though it is not last, and
	// {{arg:...}} reads it.
	entity := `{"slug":"lxc:jellyfin","health":"down","attributes":{"vmid":101},"tags":["media"]}`
	got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{
		user("what about jellyfin"),
		call("", "x1", "get_entity", `{"ref":"lxc:jellyfin"}`, "x2", "propose_plan", `{}`),
		result("x1", entity), result("x2", "refused"),
	}})
	if want := `lxc:jellyfin is down since a while; attrs {"vmid":101}, first tag media, missing []`; got.content != want {
		t.Fatalf("tool_result_of and arg:\n got %q\nwant %q", got.content, want)
	}
	got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{
		user("what about jellyfin"),
		call("", "x1", "get_entity", `{"ref":"lxc:jellyfin"}`), result("x1", `{"health":"up"}`),
	}})
	if got.content != "entity answered" {
		t.Fatalf("tool_result_matches: %q", got.content)
	}

	// user_matches with groups; not_after_tools; then the turn's count.
	got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{user("plan jellyfin")}})
	if len(got.calls) != 1 || got.calls[0].args != `{"steps":["look at jellyfin","fix jellyfin","write back"]}` {
		t.Fatalf("plan-once: %+v", got)
	}
	got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{
		user("plan jellyfin"), call("", "p1", "propose_plan", got.calls[0].args), result("p1", "ok"),
	}})
	if got.content != "planned (sim)" {
		t.Fatalf("plan-done: %q", got.content)
	}
	got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{
		user("plan jellyfin"), call("", "p1", "propose_plan", `{}`), result("p1", "ok"),
		call("", "p2", "set_goal", `{}`), result("p2", "ok"),
	}})
	if got.content != "two calls or more" {
		t.Fatalf("turn_calls_at_most: %q", got.content)
	}

	// system_matches, user_not_matches, has_tools, last_role.
	if got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{system("Nomos\nmode: strict"), user("hi")}}); got.content != "strict" {
		t.Fatalf("system_matches: %q", got.content)
	}
	if got = answerOf(t, c, openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{system("mode: strict"), user("hi please")}}); got.content != "no tools offered" {
		t.Fatalf("user_not_matches, has_tools: %q", got.content)
	}
	if got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{user("hi"), {Role: "assistant", Content: "half"}}}); got.content != "continuing" {
		t.Fatalf("last_role assistant: %q", got.content)
	}
	if got = answerOf(t, c, openai.ChatCompletionRequest{Tools: ts, Messages: []openai.ChatCompletionMessage{user("hi")}}); got.content != llmsim.DefaultFallback {
		t.Fatalf("the built-in fallback: %q", got.content)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"no model":            "rules: []",
		"unknown key":         "model: m\nrules:\n  - when: {user_match: x}\n    reply: {content: y}",
		"bad regex":           "model: m\nrules:\n  - when: {user_matches: \"(\"}\n    reply: {content: y}",
		"bad role":            "model: m\nrules:\n  - when: {last_role: robot}\n    reply: {content: y}",
		"unknown template":    "model: m\nrules:\n  - reply: {content: \"{{last_usr}}\"}",
		"unclosed template":   "model: m\nrules:\n  - reply: {content: \"{{last_user\"}",
		"match without regex": "model: m\nrules:\n  - reply: {content: \"{{match:1}}\"}",
		"refusal and content": "model: m\nrules:\n  - reply: {content: a, refusal: b}",
		"empty and content":   "model: m\nrules:\n  - reply: {content: a, empty: true}",
		"error and calls":     "model: m\nrules:\n  - reply: {error: {status: 500}, tool_calls: [{name: x}]}",
		"error status":        "model: m\nrules:\n  - reply: {error: {status: 200}}",
		"finish reason":       "model: m\nrules:\n  - reply: {content: a, finish_reason: done}",
		"tool name":           "model: m\nrules:\n  - reply: {tool_calls: [{name: \"a b\"}]}",
		"arguments list":      "model: m\nrules:\n  - reply: {tool_calls: [{name: a, arguments: [1]}]}",
		"both arguments":      "model: m\nrules:\n  - reply: {tool_calls: [{name: a, arguments: {x: 1}, arguments_raw: \"{}\"}]}",
		"duplicate rule":      "model: m\nrules:\n  - {name: a, reply: {content: x}}\n  - {name: a, reply: {content: y}}",
		"empty range":         "model: m\nrules:\n  - when: {turn_calls_at_least: 2, turn_calls_at_most: 1}\n    reply: {content: x}",
		"fallback template":   "model: m\nfallback: {content: \"{{nope}}\"}",
		"model with space":    "model: a b",
	} {
		if _, err := llmsim.Parse([]byte(src)); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
	s, err := llmsim.Parse([]byte("model: m\nrules:\n  - reply: {content: x}\n  - name: named\n    reply: {content: y}"))
	if err != nil || strings.Join(s.RuleNames(), ",") != "rule1,named" || strings.Join(s.Models(), ",") != "m" {
		t.Fatalf("names: %v %v", s, err)
	}
}

func TestLoadSeveralScripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.yaml", "model: alpha\nrules:\n  - when: {user_matches: hi}\n    reply: {content: alpha says hi}\nfallback: {content: alpha fallback}\n")
	write("b.yml", "models: [beta]\nrules:\n  - when: {user_matches: hi}\n    reply: {content: beta says hi}\n")
	write("c.yaml", "rules:\n  - name: shared\n    when: {user_matches: shared}\n    reply: {content: \"shared for {{model}}\"}\nfallback: {content: common fallback}\n")
	write("notes.txt", "not a script")

	s, err := llmsim.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Models(), ",") != "alpha,beta" || strings.Join(s.RuleNames(), ",") != "a-rule1,b-rule1,shared" {
		t.Fatalf("models %v rules %v", s.Models(), s.RuleNames())
	}
	base, _ := llmsim.Start(t, s)
	c := client(base, "k")
	for _, tc := range []struct{ model, text, want string }{
		{"alpha", "hi", "alpha says hi"},
		{"beta", "hi", "beta says hi"},
		{"beta", "shared", "shared for beta"},
		{"alpha", "other", "alpha fallback"},
		{"beta", "other", "common fallback"},
	} {
		got := answerOf(t, c, openai.ChatCompletionRequest{Model: tc.model, Messages: []openai.ChatCompletionMessage{user(tc.text)}})
		if got.content != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.model, tc.text, got.content, tc.want)
		}
	}

	// Files and directories mix; a file twice repeats its rule names.
	if _, err := llmsim.Load(a, filepath.Join(dir, "b.yml")); err != nil {
		t.Fatalf("two files: %v", err)
	}
	if _, err := llmsim.Load(a, a); err == nil {
		t.Fatal("the same rule names twice must be refused")
	}
	if _, err := llmsim.Load(filepath.Join(dir, "c.yaml")); err == nil {
		t.Fatal("a set without a model must be refused")
	}
	if _, err := llmsim.Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Fatal("a missing file must be refused")
	}
	if _, err := llmsim.Load(t.TempDir()); err == nil {
		t.Fatal("a directory without scripts must be refused")
	}
}

func TestListenStopsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	base, stop, err := llmsim.Listen(ctx, "127.0.0.1:0", mustParse(t, "model: m"), llmsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client(base, "k").ListModels(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	stop() // waits for the shutdown the context started; safe twice
	stop()
	if _, err := client(base, "k").ListModels(context.Background()); err == nil {
		t.Fatal("still serving after stop")
	}
}

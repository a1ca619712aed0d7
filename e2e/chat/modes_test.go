package chat_test

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// modeRun is what one eval did under one wire mode, compared across modes.
type modeRun struct {
	calls, execs, refused int
	tools                 string // the tool calls' names, sorted
	status                int    // status events streamed
}

// TestGoldenEvalsUnderWireModes runs every golden eval under every wire behaviour llmsim
// reproduces of the servers homelabs run (testkit/llmsim/wire.go, docs/llm-providers.md):
// each eval passes its assertions, runs the same tool calls and executions as under OpenAI's
// format (a 429 or 503 retried never runs a tool again), and neither the streamed answer nor
// the stored transcript ever holds the model's reasoning or a tool call written as text.
// OIKOS_E2E_LLM_MODES (comma-separated, or all) chooses the modes.
//
// It is not parallel: it switches the modes of the evals' own models, so it runs before the
// parallel tests (TestGoldenEvals among them) use those models under OpenAI's format.
func TestGoldenEvalsUnderWireModes(t *testing.T) {
	if evalProvider() != nil {
		t.Skip("a real provider is configured: the wire modes are llmsim's")
	}
	s := lab(t)
	evs := loadEvals(t)
	var modes []string
	for _, m := range llmsim.ModeNames() {
		if !llmsim.Modes[m].Refusing() && m != "openai" {
			modes = append(modes, m)
		}
	}
	// make test runs the four servers' presets (each combines several behaviours) and the
	// behaviours no preset has; OIKOS_E2E_LLM_MODES=all runs every mode (about 10 minutes).
	switch only := os.Getenv("OIKOS_E2E_LLM_MODES"); only {
	case "all":
	case "":
		modes = []string{"ollama", "llamacpp", "vllm", "lmstudio", "hermes-text", "json-text", "think", "flaky-429", "flaky-503-retry-after"}
	default:
		modes = strings.Split(only, ",")
	}
	models := map[string]*llm{}
	for _, ev := range evs {
		_, models[ev.Name] = s.scripted(t, "eval:"+ev.Name)
	}
	defer func() {
		for _, m := range models {
			m.setWire(llmsim.Wire{})
		}
	}()
	run := func(mode string, w llmsim.Wire) map[string]modeRun {
		for _, m := range models {
			m.setWire(w)
		}
		out := map[string]modeRun{}
		var mu sync.Mutex
		t.Run(mode, func(t *testing.T) {
			for _, ev := range evs {
				t.Run(ev.Name, func(t *testing.T) {
					t.Parallel()
					before := models[ev.Name].refused()
					r := runEval(t, s, ev, nil)
					got := modeRun{refused: models[ev.Name].refused() - before}
					view := s.session(t, r.session)
					var names []string
					for _, c := range view.calls() {
						names = append(names, c.Name)
					}
					// Parallel calls are stored in the order they finish: compare them as a set.
					sort.Strings(names)
					got.calls, got.tools = len(names), strings.Join(names, " ")
					got.execs = len(s.executions(t, r.session))
					for _, tr := range r.turns {
						for _, e := range tr.Events {
							if e.Name == "status" {
								got.status++
							}
						}
						checkNoLeak(t, "streamed answer", tr.text())
					}
					for _, m := range view.Messages {
						checkNoLeak(t, "stored "+m.Role+" message", m.Content)
						for _, c := range m.ToolCalls {
							if strings.Contains(string(c.Arguments), "lxc:thought") {
								t.Errorf("a call came from the model's reasoning: %s %s", c.Name, c.Arguments)
							}
						}
					}
					mu.Lock()
					out[ev.Name] = got
					mu.Unlock()
				})
			}
		})
		return out
	}
	base := run("openai", llmsim.Wire{})
	for _, mode := range modes {
		w, err := llmsim.ParseMode(mode)
		if err != nil {
			t.Fatal(err)
		}
		got := run(mode, w)
		var diffs []string
		for name, b := range base {
			g, ok := got[name]
			if !ok {
				continue // failed above
			}
			if g.tools != b.tools || g.execs != b.execs {
				diffs = append(diffs, fmt.Sprintf("%s: tools %q, %d executions; under openai %q, %d", name, g.tools, g.execs, b.tools, b.execs))
			}
			if w.Flaky != 0 && g.refused == 0 {
				diffs = append(diffs, name+": no request was refused for now")
			}
			if w.FirstByteDelay > 0 && g.status == 0 {
				diffs = append(diffs, name+": no status event while the model was slow")
			}
		}
		sort.Strings(diffs)
		for _, d := range diffs {
			t.Errorf("mode %s: %s", mode, d)
		}
	}
}

// checkNoLeak fails when text holds the model's reasoning or a tool call written as text.
func checkNoLeak(t *testing.T, what, text string) {
	t.Helper()
	for _, bad := range []string{"LLMSIM-THOUGHT", "<think>", "</think>", "<tool_call>", `{"name":`} {
		if strings.Contains(text, bad) {
			t.Errorf("%s holds %q: %.300s", what, bad, text)
		}
	}
}

// A server that refuses tools ends the turn with an error naming its message and the fix,
// and runs nothing.
func TestToolsRefusedExplained(t *testing.T) {
	if evalProvider() != nil {
		t.Skip("a real provider is configured")
	}
	s := lab(t)
	ev := loadEvals(t)[0]
	_, m := s.scripted(t, "eval:"+ev.Name)
	defer m.setWire(llmsim.Wire{})
	for mode, want := range map[string]string{
		"refuse-tools-ollama":   "does not support tools",
		"refuse-tools-llamacpp": "--jinja",
		"refuse-tools-vllm":     "--enable-auto-tool-choice",
	} {
		m.setWire(llmsim.Modes[mode])
		session := newSession("refused")
		_, _ = s.scripted(t, "eval:"+ev.Name, session)
		got := s.chat(t, s.operator, session, ev.Turns[0].Say)
		if got.Finish != "error" || len(got.Errors) == 0 || !strings.Contains(got.Errors[0], want) || !strings.Contains(got.Errors[0], "Nomos needs tools") {
			b, _ := json.Marshal(got.Errors)
			t.Errorf("%s: finish %s, errors %s", mode, got.Finish, b)
		}
		if n := len(s.executions(t, session)); n != 0 {
			t.Errorf("%s: %d executions", mode, n)
		}
	}
}

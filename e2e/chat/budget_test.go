package chat_test

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// The context budget (issue #31 item 2, agent/internal/budget): every request an agent sends
// fits OIKOS_LLM_CONTEXT_TOKENS, which the agents of this package get from
// OIKOS_E2E_LLM_CONTEXT_TOKENS (default 8192), and llmsim enforces the same window as
// llama-server does (its exceed_context_size_error), counting bytes / 3.

// contextWindow is the agents' window.
func contextWindow() int {
	if n, err := strconv.Atoi(os.Getenv("OIKOS_E2E_LLM_CONTEXT_TOKENS")); err == nil && n > 0 {
		return n
	}
	return 8192
}

// bigOutputScript reads a big file with run, pages the cut result with get_output until its
// end, and answers with the file's last line.
var bigOutputScript = script("e2e-big-output", `
  - name: answer
    when: {last_role: tool, tool_result_matches: "E2E-BIG-END"}
    reply:
      content: "Read the whole journal to its end: E2E-BIG-END."
  - name: page
    when:
      last_role: tool
      tool_result_matches: '(?:next|the rest): get_output \{"id": "(?P<id>[^"]+)", "offset": (?P<off>\d+)\}'
      turn_calls_at_most: 8
    reply:
      tool_calls:
        - name: get_output
          arguments_raw: '{"id": "{{match:id}}", "offset": {{match:off}}}'
  - name: read
    when: {user_matches: "(?i)read the big journal on ([a-z0-9-]+)", turn_calls_at_most: 0}
    reply:
      tool_calls:
        - name: run
          arguments: {target: "lxc:{{match:1}}", command: "cat /root/e2e-big.log", purpose: "read the journal"}`)

// bigJournal is about 11 KB of log lines (run's result keeps a 12 KB tail), ending with the
// marker the model answers once it has paged to the end.
func bigJournal() string {
	var b strings.Builder
	for i := 0; b.Len() < 11000; i++ {
		fmt.Fprintf(&b, "Dec 07 10:%02d:%02d immich-server[812]: [Nest] LOG [JobService] thumbnail job %d done in %d ms\n", i/60%60, i%60, i, 40+i%17)
	}
	b.WriteString("E2E-BIG-END\n")
	return b.String()
}

// tokenStats are the p50 and max of request sizes.
func tokenStats(rs []*llmRequest) (n, p50, maxTok int) {
	var ts []int
	for _, r := range rs {
		ts = append(ts, r.Tokens)
	}
	if len(ts) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ts)
	return len(ts), ts[(len(ts)-1)/2], ts[len(ts)-1]
}

// TestBigOutputFitsContextWindow: a conversation whose tool output alone is several times an
// 8k window (three turns reading an 11 KB journal) completes under llmsim's window: the cut
// results are paged with get_output to their end, and no request was over the window.
func TestBigOutputFitsContextWindow(t *testing.T) {
	t.Parallel()
	if evalProvider() != nil {
		t.Skip("a real provider is configured: the window is llmsim's")
	}
	s := lab(t)
	window := contextWindow()
	sid := newSession("big-output")
	_, m := s.scripted(t, "big-output", sid)
	m.setWire(llmsim.Wire{ContextWindow: window})
	s.writeGuestFile(t, "boreas", 207, "/root/e2e-big.log", bigJournal())
	before := len(m.all())
	for i := 1; i <= 3; i++ {
		tr := s.chat(t, s.operator, sid, fmt.Sprintf("read the big journal on immich (pass %d)", i))
		if tr.Finish != "stop" || !strings.Contains(tr.text(), "E2E-BIG-END") {
			t.Fatalf("pass %d: finish %s, errors %q, text %q, events %v", i, tr.Finish, tr.Errors, tr.text(), compact(tr.names()))
		}
	}
	reqs := m.all()[before:]
	for _, r := range reqs {
		if r.Status != 0 && r.Status/100 != 2 {
			t.Errorf("a request was refused (%d): %d tokens of %d", r.Status, r.Tokens, window)
		}
		if r.Tokens > window {
			t.Errorf("a request of %d tokens, over the %d window", r.Tokens, window)
		}
	}
	v := s.session(t, sid)
	pages, output := 0, 0
	for _, c := range v.calls() {
		output += len(c.Result)
		if c.Name == "get_output" {
			pages++
			if c.IsError {
				t.Errorf("get_output failed: %s", c.Result)
			}
		}
	}
	// At 8k the output alone is over the window, and each pass pages it; a 32k window holds
	// it whole (a result's budget is 21 KB), so nothing is cut.
	if window <= 8192 && output/3 < window {
		t.Errorf("the tool output is %d bytes: under the window it was to exceed", output)
	}
	if window <= 8192 && pages < 3 {
		t.Errorf("%d get_output calls, want one or more each pass", pages)
	}
	n, p50, mx := tokenStats(reqs)
	t.Logf("window %d: %d requests, prompt tokens p50 %d, max %d; %d bytes of tool output, %d get_output pages", window, n, p50, mx, output, pages)
}

// TestContextExceededRecovered: a server whose window is smaller than the one configured
// refuses the request (llama-server's exceed_context_size_error); the agent compacts to the
// server's figures and asks once more, and the turn completes. A window too small for even the
// compacted request ends the turn with an error naming the window and what to set.
func TestContextExceededRecovered(t *testing.T) {
	t.Parallel()
	if evalProvider() != nil {
		t.Skip("a real provider is configured: the window is llmsim's")
	}
	s := lab(t)
	agent, m := s.scripted(t, "ctx-refused")
	s.writeGuestFile(t, "boreas", 207, "/root/e2e-big.log", bigJournal())
	const server = 6000 // below what the agent fits to (OIKOS_LLM_CONTEXT_TOKENS, 8192 or more)
	m.setWire(llmsim.Wire{ContextWindow: server})
	sid := newSession("ctx-refused")
	s.router.assign(sid, agent)
	before := len(m.all())
	tr := s.chat(t, s.operator, sid, "read the big journal on immich")
	if tr.Finish != "stop" || !strings.Contains(tr.text(), "E2E-BIG-END") {
		t.Fatalf("finish %s, errors %q, text %q", tr.Finish, tr.Errors, tr.text())
	}
	refused, compacting := 0, 0
	for _, r := range m.all()[before:] {
		switch {
		case r.Status == 400:
			refused++
		case r.Tokens > server:
			t.Errorf("an answered request of %d tokens, over the server's %d", r.Tokens, server)
		}
	}
	for _, e := range tr.of("status") {
		var st struct {
			State string `json:"state"`
		}
		if json.Unmarshal(e.Data, &st) == nil && st.State == "compacting" {
			compacting++
		}
	}
	if refused == 0 || compacting == 0 {
		t.Errorf("%d requests refused, %d compacting status events: the server's window was never hit", refused, compacting)
	}

	// A server window that nothing fits: a clear error, after one retry.
	m.setWire(llmsim.Wire{ContextWindow: 1500})
	sid2 := newSession("ctx-too-small")
	s.router.assign(sid2, agent)
	before = len(m.all())
	tr = s.chat(t, s.operator, sid2, "read the big journal on immich")
	if tr.Finish != "error" || len(tr.Errors) == 0 || !strings.Contains(tr.Errors[0], "window is 1500 tokens") ||
		!strings.Contains(tr.Errors[0], "OIKOS_LLM_CONTEXT_TOKENS") || !strings.Contains(tr.Errors[0], "at least 4096") {
		t.Errorf("finish %s, errors %q", tr.Finish, tr.Errors)
	}
	if n := len(m.all()) - before; n != 1 {
		t.Errorf("%d requests for a window nothing fits, want 1 (the retry is not sent when the compacted request cannot fit)", n)
	}
	t.Logf("server window %d: %d refused, then fitted; window 1500: %q", server, refused, tr.Errors)
}

// TestContextBudgetPerTurn measures the prompt of every model request of every golden eval,
// under llmsim's window equal to the agents' (run it with OIKOS_E2E_LLM_CONTEXT_TOKENS=32768
// for 32k): each eval passes, no request is over the window, and the sizes are logged (p50,
// max), as docs/benchmarks.md reports them.
//
// It is not parallel: it switches the wire of the evals' own models (as
// TestGoldenEvalsUnderWireModes does), before the parallel tests use them.
func TestContextBudgetPerTurn(t *testing.T) {
	if evalProvider() != nil {
		t.Skip("a real provider is configured: the window is llmsim's")
	}
	s := lab(t)
	window := contextWindow()
	evs := loadEvals(t)
	models := map[string]*llm{}
	for _, ev := range evs {
		_, models[ev.Name] = s.scripted(t, "eval:"+ev.Name)
	}
	for _, m := range models {
		m.setWire(llmsim.Wire{ContextWindow: window})
	}
	defer func() {
		for _, m := range models {
			m.setWire(llmsim.Wire{})
		}
	}()
	var mu sync.Mutex
	lines := map[string]string{}
	var all []*llmRequest
	t.Run("evals", func(t *testing.T) {
		for _, ev := range evs {
			t.Run(ev.Name, func(t *testing.T) {
				t.Parallel()
				m := models[ev.Name]
				before := len(m.all())
				runEval(t, s, ev, nil)
				reqs := m.all()[before:]
				for _, r := range reqs {
					if r.Status == 400 || r.Tokens > window {
						t.Errorf("a request of %d tokens (status %d) with a %d window", r.Tokens, r.Status, window)
					}
				}
				n, p50, mx := tokenStats(reqs)
				mu.Lock()
				lines[ev.Name] = fmt.Sprintf("| %s | %d | %d | %d |", ev.Name, n, p50, mx)
				all = append(all, reqs...)
				mu.Unlock()
			})
		}
	})
	names := make([]string, 0, len(lines))
	for n := range lines {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "prompt tokens per model request (bytes / 3), window %d:\n| eval | requests | p50 | max |\n|---|---|---|---|\n", window)
	for _, n := range names {
		b.WriteString(lines[n] + "\n")
	}
	n, p50, mx := tokenStats(all)
	fmt.Fprintf(&b, "| all | %d | %d | %d |\n", n, p50, mx)
	t.Log("\n" + b.String())
}

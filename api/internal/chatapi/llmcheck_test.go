package chatapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

const checkReport = `{"base_url":"http://127.0.0.1:11434/v1","model":"qwen2.5:7b","detected":"ollama","server_version":"0.12.6",` +
	`"context_tokens":8192,"findings":[{"probe":"models","status":"ok","detail":"1 model(s) listed","ms":2},` +
	`{"probe":"tools","status":"fail","detail":"refuses tool calls","set":["OIKOS_LLM_MODEL=qwen2.5"],"ms":5}],"ok":false}`

// TestLLMCheck: POST /llm/check authenticates like every write, passes the body's overrides
// to the agent's POST /internal/llm/check with the agent token and who asked, and answers the
// agent's report as it is; the api's own checks of the body come first, and an agent that is
// down or refuses the token is a 503.
func TestLLMCheck(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []map[string]any
	var roles []string
	e := newEnv(t, func(e *env) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/internal/llm/check" || r.Method != http.MethodPost || !e.authorised(r) {
				problem(w, http.StatusUnauthorized, "not the agent's token")
				return
			}
			raw, _ := io.ReadAll(r.Body)
			var b map[string]any
			_ = json.Unmarshal(raw, &b)
			mu.Lock()
			bodies, roles = append(bodies, b), append(roles, r.Header.Get("X-Oikos-Role"))
			mu.Unlock()
			if b["provider"] == "koboldcpp" {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(http.StatusUnprocessableEntity)
				_, _ = io.WriteString(w, `{"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"unknown provider","field":"provider"}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, checkReport)
		})
	})
	r := e.operator.do(http.MethodPost, "/api/v1/llm/check", map[string]any{"base_url": "http://127.0.0.1:11434/v1", "model": "qwen2.5:7b", "timeout_s": 30}).expect(t, http.StatusOK)
	if strings.TrimSpace(string(r.Body)) != checkReport {
		t.Errorf("report changed on the way: %s", r.Body)
	}
	e.agent.do(http.MethodPost, "/api/v1/llm/check", map[string]any{}).expect(t, http.StatusOK)
	mu.Lock()
	if len(bodies) != 2 || bodies[0]["base_url"] != "http://127.0.0.1:11434/v1" || bodies[0]["model"] != "qwen2.5:7b" || bodies[0]["timeout_s"] != 30.0 ||
		len(bodies[1]) != 0 || roles[0] != "operator" || roles[1] != "agent" {
		t.Errorf("agent got %v from %v", bodies, roles)
	}
	mu.Unlock()

	if p := e.readonly.do(http.MethodPost, "/api/v1/llm/check", map[string]any{}).problem(t, http.StatusForbidden); p.Detail == "" {
		t.Error("readonly: no detail")
	}
	e.anon.do(http.MethodPost, "/api/v1/llm/check", map[string]any{}).problem(t, http.StatusUnauthorized)
	if p := e.operator.do(http.MethodPost, "/api/v1/llm/check", map[string]any{"timeout_s": 301}).problem(t, http.StatusUnprocessableEntity); p.Field != "timeout_s" {
		t.Errorf("timeout_s: %+v", p)
	}
	if p := e.operator.do(http.MethodPost, "/api/v1/llm/check", map[string]any{"url": "x"}).problem(t, http.StatusUnprocessableEntity); p.Field != "url" {
		t.Errorf("unknown field: %+v", p)
	}
	if p := e.operator.do(http.MethodPost, "/api/v1/llm/check", map[string]any{"provider": "koboldcpp"}).problem(t, http.StatusUnprocessableEntity); p.Field != "provider" || p.Detail != "unknown provider" {
		t.Errorf("agent's 422: %+v", p)
	}
	mu.Lock()
	if len(bodies) != 3 {
		t.Errorf("the api's refusals reached the agent: %d requests", len(bodies))
	}
	mu.Unlock()
}

func TestLLMCheckAgentDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(*env) http.Handler { return nil })
	if p := e.operator.do(http.MethodPost, "/api/v1/llm/check", map[string]any{}).problem(t, http.StatusServiceUnavailable); !strings.Contains(p.Detail, "the agent is unreachable") {
		t.Errorf("agent down: %+v", p)
	}
}

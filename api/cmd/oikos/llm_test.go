package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// oikos llm check asks the api (POST /api/v1/llm/check, the flags as the body) and prints
// the report; it exits 0 when Nomos can work with the server, 1 when a probe failed or the
// api refused, 2 on a usage error. The api's side and the agent's are tested in their
// packages (api/internal/chatapi, agent/internal/llmcheckapi); here the api is a stand-in
// answering the documented shapes.
func TestRunLLMCheck(t *testing.T) {
	t.Parallel()
	const pass = `{"base_url":"http://127.0.0.1:11434/v1","model":"qwen2.5","detected":"ollama","context_tokens":8192,"ok":true,` +
		`"findings":[{"probe":"models","status":"ok","detail":"1 model(s) listed, qwen2.5 among them","ms":3},` +
		`{"probe":"server","status":"ok","detail":"identified as ollama 0.12.6","set":["OIKOS_LLM_PROVIDER=ollama (optional: skips the detection)"],"ms":1}]}`
	const failed = `{"base_url":"http://127.0.0.1:8000/v1","model":"m","ok":false,` +
		`"findings":[{"probe":"tools","status":"fail","detail":"the model server refuses tool calls\nfor m","ms":3}]}`
	var mu sync.Mutex
	var bodies []map[string]any
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/llm/check" || r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer tok" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"urn:oikos:problem:unauthorized","title":"Unauthorized","status":401,"detail":"a bearer token is required"}`)
			return
		}
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case b["provider"] == "koboldcpp":
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = io.WriteString(w, `{"type":"urn:oikos:problem:validation","title":"Unprocessable Entity","status":422,"detail":"unknown provider","field":"provider"}`)
		case b["base_url"] == "http://127.0.0.1:8000/v1":
			_, _ = io.WriteString(w, failed)
		default:
			_, _ = io.WriteString(w, pass)
		}
	}))
	t.Cleanup(api.Close)
	run := func(token string, args ...string) (int, string, string) {
		vars := map[string]string{"OIKOS_API_URL": api.URL, "OIKOS_TOKEN": token}
		var out, errOut bytes.Buffer
		e := &cliEnv{Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] }, HTTP: &http.Client{Timeout: 30 * time.Second}}
		return runLLM(context.Background(), e, args), out.String(), errOut.String()
	}

	code, out, errs := run("tok", "check")
	if code != 0 {
		t.Fatalf("pass: exit %d: %s", code, errs)
	}
	for _, want := range []string{"model server http://127.0.0.1:11434/v1, model qwen2.5", "OK    models     1 model(s) listed", "(3 ms)",
		"set:\n  OIKOS_LLM_PROVIDER=ollama (optional", "result: Nomos can work with this model server"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = run("tok", "check", "--base-url", "http://127.0.0.1:8000/v1", "--model", "m", "--provider", "vllm", "--api-key", "k",
		"--context-tokens", "16384", "--timeout", "90s")
	if code != 1 || !strings.Contains(out, "FAIL  tools      the model server refuses tool calls for m") || !strings.Contains(out, "cannot work") {
		t.Errorf("failed probe: exit %d:\n%s", code, out)
	}
	mu.Lock()
	if len(bodies) != 2 || len(bodies[0]) != 0 || bodies[1]["base_url"] != "http://127.0.0.1:8000/v1" || bodies[1]["model"] != "m" ||
		bodies[1]["provider"] != "vllm" || bodies[1]["api_key"] != "k" || bodies[1]["context_tokens"] != 16384.0 || bodies[1]["timeout_s"] != 90.0 {
		t.Errorf("bodies sent: %v", bodies)
	}
	mu.Unlock()
	code, out, _ = run("tok", "check", "--json")
	var rep map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || rep["detected"] != "ollama" {
		t.Errorf("--json: exit %d: %s", code, out)
	}
	if code, _, errs = run("tok", "check", "--provider", "koboldcpp"); code != 2 || !strings.Contains(errs, "unknown provider") {
		t.Errorf("api's 422: exit %d: %s", code, errs)
	}
	if code, _, errs = run("", "check"); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("no token: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{nil, {"probe"}, {"check", "extra"}, {"check", "--timeout", "10m"}, {"check", "--context-tokens", "-1"}, {"check", "--nope"}} {
		if code, _, _ := run("tok", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

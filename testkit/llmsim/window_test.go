package llmsim_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// A context window refuses a request over it with llama-server's exceed_context_size_error,
// answers one within it, and Record sees both.
func TestContextWindow(t *testing.T) {
	w, err := llmsim.ParseMode("llamacpp+context-100")
	if err != nil || w.ContextWindow != 100 || w.ToolCalls != "fragments" {
		t.Fatalf("%+v %v", w, err)
	}
	var mu sync.Mutex
	var sizes []llmsim.RequestSize
	srv := httptest.NewServer(llmsim.NewServer(mustParse(t, wireScript), llmsim.Options{Wire: llmsim.Wire{ContextWindow: 100},
		Record: func(s llmsim.RequestSize) { mu.Lock(); sizes = append(sizes, s); mu.Unlock() }}))
	defer srv.Close()
	small := `{"model":"m","messages":[{"role":"user","content":"hello"}]}`
	if st, body := post(t, srv.URL+"/v1/chat/completions", "", small); st != 200 {
		t.Fatalf("small: %d %s", st, body)
	}
	big := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}]}`
	st, body := post(t, srv.URL+"/v1/chat/completions", "", big)
	var e struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Type    string `json:"type"`
			NPrompt int    `json:"n_prompt_tokens"`
			NCtx    int    `json:"n_ctx"`
		} `json:"error"`
	}
	if st != 400 || json.Unmarshal(body, &e) != nil || e.Error.Type != "exceed_context_size_error" || e.Error.NCtx != 100 ||
		e.Error.NPrompt != 134 || !strings.Contains(e.Error.Message, "exceeds the available context size (100 tokens)") {
		t.Errorf("big: %d %s", st, body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[0].Refused || !sizes[1].Refused || sizes[1].Tokens != 134 || sizes[0].Tokens != 2 {
		t.Errorf("recorded %+v", sizes)
	}
	if n, err := llmsim.ContextTokens([]byte(big)); err != nil || n != 134 {
		t.Errorf("ContextTokens %d %v", n, err)
	}
}

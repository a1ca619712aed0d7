package llmcheckapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/llmcheck"
	report "github.com/oikos-hq/oikos/shared/llmcheck"
	"github.com/oikos-hq/oikos/testkit/llmsim"
)

func sim(t *testing.T, mode, key string) string {
	t.Helper()
	w, _ := llmsim.ParseMode(mode)
	script, err := llmsim.Demo()
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := llmsim.Listen(context.Background(), "127.0.0.1:0", script, llmsim.Options{Wire: w, APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}

func post(t *testing.T, h http.Handler, token, method, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, "/internal/llm/check", strings.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var m map[string]any
	_ = json.Unmarshal(w.Body.Bytes(), &m)
	return w, m
}

func TestHandler(t *testing.T) {
	configured := sim(t, "ollama", "sk-configured")
	other := sim(t, "openai", "sk-configured")
	h := &Handler{Token: "agent-token", Log: zerolog.Nop(),
		Target: llmcheck.Target{BaseURL: configured, Model: "nomos-sim", APIKey: "sk-configured"}}

	for _, c := range []struct {
		name, token, method, body string
		status                    int
		field                     string
	}{
		{"no token", "", http.MethodPost, "{}", http.StatusUnauthorized, ""},
		{"wrong token", "nope", http.MethodPost, "{}", http.StatusUnauthorized, ""},
		{"GET", "agent-token", http.MethodGet, "", http.StatusMethodNotAllowed, ""},
		{"not JSON", "agent-token", http.MethodPost, "{", http.StatusBadRequest, ""},
		{"unknown field", "agent-token", http.MethodPost, `{"url": "x"}`, http.StatusBadRequest, ""},
		{"bad base_url", "agent-token", http.MethodPost, `{"base_url": "ftp://x"}`, http.StatusUnprocessableEntity, "base_url"},
		{"credentials in base_url", "agent-token", http.MethodPost, `{"base_url": "http://u:p@127.0.0.1/v1"}`, http.StatusUnprocessableEntity, "base_url"},
		{"unknown provider", "agent-token", http.MethodPost, `{"provider": "koboldcpp"}`, http.StatusUnprocessableEntity, "provider"},
		{"timeout too long", "agent-token", http.MethodPost, `{"timeout_s": 3600}`, http.StatusUnprocessableEntity, "timeout_s"},
	} {
		w, m := post(t, h, c.token, c.method, c.body)
		if w.Code != c.status || (c.field != "" && m["field"] != c.field) {
			t.Errorf("%s: %d %s, want %d field %q", c.name, w.Code, w.Body, c.status, c.field)
		}
	}

	// The configured server, with its key.
	w, _ := post(t, h, "agent-token", http.MethodPost, "")
	var rep report.Report
	if err := json.Unmarshal(w.Body.Bytes(), &rep); w.Code != http.StatusOK || err != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if !rep.OK || rep.Detected != "ollama" || rep.ContextTokens != 8192 || rep.BaseURL != configured {
		t.Errorf("configured: %+v", rep)
	}

	// Another server: the configured key is not sent to it, only the one the request gives.
	w, _ = post(t, h, "agent-token", http.MethodPost, `{"base_url": "`+other+`"}`)
	_ = json.Unmarshal(w.Body.Bytes(), &rep)
	if rep.OK || rep.Findings[0].Status != report.Fail || !strings.Contains(rep.Findings[0].Detail, "without a key") {
		t.Errorf("other server without a key: %+v", rep.Findings[0])
	}
	w, _ = post(t, h, "agent-token", http.MethodPost, `{"base_url": "`+other+`", "api_key": "sk-configured", "model": "nomos-sim", "provider": "openai"}`)
	_ = json.Unmarshal(w.Body.Bytes(), &rep)
	if !rep.OK || rep.Provider != "openai" || rep.BaseURL != other {
		t.Errorf("other server with its key: %+v", rep)
	}
}

package llmcheck

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/shared/llmcheck"
	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// serve starts llmsim with the demo script (which answers the check's questions) in mode.
func serve(t *testing.T, mode string, opts llmsim.Options) string {
	t.Helper()
	w, err := llmsim.ParseMode(mode)
	if err != nil {
		t.Fatal(err)
	}
	script, err := llmsim.Demo()
	if err != nil {
		t.Fatal(err)
	}
	opts.Wire = w
	base, stop, err := llmsim.Listen(context.Background(), "127.0.0.1:0", script, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}

func check(t *testing.T, tg Target) llmcheck.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return Run(ctx, tg, Options{Timeout: 20 * time.Second, RetryBase: 10 * time.Millisecond})
}

// verdicts is a report's statuses, probe=status in order.
func verdicts(r llmcheck.Report) string {
	var b []string
	for _, f := range r.Findings {
		b = append(b, f.Probe+"="+string(f.Status))
	}
	return strings.Join(b, " ")
}

// TestModes checks every llmsim wire mode: the verdicts, and the finding that names the
// mode's behaviour.
func TestModes(t *testing.T) {
	const (
		anon  = "models=ok server=ok context=warn plain=ok stream=ok tools=ok reasoning=ok"
		local = "models=ok server=ok context=ok plain=ok stream=ok tools=ok reasoning=ok"
		text  = "models=ok server=ok context=warn plain=ok stream=ok tools=warn reasoning=ok"
		refus = "models=ok server=ok context=ok plain=ok stream=ok tools=fail reasoning=ok"
	)
	cases := map[string]struct {
		verdicts string
		want     map[string]string // probe → text its detail must hold
	}{
		"openai":                {anon, map[string]string{"tools": "round trip: called oikos_check_echo", "reasoning": "no reasoning seen"}},
		"whole-calls":           {anon, nil},
		"fragment-calls":        {anon, nil},
		"index-zero":            {anon, nil},
		"finish-stop":           {anon, map[string]string{"tools": `finish_reason "stop" with a call`}},
		"no-usage":              {anon, map[string]string{"stream": "no usage in the stream"}},
		"ids-none":              {anon, map[string]string{"tools": "then answered"}},
		"ids-numeric":           {anon, map[string]string{"tools": "tool call id of its own form"}},
		"ids-vllm":              {anon, map[string]string{"tools": "chatcmpl-tool-"}},
		"hermes-text":           {text, map[string]string{"tools": "came as text in the content"}},
		"json-text":             {text, map[string]string{"tools": "came as text in the content"}},
		"think":                 {anon, map[string]string{"reasoning": "<think> in the content"}},
		"reasoning-content":     {anon, map[string]string{"reasoning": "reasoning_content field"}},
		"reasoning":             {anon, map[string]string{"reasoning": "reasoning field"}},
		"flaky-429":             {anon, map[string]string{"plain": "after 1 refusal(s) (429 without Retry-After)", "tools": "refused 1 time(s) first"}},
		"flaky-429-retry-after": {anon, map[string]string{"plain": "429 Retry-After 1s"}},
		"flaky-503":             {anon, map[string]string{"plain": "503 without Retry-After", "tools": "refused 1 time(s) first"}},
		"flaky-503-retry-after": {anon, map[string]string{"plain": "503 Retry-After 1s"}},
		"slow-first-token":      {anon, map[string]string{"stream": "first text after 4"}},
		"refuse-tools-ollama":   {refus, map[string]string{"tools": "does not support tools", "server": "identified as ollama"}},
		"refuse-tools-llamacpp": {refus, map[string]string{"tools": "--jinja"}},
		"refuse-tools-vllm":     {refus, map[string]string{"tools": "--enable-auto-tool-choice"}},
		"ollama":                {local, map[string]string{"server": "identified as ollama 0.12.6 (GET /api/version)", "context": "8192 tokens (Ollama /api/ps", "reasoning": "reasoning field"}},
		"llamacpp":              {local, map[string]string{"server": "identified as llamacpp b6100 (GET /props)", "context": "/props n_ctx", "reasoning": "reasoning_content"}},
		"vllm":                  {local, map[string]string{"server": "identified as vllm 0.11.0 (GET /version)", "context": "max_model_len"}},
		"lmstudio":              {local, map[string]string{"server": "identified as lmstudio", "context": "loaded_context_length", "tools": `finish_reason "stop"`}},
	}
	for _, m := range llmsim.ModeNames() {
		if _, ok := cases[m]; !ok {
			t.Errorf("mode %s has no expected findings here", m)
		}
	}
	for mode, c := range cases {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := check(t, Target{BaseURL: serve(t, mode, llmsim.Options{}), Model: "nomos-sim"})
			if got := verdicts(r); got != c.verdicts {
				t.Errorf("verdicts\n got %s\nwant %s", got, c.verdicts)
			}
			for probe, want := range c.want {
				if f := finding(r, probe); !strings.Contains(f.Detail, want) {
					t.Errorf("%s: %q, want it to hold %q", probe, f.Detail, want)
				}
			}
			if r.OK != !strings.Contains(c.verdicts, "fail") {
				t.Errorf("OK = %v", r.OK)
			}
			for _, f := range r.Findings {
				if strings.Contains(f.Detail, "LLMSIM-THOUGHT") {
					t.Errorf("%s: reasoning in a finding: %s", f.Probe, f.Detail)
				}
			}
		})
	}
}

func finding(r llmcheck.Report, probe string) llmcheck.Finding {
	for _, f := range r.Findings {
		if f.Probe == probe {
			return f
		}
	}
	return llmcheck.Finding{}
}

// TestFailures: the endpoint problems a person meets first, each stopping the probes it
// makes pointless and naming what to set.
func TestFailures(t *testing.T) {
	keyed := serve(t, "openai", llmsim.Options{APIKey: "sk-right-key"})
	ollama := serve(t, "ollama", llmsim.Options{})
	cases := []struct {
		name     string
		target   Target
		verdicts string
		probe    string
		detail   string
		set      string
	}{
		{"no base URL", Target{Model: "m"}, "config=fail models=skip server=skip context=skip plain=skip stream=skip tools=skip reasoning=skip",
			"config", "no model server is configured", "OIKOS_LLM_BASE_URL="},
		{"unreachable", Target{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Provider: "ollama"},
			"models=fail server=skip context=skip plain=skip stream=skip tools=skip reasoning=skip",
			"models", "cannot reach the model server at http://127.0.0.1:1/v1", "OIKOS_LLM_BASE_URL=http://127.0.0.1:11434/v1"},
		{"no key", Target{BaseURL: keyed, Model: "nomos-sim"}, "models=fail server=skip context=skip plain=skip stream=skip tools=skip reasoning=skip",
			"models", "refused the request without a key (401", "OIKOS_LLM_API_KEY="},
		{"wrong key", Target{BaseURL: keyed, Model: "nomos-sim", APIKey: "sk-wrong-key"}, "models=fail server=skip context=skip plain=skip stream=skip tools=skip reasoning=skip",
			"models", "refused the API key (401: Incorrect API key", "OIKOS_LLM_API_KEY="},
		{"right key", Target{BaseURL: keyed, Model: "nomos-sim", APIKey: "sk-right-key"}, "models=ok server=ok context=warn plain=ok stream=ok tools=ok reasoning=ok",
			"models", "nomos-sim among them", ""},
		{"model missing", Target{BaseURL: ollama, Model: "qwen2.5:7b"}, "models=fail server=ok context=warn plain=skip stream=skip tools=skip reasoning=skip",
			"models", `does not serve "qwen2.5:7b"; it serves 1: nomos-sim`, "OIKOS_LLM_MODEL=nomos-sim"},
		{"no model", Target{BaseURL: ollama}, "models=fail server=ok context=warn plain=skip stream=skip tools=skip reasoning=skip",
			"models", "no model configured", "OIKOS_LLM_MODEL=nomos-sim"},
		{"no /v1", Target{BaseURL: strings.TrimSuffix(ollama, "/v1") + "/x", Model: "nomos-sim"}, "models=fail server=skip context=skip plain=skip stream=skip tools=skip reasoning=skip",
			"models", "answered 404", "OIKOS_LLM_BASE_URL=" + strings.TrimSuffix(ollama, "/v1") + "/x/v1"},
		{"wrong provider", Target{BaseURL: ollama, Model: "nomos-sim", Provider: "vllm"}, "models=ok server=warn context=ok plain=ok stream=ok tools=ok reasoning=ok",
			"server", "OIKOS_LLM_PROVIDER=vllm, but the server identifies as ollama", "OIKOS_LLM_PROVIDER=ollama"},
		{"window smaller than configured", Target{BaseURL: ollama, Model: "nomos-sim", ContextTokens: 32768}, "models=ok server=ok context=warn plain=ok stream=ok tools=ok reasoning=ok",
			"context", "window of 8192 tokens", "OIKOS_LLM_CONTEXT_TOKENS=8192"},
		{"window larger than configured", Target{BaseURL: ollama, Model: "nomos-sim", ContextTokens: 4096}, "models=ok server=ok context=ok plain=ok stream=ok tools=ok reasoning=ok",
			"context", "Nomos uses 4096 of it", "OIKOS_LLM_CONTEXT_TOKENS=8192 (optional"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := check(t, c.target)
			if got := verdicts(r); got != c.verdicts {
				t.Errorf("verdicts\n got %s\nwant %s", got, c.verdicts)
			}
			f := finding(r, c.probe)
			if !strings.Contains(f.Detail, c.detail) {
				t.Errorf("%s: %q, want it to hold %q", c.probe, f.Detail, c.detail)
			}
			if c.set != "" && !strings.Contains(strings.Join(f.Set, "\n"), c.set) {
				t.Errorf("%s: set %q, want %q", c.probe, f.Set, c.set)
			}
		})
	}
}

// TestFirstByteBounded: a server slower than the first-byte timeout fails the streamed
// probes within it, naming the setting.
func TestFirstByteBounded(t *testing.T) {
	base := serve(t, "slow-first-token", llmsim.Options{})
	start := time.Now()
	r := Run(context.Background(), Target{BaseURL: base, Model: "nomos-sim", FirstByte: 100 * time.Millisecond},
		Options{Timeout: 5 * time.Second, RetryBase: 10 * time.Millisecond})
	if f := finding(r, "stream"); f.Status != llmcheck.Fail || !strings.Contains(strings.Join(f.Set, " "), "OIKOS_LLM_FIRST_BYTE_TIMEOUT") {
		t.Errorf("stream: %+v", f)
	}
	if r.OK {
		t.Error("OK with no streamed answer")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestDetect: each server mode identifies itself; OpenAI's format and an unreachable server
// are none, within the bound.
func TestDetect(t *testing.T) {
	for mode, want := range map[string]string{"ollama": "ollama", "llamacpp": "llamacpp", "vllm": "vllm", "lmstudio": "lmstudio", "openai": "", "hermes-text": ""} {
		if got := Detect(context.Background(), nil, serve(t, mode, llmsim.Options{}), ""); got.Server != want {
			t.Errorf("%s: detected %+v, want %q", mode, got, want)
		}
	}
	if got := Detect(context.Background(), nil, "http://127.0.0.1:1/v1", ""); got.Server != "" {
		t.Errorf("unreachable: %+v", got)
	}
	if got := Detect(context.Background(), nil, "https://api.openai.com/v1", ""); got.Server != "openai" {
		t.Errorf("api.openai.com: %+v", got)
	}
}

func TestDumpModes(t *testing.T) {
	if os.Getenv("LLMCHECK_DUMP") == "" {
		t.Skip()
	}
	for _, m := range llmsim.ModeNames() {
		base := serve(t, m, llmsim.Options{})
		r := check(t, Target{BaseURL: base, Model: "nomos-sim"})
		var sb strings.Builder
		_ = r.WriteText(&sb)
		t.Logf("== %s\n%s\n%s", m, verdicts(r), sb.String())
	}
}

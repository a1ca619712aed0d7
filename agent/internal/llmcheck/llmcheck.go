// Package llmcheck is the doctor of `oikos llm check` and the dashboard's settings page
// (issue #31): it probes the model server Nomos is configured with — the models it lists,
// the server's identity and context window, a plain answer, a streamed answer, one tool-call
// round trip, reasoning — and reports what works, what does not and what to set
// (shared/llmcheck.Report). The streamed probes go through agent/internal/llm, Nomos's own
// wire client, so a server's quirks are judged exactly as a chat turn meets them. Every probe
// is bounded by Options.Timeout; an endpoint that cannot be reached, refuses the key or does
// not serve the model stops the probes that would only repeat the failure.
package llmcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/agent/internal/llm"
	"github.com/oikos-hq/oikos/shared/llmcheck"
)

// Target is the endpoint checked, as the agent is configured (or as the caller overrides it).
type Target struct {
	BaseURL, Model, APIKey string
	// Provider is OIKOS_LLM_PROVIDER ("" none).
	Provider string
	// ContextTokens is OIKOS_LLM_CONTEXT_TOKENS (0: DefaultContextTokens).
	ContextTokens int
	// FirstByte is OIKOS_LLM_FIRST_BYTE_TIMEOUT (0: the preset's, else llm.DefaultFirstByte).
	FirstByte time.Duration
}

// DefaultContextTokens is the window Nomos assumes without OIKOS_LLM_CONTEXT_TOKENS.
const DefaultContextTokens = 8192

// Options shape a check.
type Options struct {
	// HTTP sends every request (nil: a client without an overall timeout; each probe is
	// bounded by Timeout).
	HTTP *http.Client
	// Timeout bounds each probe (0: DefaultTimeout); a streamed probe's first byte is bounded
	// by the smaller of it and the target's first-byte timeout.
	Timeout time.Duration
	// RetryBase is the back-off base of the retried refusals (0: 500 ms; tests shorten it).
	RetryBase time.Duration
	Log       zerolog.Logger
}

// DefaultTimeout bounds one probe: long enough for a small local model to answer a short
// question, short enough that a hung server is reported while someone is still looking.
const DefaultTimeout = 45 * time.Second

// The probe's conversation. The texts are plain instructions a real model follows, and the
// lines llmsim's demo script answers (testkit/llmsim/scripts/demo.yaml, rules check-*).
const (
	plainPrompt = "Oikos model check: reply with the single word OK."
	toolPrompt  = `Oikos model check: call the tool oikos_check_echo with the word "ping", then say in one sentence what it returned.`
	toolName    = "oikos_check_echo"
	toolResult  = `{"echo":"ping"}`
)

var checkTool = openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
	Name:        toolName,
	Description: "Echo a word back. A harmless tool for checking that the model server passes tool calls.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string","description":"the word to echo"}},` +
		`"required":["word"]}`),
}}

// checker is one run.
type checker struct {
	t   Target
	o   Options
	rep llmcheck.Report
	g   getter
	// reasoning collects where reasoning was seen: field names or "<think> in the content".
	reasoning []string
	leaked    bool // reasoning reached an answer's text
}

// Run checks t and returns the report; it never fails (a failure is a finding).
func Run(ctx context.Context, t Target, o Options) llmcheck.Report {
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 500 * time.Millisecond
	}
	if t.ContextTokens <= 0 {
		t.ContextTokens = DefaultContextTokens
	}
	t.BaseURL = strings.TrimRight(strings.TrimSpace(t.BaseURL), "/")
	c := &checker{t: t, o: o, g: getter{hc: o.HTTP, key: t.APIKey},
		rep: llmcheck.Report{BaseURL: t.BaseURL, Model: t.Model, Provider: t.Provider}}
	c.run(ctx)
	c.rep.Finish()
	return c.rep
}

func (c *checker) add(probe string, st llmcheck.Status, start time.Time, detail string, set ...string) {
	f := llmcheck.Finding{Probe: probe, Status: st, Detail: detail, Set: set}
	if !start.IsZero() {
		f.Millis = time.Since(start).Milliseconds()
	}
	c.rep.Findings = append(c.rep.Findings, f)
}

func (c *checker) skip(why string, probes ...string) {
	for _, p := range probes {
		c.add(p, llmcheck.Skip, time.Time{}, why)
	}
}

func (c *checker) run(ctx context.Context) {
	all := []string{llmcheck.ProbeModels, llmcheck.ProbeServer, llmcheck.ProbeContext, llmcheck.ProbePlain,
		llmcheck.ProbeStream, llmcheck.ProbeTools, llmcheck.ProbeReasoning}
	if c.t.BaseURL == "" {
		c.add(llmcheck.ProbeConfig, llmcheck.Fail, time.Time{}, "no model server is configured",
			"OIKOS_LLM_BASE_URL=<the server's OpenAI-compatible base, e.g. http://127.0.0.1:11434/v1>", "OIKOS_LLM_MODEL=<a model it serves>")
		c.skip("no model server configured", all...)
		return
	}
	if p, err := llm.LookupPreset(c.t.Provider); err != nil {
		c.add(llmcheck.ProbeConfig, llmcheck.Fail, time.Time{}, "OIKOS_LLM_PROVIDER: "+err.Error())
	} else if p.NeedsKey && c.t.APIKey == "" {
		c.add(llmcheck.ProbeConfig, llmcheck.Fail, time.Time{}, "OIKOS_LLM_PROVIDER="+p.Name+" needs an API key", "OIKOS_LLM_API_KEY=<your key>")
	}
	served, stop := c.models(ctx)
	if stop != "" {
		c.skip(stop, all[1:]...)
		return
	}
	id := c.server(ctx)
	c.context(ctx, id, served)
	if c.t.Model == "" || !served.has(c.t.Model) {
		c.skip("the model is not served", llmcheck.ProbePlain, llmcheck.ProbeStream, llmcheck.ProbeTools, llmcheck.ProbeReasoning)
		return
	}
	c.plain(ctx)
	c.stream(ctx, id)
	c.tools(ctx)
	c.reasoningFinding()
}

// cards are the models /models listed.
type cards []struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len"` // vLLM
}

// has says whether name is served, Ollama's implicit :latest tag included.
func (cs cards) has(name string) bool { return cs.find(name) >= 0 }

func (cs cards) find(name string) int {
	for i, m := range cs {
		if m.ID == name || m.ID == name+":latest" || strings.TrimSuffix(m.ID, ":latest") == name {
			return i
		}
	}
	return -1
}

// models lists the served models; stop is why no further probe can run ("" none).
func (c *checker) models(ctx context.Context) (cards, string) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	var list struct {
		Data cards `json:"data"`
	}
	status, body, hdr, err := c.send(ctx, http.MethodGet, c.t.BaseURL+"/models", nil)
	if err != nil {
		c.add(llmcheck.ProbeModels, llmcheck.Fail, start, fmt.Sprintf("cannot reach the model server at %s: %v", c.t.BaseURL, err),
			c.baseURLHint()...)
		return nil, "the server cannot be reached"
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e := llm.ReadError(status, hdr, body)
		what := "refused the request without a key"
		if c.t.APIKey != "" {
			what = "refused the API key"
		}
		c.add(llmcheck.ProbeModels, llmcheck.Fail, start, fmt.Sprintf("the server %s (%d: %s)", what, status, e.Message),
			"OIKOS_LLM_API_KEY=<the key the server expects>")
		return nil, "the server refused the key"
	case status == http.StatusNotFound:
		hint := "OIKOS_LLM_BASE_URL must be the OpenAI-compatible base, ending in /v1 on Ollama, llama-server, vLLM and LM Studio"
		var set []string
		if !strings.HasSuffix(c.t.BaseURL, "/v1") {
			set = []string{"OIKOS_LLM_BASE_URL=" + c.t.BaseURL + "/v1"}
		}
		c.add(llmcheck.ProbeModels, llmcheck.Fail, start, fmt.Sprintf("GET %s/models answered 404: %s", c.t.BaseURL, hint), set...)
		return nil, "the base URL serves no OpenAI-compatible API"
	case status != http.StatusOK:
		e := llm.ReadError(status, hdr, body)
		c.add(llmcheck.ProbeModels, llmcheck.Fail, start, e.Error())
		return nil, "the server refused to list its models"
	}
	if err := json.Unmarshal(body, &list); err != nil {
		c.add(llmcheck.ProbeModels, llmcheck.Fail, start, fmt.Sprintf("GET %s/models did not answer an OpenAI model list: %v", c.t.BaseURL, err))
		return nil, "the base URL serves no OpenAI-compatible API"
	}
	names := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		names = append(names, m.ID)
	}
	shown := strings.Join(names, ", ")
	if len(names) > 8 {
		shown = strings.Join(names[:8], ", ") + fmt.Sprintf(" and %d more", len(names)-8)
	}
	switch {
	case c.t.Model == "":
		set := []string{"OIKOS_LLM_MODEL=<one of the served models>"}
		if len(names) > 0 {
			set = []string{"OIKOS_LLM_MODEL=" + names[0]}
		}
		c.add(llmcheck.ProbeModels, llmcheck.Fail, start, fmt.Sprintf("no model configured; the server serves %d: %s", len(names), shown), set...)
	case !list.Data.has(c.t.Model):
		set := []string{"OIKOS_LLM_MODEL=<one of the served models>"}
		if len(names) > 0 {
			set = []string{"OIKOS_LLM_MODEL=" + names[0]}
		}
		c.add(llmcheck.ProbeModels, llmcheck.Fail, start, fmt.Sprintf("the server does not serve %q; it serves %d: %s (on Ollama, ollama pull it first)", c.t.Model, len(names), orNothing(shown)), set...)
	default:
		c.add(llmcheck.ProbeModels, llmcheck.OK, start, fmt.Sprintf("%d model(s) listed, %s among them", len(names), c.t.Model))
	}
	return list.Data, ""
}

func (c *checker) baseURLHint() []string {
	if p, err := llm.LookupPreset(c.t.Provider); err == nil && p.BaseURL != "" && p.BaseURL != c.t.BaseURL {
		return []string{"OIKOS_LLM_BASE_URL=" + p.BaseURL + " (the " + p.Name + " default), or where your server listens"}
	}
	return nil
}

// server asks the identity endpoints and compares them with OIKOS_LLM_PROVIDER.
func (c *checker) server(ctx context.Context) Identity {
	start := time.Now()
	id := Detect(ctx, c.o.HTTP, c.t.BaseURL, c.t.APIKey)
	c.rep.Detected, c.rep.ServerVersion = id.Server, id.Version
	name := id.Server
	if id.Version != "" {
		name += " " + id.Version
	}
	switch {
	case id.Server == "" && c.t.Provider != "":
		c.add(llmcheck.ProbeServer, llmcheck.OK, start, fmt.Sprintf("the server does not identify itself; Nomos uses the %s preset (OIKOS_LLM_PROVIDER)", c.t.Provider))
	case id.Server == "":
		c.add(llmcheck.ProbeServer, llmcheck.OK, start, "the server does not identify itself as Ollama, llama-server, vLLM or LM Studio: Nomos treats it as OpenAI-compatible, without a preset")
	case c.t.Provider == "":
		c.add(llmcheck.ProbeServer, llmcheck.OK, start, fmt.Sprintf("identified as %s (%s); the agent detects it at start and applies its preset", name, id.Source),
			"OIKOS_LLM_PROVIDER="+id.Server+" (optional: skips the detection)")
	case c.t.Provider != id.Server:
		c.add(llmcheck.ProbeServer, llmcheck.Warn, start, fmt.Sprintf("OIKOS_LLM_PROVIDER=%s, but the server identifies as %s (%s): Nomos applies the wrong preset's timeouts and hints", c.t.Provider, name, id.Source),
			"OIKOS_LLM_PROVIDER="+id.Server)
	default:
		c.add(llmcheck.ProbeServer, llmcheck.OK, start, fmt.Sprintf("identified as %s (%s), as OIKOS_LLM_PROVIDER says", name, id.Source))
	}
	return id
}

// context reads the window the server runs the model with and compares it with
// OIKOS_LLM_CONTEXT_TOKENS.
func (c *checker) context(ctx context.Context, id Identity, served cards) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	n, modelMax, source := c.window(ctx, id, served)
	cfg := c.t.ContextTokens
	maxNote := ""
	if modelMax > n && n > 0 {
		maxNote = fmt.Sprintf("; the model itself takes up to %d", modelMax)
	}
	c.rep.ContextTokens = n
	switch {
	case n == 0 && modelMax > 0:
		c.add(llmcheck.ProbeContext, llmcheck.Warn, start, fmt.Sprintf("the server reports only the model's own window (%d, %s), not the one it runs it with; Nomos counts with OIKOS_LLM_CONTEXT_TOKENS=%d", modelMax, source, cfg),
			"OIKOS_LLM_CONTEXT_TOKENS=<the window the server loads the model with>")
	case n == 0:
		c.add(llmcheck.ProbeContext, llmcheck.Warn, start, fmt.Sprintf("the server does not report its context window; Nomos counts with OIKOS_LLM_CONTEXT_TOKENS=%d", cfg),
			"OIKOS_LLM_CONTEXT_TOKENS=<the model's window on this server>")
	case n < cfg:
		c.add(llmcheck.ProbeContext, llmcheck.Warn, start, fmt.Sprintf("the server runs %s with a window of %d tokens (%s), smaller than OIKOS_LLM_CONTEXT_TOKENS=%d: requests may overflow it%s", c.t.Model, n, source, cfg, maxNote),
			"OIKOS_LLM_CONTEXT_TOKENS="+strconv.Itoa(n))
	case n > cfg:
		c.add(llmcheck.ProbeContext, llmcheck.OK, start, fmt.Sprintf("window of %d tokens (%s); Nomos uses %d of it (OIKOS_LLM_CONTEXT_TOKENS)%s", n, source, cfg, maxNote),
			"OIKOS_LLM_CONTEXT_TOKENS="+strconv.Itoa(n)+" (optional: use all of it)")
	default:
		c.add(llmcheck.ProbeContext, llmcheck.OK, start, fmt.Sprintf("window of %d tokens (%s), as OIKOS_LLM_CONTEXT_TOKENS says%s", n, source, maxNote))
	}
}

var numCtxRe = regexp.MustCompile(`(?m)^\s*num_ctx\s+(\d+)`)

// window is the served window, the model's own maximum where the server tells it apart, and
// the endpoint that told.
func (c *checker) window(ctx context.Context, id Identity, served cards) (n, modelMax int, source string) {
	root := Root(c.t.BaseURL)
	switch id.Server {
	case "llamacpp":
		var p struct {
			Settings struct {
				NCtx int `json:"n_ctx"`
			} `json:"default_generation_settings"`
		}
		if c.g.json(ctx, root+"/props", &p) == nil {
			return p.Settings.NCtx, 0, "llama-server /props n_ctx (-c)"
		}
	case "vllm":
		if i := served.find(c.t.Model); i >= 0 && served[i].MaxModelLen > 0 {
			return served[i].MaxModelLen, 0, "vLLM max_model_len (--max-model-len)"
		}
	case "lmstudio":
		var m struct {
			State  string `json:"state"`
			Max    int    `json:"max_context_length"`
			Loaded int    `json:"loaded_context_length"`
		}
		if c.g.json(ctx, root+"/api/v0/models/"+c.t.Model, &m) == nil {
			if m.Loaded > 0 {
				return m.Loaded, m.Max, "LM Studio loaded_context_length"
			}
			return 0, m.Max, "LM Studio max_context_length"
		}
	case "ollama":
		var ps struct {
			Models []struct {
				Name          string `json:"name"`
				Model         string `json:"model"`
				ContextLength int    `json:"context_length"`
			} `json:"models"`
		}
		var show struct {
			Parameters string         `json:"parameters"`
			ModelInfo  map[string]any `json:"model_info"`
		}
		body, _ := json.Marshal(map[string]string{"model": c.t.Model})
		if req, err := http.NewRequestWithContext(ctx, http.MethodPost, root+"/api/show", bytes.NewReader(body)); err == nil {
			req.Header.Set("Content-Type", "application/json")
			if c.g.do(req, &show) == nil {
				for k, v := range show.ModelInfo {
					if f, ok := v.(float64); ok && strings.HasSuffix(k, ".context_length") {
						modelMax = int(f)
					}
				}
			}
		}
		if c.g.json(ctx, root+"/api/ps", &ps) == nil {
			for _, m := range ps.Models {
				if (m.Name == c.t.Model || m.Model == c.t.Model || strings.TrimSuffix(m.Name, ":latest") == c.t.Model) && m.ContextLength > 0 {
					return m.ContextLength, modelMax, "Ollama /api/ps context_length of the loaded model"
				}
			}
		}
		if m := numCtxRe.FindStringSubmatch(show.Parameters); m != nil {
			v, _ := strconv.Atoi(m[1])
			return v, modelMax, "Ollama /api/show num_ctx"
		}
		if modelMax > 0 {
			return 0, modelMax, "Ollama /api/show model_info; the model is not loaded and sets no num_ctx, so OLLAMA_CONTEXT_LENGTH or Ollama's default (4096 below 24 GiB of VRAM) applies"
		}
	}
	return 0, 0, ""
}

// send makes one request with the key; it returns the status, the body (bounded) and the
// header, or the transport's error.
func (c *checker) send(ctx context.Context, method, url string, body []byte) (int, []byte, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.t.APIKey)
	}
	resp, err := c.o.HTTP.Do(req)
	if err != nil {
		return 0, nil, nil, unwrapURL(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.StatusCode, data, resp.Header, nil
}

func unwrapURL(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

func orNothing(s string) string {
	if s == "" {
		return "nothing"
	}
	return s
}

// clip shortens a model's text for a finding.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 120 {
		return string(r[:120]) + "…"
	}
	return s
}

package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// APIError is a model server's refusal of a request: its HTTP status and what its body said.
// Servers disagree on the body's shape (OpenAI's {"error": {"message", "type", "code"}},
// llama-server's numeric code in it, Ollama's native {"error": "text"}, vLLM's ErrorResponse
// at the top level); parseAPIError reads them all.
type APIError struct {
	Status  int
	Message string
	Type    string
	Code    string
	// RetryAfter is the server's Retry-After (0 when it sent none).
	RetryAfter time.Duration
	// NCtx, NPrompt are llama-server's n_ctx and n_prompt_tokens of an
	// exceed_context_size_error (0 otherwise).
	NCtx, NPrompt int
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the model server answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	return b.String()
}

// Transient says whether the same request may succeed later: a rate limit (not an exhausted
// quota, which waits for a person) or a server that is busy or still loading its model.
func (e *APIError) Transient() bool {
	switch e.Status {
	case http.StatusTooManyRequests:
		return e.Code != "insufficient_quota"
	case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// ToolsRefused is a server that cannot take tools with this model or launch. Nomos cannot
// work without tools, so it says what to change instead of retrying.
type ToolsRefused struct {
	Server, Model string
	Err           *APIError
}

func (e *ToolsRefused) Error() string {
	fix := "use a model and server that support tool calling"
	switch {
	case strings.Contains(e.Err.Message, "--jinja"):
		fix = "start llama-server with --jinja (and a model whose chat template supports tools)"
	case strings.Contains(e.Err.Message, "enable-auto-tool-choice"):
		fix = "start vLLM with --enable-auto-tool-choice and the --tool-call-parser of the model (hermes for Qwen, llama3_json for Llama 3.1…)"
	case strings.Contains(e.Err.Message, "does not support tools"):
		fix = "pick a model Ollama lists with tool support (ollama.com/search?c=tools: qwen2.5, qwen3, llama3.1, mistral-nemo…) in OIKOS_LLM_MODEL"
	}
	return fmt.Sprintf("the model server refuses tool calls for %s (%d: %s): Nomos needs tools: %s", e.Model, e.Err.Status, e.Err.Message, fix)
}

func (e *ToolsRefused) Unwrap() error { return e.Err }

// toolsRefused recognises the documented refusals of a request with tools
// (docs/llm-providers.md).
func toolsRefused(e *APIError) bool {
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "does not support tools") || strings.Contains(m, "tools param requires --jinja") ||
		strings.Contains(m, "enable-auto-tool-choice") || strings.Contains(m, "tool use is not supported") ||
		strings.Contains(m, "does not support tool")
}

// ErrFirstByte is a server that sent nothing within the first-byte timeout.
var ErrFirstByte = errors.New("the model server sent nothing")

// parseAPIError reads a refusal.
func parseAPIError(status int, header http.Header, body []byte) *APIError {
	e := &APIError{Status: status, RetryAfter: retryAfter(header.Get("Retry-After"), time.Now())}
	var nested struct {
		Error json.RawMessage `json:"error"`
	}
	var flat struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Detail  string          `json:"detail"`
		NCtx    int             `json:"n_ctx"`
		NPrompt int             `json:"n_prompt_tokens"`
	}
	if json.Unmarshal(body, &nested) == nil && len(nested.Error) > 0 {
		var text string
		if json.Unmarshal(nested.Error, &text) == nil {
			e.Message = text // Ollama's native shape
		} else if json.Unmarshal(nested.Error, &flat) == nil {
			e.Message, e.Type, e.Code = flat.Message, flat.Type, codeText(flat.Code)
			e.NCtx, e.NPrompt = flat.NCtx, flat.NPrompt
		}
	} else if json.Unmarshal(body, &flat) == nil && (flat.Message != "" || flat.Detail != "") {
		e.Message, e.Type, e.Code = flat.Message, flat.Type, codeText(flat.Code)
		if e.Message == "" {
			e.Message = flat.Detail
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 300 {
			e.Message = e.Message[:300] + "…"
		}
	}
	return e
}

// ContextExceeded is a server's refusal of a prompt longer than its context window:
// llama-server's exceed_context_size_error (400, with n_ctx and n_prompt_tokens), vLLM's
// "This model's maximum context length is N tokens. However, you requested M tokens (P in the
// messages, C in the completion)" (400), OpenAI's context_length_exceeded ("… However, your
// messages resulted in M tokens") (docs/llm-providers.md).
type ContextExceeded struct {
	// Window is the server's context window, Prompt its count of the prompt (0 unknown).
	Window, Prompt int
	Err            *APIError
}

var (
	reMaxContext = regexp.MustCompile(`maximum context length is (\d+) tokens`)
	reInMessages = regexp.MustCompile(`\((\d+) in the messages`)
	rePrompt     = regexp.MustCompile(`(?:resulted in|requested) (\d+) tokens`)
	reLlamaSize  = regexp.MustCompile(`request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)`)
)

// AsContextExceeded recognises a context-exceeded refusal in err.
func AsContextExceeded(err error) (*ContextExceeded, bool) {
	var e *APIError
	if !errors.As(err, &e) || e.Status/100 != 4 {
		return nil, false
	}
	m := strings.ToLower(e.Message)
	if e.Type != "exceed_context_size_error" && e.Code != "context_length_exceeded" && !strings.Contains(m, "maximum context length") &&
		!strings.Contains(m, "exceeds the available context size") {
		return nil, false
	}
	ce := &ContextExceeded{Window: e.NCtx, Prompt: e.NPrompt, Err: e}
	if g := reLlamaSize.FindStringSubmatch(e.Message); g != nil && ce.Window == 0 {
		ce.Prompt, _ = strconv.Atoi(g[1])
		ce.Window, _ = strconv.Atoi(g[2])
	}
	if g := reMaxContext.FindStringSubmatch(e.Message); g != nil && ce.Window == 0 {
		ce.Window, _ = strconv.Atoi(g[1])
	}
	for _, re := range []*regexp.Regexp{reInMessages, rePrompt} {
		if g := re.FindStringSubmatch(e.Message); g != nil && ce.Prompt == 0 {
			ce.Prompt, _ = strconv.Atoi(g[1])
		}
	}
	return ce, true
}

// codeText is a code as text: OpenAI's are strings, llama-server's and vLLM's numbers.
func codeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

package llmsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// Wire is how a server departs from OpenAI's wire format while answering the same script:
// each field is one documented behaviour of Ollama, llama.cpp's llama-server, vLLM or LM
// Studio (docs/llm-providers.md names the server, version and source of each). The zero
// value is OpenAI's format exactly. Named modes (Modes) are the combinations tests run under.
type Wire struct {
	// ToolCalls is how a streamed tool call arrives: "" split by chunk_size after a first
	// delta carrying its id, type and name (OpenAI); "whole": id, name and all its arguments
	// in one delta (Ollama); "fragments": the arguments two characters at a time, the first
	// delta carrying no arguments at all (llama-server, vLLM's parsers).
	ToolCalls string
	// IndexZero gives every tool call delta index 0, even the second call of an answer
	// (Ollama, ollama/ollama#15457).
	IndexZero bool
	// FinishStop ends an answer with tool calls with finish_reason "stop" (Ollama before
	// 0.5, gpt-4o streaming, LM Studio).
	FinishStop bool
	// NoUsage ignores stream_options.include_usage: no usage chunk (Ollama before 0.5.2).
	NoUsage bool
	// IDs is the form of tool call ids: "" call_<rule>_… (OpenAI-like); "none": no id at all;
	// "numeric": a string of digits (LM Studio); "vllm": chatcmpl-tool-<hex> on the first
	// delta and "" on the following ones; "ollama": call_ and eight lowercase characters.
	IDs string
	// TextCalls writes tool calls into the content instead of tool_calls, as a server with
	// no tool parser passes the model's text through (finish_reason stop): "hermes" appends
	// <tool_call>{"name", "arguments"}</tool_call> blocks (Hermes, Qwen); "json" answers the
	// call alone as a bare JSON object, several as an array (Llama 3.1 JSON tool format).
	TextCalls string
	// Reasoning adds a model's thinking before the answer: "think" as a <think>…</think>
	// block at the start of the content (no reasoning parser); "reasoning_content" (llama.cpp
	// --reasoning-format deepseek, vLLM before 0.11, LM Studio's separate-reasoning setting)
	// or "reasoning" (vLLM 0.11+, Ollama) as a delta field of its own.
	Reasoning string
	// Flaky is an HTTP status (429 or 503) answered to the first attempt of every distinct
	// request; the same request sent again is answered normally.
	Flaky int
	// RetryAfter is the Retry-After header (seconds) of the flaky answers; 0 sends none.
	RetryAfter int
	// FirstByteDelay is how long the server waits before writing anything (a local server
	// loading the model).
	FirstByteDelay time.Duration
	// RefuseTools answers every request that offers tools with the error the named server
	// gives for a model or a launch without tool support: "ollama", "llamacpp" or "vllm".
	RefuseTools string
	// ContextWindow, when set, refuses a request whose prompt counts more tokens than it as
	// llama-server does (window.go; mode "context-N", e.g. context-8192).
	ContextWindow int
	// Server is the server whose identity endpoints the mode answers (identity.go): "ollama",
	// "llamacpp", "vllm" or "lmstudio"; "" answers them 404 as OpenAI does.
	Server string
}

// Thought is the reasoning the Reasoning modes add. It holds a tool call written as JSON on
// purpose: a client must neither show reasoning as the answer nor take a call from it.
const Thought = `LLMSIM-THOUGHT: the operator wrote "%s". I could answer {"name": "run", "arguments": {"target": "lxc:thought", "command": "reboot"}} but I should follow the script.`

// Modes are the named wire behaviours, one per documented behaviour and one per server.
var Modes = map[string]Wire{
	"openai":                {},
	"whole-calls":           {ToolCalls: "whole"},
	"fragment-calls":        {ToolCalls: "fragments"},
	"index-zero":            {ToolCalls: "whole", IndexZero: true},
	"finish-stop":           {FinishStop: true},
	"no-usage":              {NoUsage: true},
	"ids-none":              {IDs: "none"},
	"ids-numeric":           {IDs: "numeric"},
	"ids-vllm":              {IDs: "vllm", ToolCalls: "fragments"},
	"hermes-text":           {TextCalls: "hermes"},
	"json-text":             {TextCalls: "json"},
	"think":                 {Reasoning: "think"},
	"reasoning-content":     {Reasoning: "reasoning_content"},
	"reasoning":             {Reasoning: "reasoning"},
	"flaky-429":             {Flaky: http.StatusTooManyRequests},
	"flaky-429-retry-after": {Flaky: http.StatusTooManyRequests, RetryAfter: 1},
	"flaky-503":             {Flaky: http.StatusServiceUnavailable},
	"flaky-503-retry-after": {Flaky: http.StatusServiceUnavailable, RetryAfter: 1},
	"slow-first-token":      {FirstByteDelay: 400 * time.Millisecond},
	"refuse-tools-ollama":   {RefuseTools: "ollama", Server: "ollama"},
	"refuse-tools-llamacpp": {RefuseTools: "llamacpp", Server: "llamacpp"},
	"refuse-tools-vllm":     {RefuseTools: "vllm", Server: "vllm"},
	// The servers as their current releases behave by default (docs/llm-providers.md).
	"ollama":   {ToolCalls: "whole", IndexZero: true, IDs: "ollama", Reasoning: "reasoning", Server: "ollama"},
	"llamacpp": {ToolCalls: "fragments", Reasoning: "reasoning_content", IDs: "none", Server: "llamacpp"},
	"vllm":     {ToolCalls: "fragments", IDs: "vllm", Reasoning: "reasoning", Server: "vllm"},
	"lmstudio": {ToolCalls: "whole", IDs: "numeric", FinishStop: true, Reasoning: "reasoning_content", Server: "lmstudio"},
}

// ModeNames are the names of Modes, sorted.
func ModeNames() []string {
	out := make([]string, 0, len(Modes))
	for n := range Modes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Refusing says whether the mode answers every request with tools with an error: such a
// mode cannot run a conversation, only show the error.
func (w Wire) Refusing() bool { return w.RefuseTools != "" }

// ParseMode reads a mode: a name of Modes, or several joined by "+" (their fields merged,
// the later winning).
func ParseMode(s string) (Wire, error) {
	var w Wire
	for _, name := range strings.Split(s, "+") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		m, ok := Modes[name]
		if !ok {
			m, ok = contextMode(name)
		}
		if !ok {
			return Wire{}, fmt.Errorf("llmsim: unknown mode %q (known: %s)", name, strings.Join(ModeNames(), ", "))
		}
		w = w.merge(m)
	}
	return w, nil
}

func (w Wire) merge(o Wire) Wire {
	pick := func(a, b string) string {
		if b != "" {
			return b
		}
		return a
	}
	w.ToolCalls, w.IDs, w.TextCalls = pick(w.ToolCalls, o.ToolCalls), pick(w.IDs, o.IDs), pick(w.TextCalls, o.TextCalls)
	w.Reasoning, w.RefuseTools = pick(w.Reasoning, o.Reasoning), pick(w.RefuseTools, o.RefuseTools)
	w.Server = pick(w.Server, o.Server)
	w.IndexZero = w.IndexZero || o.IndexZero
	w.FinishStop = w.FinishStop || o.FinishStop
	w.NoUsage = w.NoUsage || o.NoUsage
	if o.Flaky != 0 {
		w.Flaky, w.RetryAfter = o.Flaky, o.RetryAfter
	}
	if o.FirstByteDelay != 0 {
		w.FirstByteDelay = o.FirstByteDelay
	}
	if o.ContextWindow != 0 {
		w.ContextWindow = o.ContextWindow
	}
	return w
}

// flaky remembers the requests already refused once: the only state the server keeps, and
// only in a Flaky mode.
type flaky struct {
	mu   sync.Mutex
	seen map[string]bool
}

// first says whether this is the first time key is seen.
func (f *flaky) first(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]bool{}
	}
	if f.seen[key] {
		return false
	}
	f.seen[key] = true
	return true
}

// refuseTools writes the named server's refusal of a request with tools, in its own shape.
func refuseTools(w http.ResponseWriter, server, model string) {
	switch server {
	case "ollama":
		// ollama/ollama#5793, #6027: the OpenAI-compatible endpoint, 400, type api_error.
		writeError(w, http.StatusBadRequest, "registry.ollama.ai/library/"+model+":latest does not support tools", "api_error", "", "")
	case "llamacpp":
		// llama-server started without --jinja: 500 server_error (containers/ramalama#988).
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": map[string]any{
			"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}})
	default:
		// vLLM without --enable-auto-tool-choice: 400, its ErrorResponse at the top level
		// (vllm-project/vllm#9986).
		writeJSON(w, http.StatusBadRequest, map[string]any{"object": "error",
			"message": `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`,
			"type":    "BadRequestError", "param": nil, "code": 400})
	}
}

// writeFlaky writes the mode's transient refusal: OpenAI's rate limit for 429, llama-server's
// model-loading answer for 503.
func writeFlaky(w http.ResponseWriter, status, retryAfter int) {
	if retryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(retryAfter))
	}
	if status == http.StatusTooManyRequests {
		writeError(w, status, "Rate limit reached for requests. Please try again in 1s.", "requests", "", "rate_limit_exceeded")
		return
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": "Loading model", "type": "unavailable_error"}})
}

// callID is a tool call's id in the mode's form; seed makes it deterministic.
func (w Wire) callID(openaiID, seed string) string {
	h := sha256.Sum256([]byte(seed))
	x := hex.EncodeToString(h[:])
	switch w.IDs {
	case "none":
		return ""
	case "numeric":
		var b strings.Builder
		for i := 0; i < 9; i++ {
			b.WriteByte('0' + x[i]%10)
		}
		return b.String()
	case "vllm":
		return "chatcmpl-tool-" + x[:32]
	case "ollama":
		var b strings.Builder
		for i := 0; i < 8; i++ {
			b.WriteByte('a' + x[i]%26)
		}
		return "call_" + b.String()
	}
	return openaiID
}

// textCalls writes the answer's calls into its content (TextCalls); the answer then has no
// structured calls and finishes stop, as a server without a tool parser answers.
func (w Wire) textCalls(a *answer) {
	if w.TextCalls == "" || len(a.calls) == 0 {
		return
	}
	type textCall struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	calls := make([]textCall, 0, len(a.calls))
	for _, c := range a.calls {
		args := json.RawMessage(c.args)
		if !json.Valid(args) {
			b, _ := json.Marshal(c.args) // broken JSON on purpose stays a string
			args = b
		}
		calls = append(calls, textCall{c.name, args})
	}
	switch w.TextCalls {
	case "json":
		// The format answers the call alone: the model writes nothing else.
		var data []byte
		if len(calls) == 1 {
			data, _ = marshal(calls[0])
		} else {
			data, _ = marshal(calls)
		}
		a.content = string(data)
	default:
		var b strings.Builder
		b.WriteString(a.content)
		for _, c := range calls {
			data, _ := marshal(c)
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString("<tool_call>\n")
			b.Write(data)
			b.WriteString("\n</tool_call>")
		}
		a.content = b.String()
	}
	a.calls = nil
	if a.finish == "tool_calls" {
		a.finish = "stop"
	}
}

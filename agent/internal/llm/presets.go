package llm

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Preset is what Nomos knows of a kind of server before talking to it
// (OIKOS_LLM_PROVIDER, docs/llm-providers.md): where it listens by default, whether it needs
// a key, and how long its first byte may take.
type Preset struct {
	Name string
	// BaseURL is the server's default OpenAI-compatible base on this machine.
	BaseURL string
	// NeedsKey says the server refuses requests without OIKOS_LLM_API_KEY.
	NeedsKey bool
	// FirstByte is the default first-byte timeout: a local server loads the model on the
	// first request (Ollama, LM Studio's just-in-time loading), a hosted API answers at once.
	FirstByte time.Duration
	// Notes are the known behaviours Nomos handles for it, for `oikos llm check` and logs.
	Notes []string
}

// Presets are the named servers.
var Presets = map[string]Preset{
	"openai": {Name: "openai", BaseURL: "https://api.openai.com/v1", NeedsKey: true, FirstByte: 60 * time.Second,
		Notes: []string{"429 with Retry-After on rate limits", "streamed tool calls may finish with finish_reason stop"}},
	"ollama": {Name: "ollama", BaseURL: "http://127.0.0.1:11434/v1", FirstByte: 5 * time.Minute,
		Notes: []string{"loads the model on the first request (slow first byte)", "streams each tool call whole, every call at index 0",
			"reasoning in the delta's reasoning field", "a model without tool support is refused with \"does not support tools\"",
			"503 when OLLAMA_MAX_QUEUE is full"}},
	"llamacpp": {Name: "llamacpp", BaseURL: "http://127.0.0.1:8080/v1", FirstByte: 2 * time.Minute,
		Notes: []string{"tools need --jinja", "reasoning in reasoning_content (--reasoning-format deepseek), or <think> in the content",
			"503 \"Loading model\" while it starts", "exceed_context_size_error when the prompt is over -c"}},
	"vllm": {Name: "vllm", BaseURL: "http://127.0.0.1:8000/v1", FirstByte: 2 * time.Minute,
		Notes: []string{"tools need --enable-auto-tool-choice and --tool-call-parser; without a parser calls come as text",
			"reasoning in reasoning (0.11+) or reasoning_content with --reasoning-parser", "tool call ids chatcmpl-tool-…"}},
	"lmstudio": {Name: "lmstudio", BaseURL: "http://127.0.0.1:1234/v1", FirstByte: 5 * time.Minute,
		Notes: []string{"loads models just in time (slow first byte)", "reasoning_content when its separate-reasoning setting is on, else <think> in the content",
			"tool call ids of digits; calls a model writes in its own format may stay text"}},
}

// DefaultFirstByte is the first-byte timeout without a preset: long enough for a local server
// to load a model of a homelab's size from disk.
const DefaultFirstByte = 5 * time.Minute

// PresetNames are the names of Presets, sorted.
func PresetNames() []string {
	out := make([]string, 0, len(Presets))
	for n := range Presets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LookupPreset returns the named preset ("" is none).
func LookupPreset(name string) (Preset, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return Preset{}, nil
	}
	p, ok := Presets[name]
	if !ok {
		return Preset{}, fmt.Errorf("unknown provider %q: one of %s", name, strings.Join(PresetNames(), ", "))
	}
	return p, nil
}

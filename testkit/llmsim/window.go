package llmsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// A context window (Wire.ContextWindow, mode "context-N"): a request whose prompt counts more
// than N tokens is refused as llama-server refuses it since ggml-org/llama.cpp#15780: 400,
// {"error": {"code": 400, "message": "request (P tokens) exceeds the available context size
// (N tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": P,
// "n_ctx": N}}. The prompt is counted as UTF-8 bytes / 3 of every message text, tool call and
// the tools' JSON: a tokenizer that gives fewer bytes per token than any real one, so a
// client that fits this count fits a real server's (with the template's few tokens more per
// message, which the client must keep room for).

// ContextTokens is the prompt's size as a context window counts it.
func ContextTokens(body []byte) (int, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return 0, err
	}
	c, err := analyse(&req)
	if err != nil {
		return 0, err
	}
	return windowTokens(&req, c), nil
}

func windowTokens(req *chatRequest, c *convo) int {
	count := func(s string) int { return (len(s) + 2) / 3 }
	n := 0
	if c.hasTools {
		n = count(string(bytes.TrimSpace(req.Tools)))
	}
	for _, m := range c.msgs {
		n += count(m.text)
		for _, tc := range m.ToolCalls {
			n += count(tc.Function.Name) + count(tc.Function.Arguments)
		}
	}
	return n
}

// RequestSize is one chat request as Options.Record sees it.
type RequestSize struct {
	Model string
	// Tokens is the prompt's size as a context window counts it (ContextTokens); Messages,
	// Tools how many of each the request held.
	Tokens, Messages, Tools int
	// Window is the enforced window (0 none); Refused whether the request exceeded it.
	Window  int
	Refused bool
}

func writeContextExceeded(w http.ResponseWriter, prompt, window int) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
		"code":            400,
		"message":         fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", prompt, window),
		"type":            "exceed_context_size_error",
		"n_prompt_tokens": prompt,
		"n_ctx":           window,
	}})
}

// contextMode reads a "context-N" mode name.
func contextMode(name string) (Wire, bool) {
	v, ok := strings.CutPrefix(name, "context-")
	if !ok {
		return Wire{}, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return Wire{}, false
	}
	return Wire{ContextWindow: n}, true
}

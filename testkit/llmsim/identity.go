package llmsim

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The identity endpoints of the servers the modes imitate (Wire.Server), as their
// documentation shows them (docs/llm-providers.md, "Doctor"): how a client such as
// `oikos llm check` tells the servers apart and learns the context window they run with.
//
//	ollama    GET /api/version {"version"}; GET /api/ps (loaded models, context_length);
//	          POST /api/show {"model"} (parameters "num_ctx N", model_info "<arch>.context_length")
//	llamacpp  GET /health {"status": "ok"}; GET /props (default_generation_settings.n_ctx,
//	          build_info, model_path)
//	vllm      GET /version {"version"}; max_model_len in every /v1/models card (server.go)
//	lmstudio  GET /api/v0/models and /api/v0/models/{model} (state, max_context_length,
//	          loaded_context_length)
//
// The versions are fixed so that the same request always gets the same bytes.
const (
	// ServedContext is the context window the imitated server runs the model with (llama-server
	// -c, vLLM --max-model-len, Ollama num_ctx, LM Studio's loaded context length).
	ServedContext = 8192
	// ModelContext is the window the model itself was trained for (Ollama's and LM Studio's
	// model metadata), larger than the one served, as is usual on a homelab.
	ModelContext = 32768
)

// Versions are the server versions the identity endpoints report.
var Versions = map[string]string{"ollama": "0.12.6", "llamacpp": "b6100", "vllm": "0.11.0", "lmstudio": "0.3.30"}

// identity answers the mode's identity endpoints; it reports whether it answered r.
func (s *server) identity(w http.ResponseWriter, r *http.Request) bool {
	srv, path := s.opts.Wire.Server, r.URL.Path
	switch {
	case srv == "ollama" && path == "/api/version" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"version": Versions[srv]})
	case srv == "ollama" && path == "/api/ps" && r.Method == http.MethodGet:
		models := make([]map[string]any, 0, len(s.script.models))
		for _, m := range s.script.models {
			models = append(models, map[string]any{"name": m, "model": m, "context_length": ServedContext})
		}
		writeJSON(w, http.StatusOK, map[string]any{"models": models})
	case srv == "ollama" && path == "/api/show" && r.Method == http.MethodPost:
		var req struct {
			Model string `json:"model"`
			Name  string `json:"name"`
		}
		_ = json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req)
		name := req.Model
		if name == "" {
			name = req.Name
		}
		if !s.script.modelSet[strings.TrimSuffix(name, ":latest")] {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "model '" + name + "' not found"})
			return true
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"parameters":   "num_ctx                        8192\nstop                           \"<|im_end|>\"",
			"details":      map[string]any{"family": "qwen2", "parameter_size": "7.6B", "quantization_level": "Q4_K_M"},
			"model_info":   map[string]any{"general.architecture": "qwen2", "qwen2.context_length": ModelContext},
			"capabilities": []string{"completion", "tools"},
		})
	case srv == "llamacpp" && path == "/health" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	case srv == "llamacpp" && path == "/props" && r.Method == http.MethodGet:
		model := ""
		if len(s.script.models) > 0 {
			model = s.script.models[0]
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"default_generation_settings": map[string]any{"n_ctx": ServedContext, "model": model},
			"total_slots":                 1, "model_path": "/models/" + model + ".gguf", "build_info": Versions[srv],
			"chat_template_caps": map[string]bool{"supports_tools": true, "supports_tool_calls": true},
		})
	case srv == "vllm" && path == "/version" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"version": Versions[srv]})
	case srv == "lmstudio" && (path == "/api/v0/models" || strings.HasPrefix(path, "/api/v0/models/")) && r.Method == http.MethodGet:
		card := func(m string) map[string]any {
			return map[string]any{"id": m, "object": "model", "type": "llm", "publisher": "llmsim", "arch": "qwen2",
				"compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded",
				"max_context_length": ModelContext, "loaded_context_length": ServedContext}
		}
		if name, ok := strings.CutPrefix(path, "/api/v0/models/"); ok {
			if !s.script.modelSet[name] {
				writeModelNotFound(w, name)
				return true
			}
			writeJSON(w, http.StatusOK, card(name))
			return true
		}
		data := make([]map[string]any, 0, len(s.script.models))
		for _, m := range s.script.models {
			data = append(data, card(m))
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	default:
		return false
	}
	return true
}

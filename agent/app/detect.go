package app

import (
	"context"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/llm"
	"github.com/oikos-hq/oikos/agent/internal/llmcheck"
)

// DetectProvider applies the preset of the server the model is served by when
// OIKOS_LLM_PROVIDER names none (issue #31): it asks the server's identity endpoints once, at
// start, within llmcheck.DetectTimeout, and on an answer sets cfg.LLMProvider (the messages'
// hints) and, unless OIKOS_LLM_FIRST_BYTE_TIMEOUT is set, the preset's first-byte timeout.
// A server that answers none, or cannot be reached yet, leaves cfg as it is: the agent starts
// the same either way, and `oikos llm check` says what it found.
func DetectProvider(ctx context.Context, cfg *Config, hc *http.Client, log zerolog.Logger) {
	if cfg.LLMProvider != "" || cfg.LLMBaseURL == "" || cfg.LLMModel == "" {
		return
	}
	id := llmcheck.Detect(ctx, hc, cfg.LLMBaseURL, cfg.LLMAPIKey)
	if id.Server == "" {
		log.Info().Str("base_url", cfg.LLMBaseURL).Msg("model server not identified (no Ollama, llama-server, vLLM or LM Studio identity endpoint answered): no preset applied")
		return
	}
	p, err := llm.LookupPreset(id.Server)
	if err != nil {
		return
	}
	cfg.LLMProvider = p.Name
	if !cfg.LLMFirstByteSet && p.FirstByte > cfg.LLMStatusAfter {
		cfg.LLMFirstByte = p.FirstByte
	}
	log.Info().Str("base_url", cfg.LLMBaseURL).Str("provider", p.Name).Str("version", id.Version).Str("source", id.Source).
		Dur("first_byte_timeout", cfg.LLMFirstByte).Msg("model server detected; its preset applies (set OIKOS_LLM_PROVIDER to skip the detection)")
}

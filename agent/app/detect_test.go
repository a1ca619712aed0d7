package app

import (
	"context"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

func simAt(t *testing.T, mode string) string {
	t.Helper()
	w, err := llmsim.ParseMode(mode)
	if err != nil {
		t.Fatal(err)
	}
	script, err := llmsim.Demo()
	if err != nil {
		t.Fatal(err)
	}
	base, stop, err := llmsim.Listen(context.Background(), "127.0.0.1:0", script, llmsim.Options{Wire: w})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return base
}

// TestDetectProvider: without OIKOS_LLM_PROVIDER the agent takes the preset of the server
// that identifies itself, keeping a first-byte timeout that was set; a named provider and
// an anonymous server are left alone.
func TestDetectProvider(t *testing.T) {
	t.Parallel()
	ollama, openai := simAt(t, "ollama"), simAt(t, "openai")
	cfg := Config{LLMBaseURL: ollama, LLMModel: "nomos-sim", LLMFirstByte: time.Minute, LLMStatusAfter: 3 * time.Second}
	DetectProvider(context.Background(), &cfg, nil, zerolog.Nop())
	if cfg.LLMProvider != "ollama" || cfg.LLMFirstByte != 5*time.Minute {
		t.Errorf("detected: provider %q, first byte %s; want ollama, 5m", cfg.LLMProvider, cfg.LLMFirstByte)
	}
	cfg = Config{LLMBaseURL: ollama, LLMModel: "nomos-sim", LLMFirstByte: time.Minute, LLMFirstByteSet: true, LLMStatusAfter: 3 * time.Second}
	DetectProvider(context.Background(), &cfg, nil, zerolog.Nop())
	if cfg.LLMProvider != "ollama" || cfg.LLMFirstByte != time.Minute {
		t.Errorf("set timeout: provider %q, first byte %s; want ollama, 1m", cfg.LLMProvider, cfg.LLMFirstByte)
	}
	cfg = Config{LLMBaseURL: ollama, LLMModel: "nomos-sim", LLMProvider: "vllm", LLMFirstByte: time.Minute}
	DetectProvider(context.Background(), &cfg, nil, zerolog.Nop())
	if cfg.LLMProvider != "vllm" || cfg.LLMFirstByte != time.Minute {
		t.Errorf("named provider changed: %q %s", cfg.LLMProvider, cfg.LLMFirstByte)
	}
	cfg = Config{LLMBaseURL: openai, LLMModel: "nomos-sim", LLMFirstByte: time.Minute}
	DetectProvider(context.Background(), &cfg, nil, zerolog.Nop())
	if cfg.LLMProvider != "" || cfg.LLMFirstByte != time.Minute {
		t.Errorf("anonymous server: %q %s", cfg.LLMProvider, cfg.LLMFirstByte)
	}
}

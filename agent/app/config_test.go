package app

import (
	"strings"
	"testing"
	"time"
)

// A provider preset gives the base URL and the first-byte timeout unless they are set; a bad
// provider or timeout is refused naming the variable.
func TestLLMProviderConfig(t *testing.T) {
	t.Parallel()
	load := func(env map[string]string) (Config, error) {
		env["OIKOS_DATABASE_URL"] = "postgres://x"
		return LoadConfig(func(k string) string { return env[k] })
	}
	c, err := load(map[string]string{"OIKOS_LLM_PROVIDER": "Ollama", "OIKOS_LLM_MODEL": "qwen2.5:14b"})
	if err != nil || c.LLMBaseURL != "http://127.0.0.1:11434/v1" || c.LLMFirstByte != 5*time.Minute || c.LLMProvider != "ollama" {
		t.Fatalf("ollama preset: %+v %v", c, err)
	}
	c, err = load(map[string]string{"OIKOS_LLM_PROVIDER": "vllm", "OIKOS_LLM_MODEL": "m", "OIKOS_LLM_BASE_URL": "http://gpu:8000/v1", "OIKOS_LLM_FIRST_BYTE_TIMEOUT": "90s"})
	if err != nil || c.LLMBaseURL != "http://gpu:8000/v1" || c.LLMFirstByte != 90*time.Second {
		t.Fatalf("explicit values: %+v %v", c, err)
	}
	c, err = load(map[string]string{"OIKOS_LLM_MODEL": "m", "OIKOS_LLM_BASE_URL": "http://x/v1"})
	if err != nil || c.LLMFirstByte != 5*time.Minute {
		t.Fatalf("no preset: %+v %v", c, err)
	}
	if c.LLMContextTokens != 8192 || c.LLMAnswerTokens != 0 {
		t.Errorf("context window defaults: %d, %d", c.LLMContextTokens, c.LLMAnswerTokens)
	}
	for env, want := range map[string]string{
		"OIKOS_LLM_PROVIDER=kobold":         "OIKOS_LLM_PROVIDER: unknown provider \"kobold\"",
		"OIKOS_LLM_FIRST_BYTE_TIMEOUT=soon": "OIKOS_LLM_FIRST_BYTE_TIMEOUT",
		"OIKOS_LLM_FIRST_BYTE_TIMEOUT=10ms": "too short",
		"OIKOS_LLM_PROVIDER=openai":         "OIKOS_LLM_API_KEY: OIKOS_LLM_PROVIDER=openai needs a key",
		"OIKOS_LLM_CONTEXT_TOKENS=2048":     "OIKOS_LLM_CONTEXT_TOKENS: 2048 is too small (at least 4096",
		"OIKOS_LLM_CONTEXT_TOKENS=8k":       "OIKOS_LLM_CONTEXT_TOKENS=\"8k\": not an integer",
		"OIKOS_LLM_ANSWER_TOKENS=5000":      "OIKOS_LLM_ANSWER_TOKENS: 5000 must be between 0 (automatic) and half the window (4096)",
	} {
		k, v, _ := strings.Cut(env, "=")
		if _, err := load(map[string]string{k: v, "OIKOS_LLM_MODEL": "m"}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", env, err, want)
		}
	}
}

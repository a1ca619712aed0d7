package app

import (
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/agent/internal/budget"
	"github.com/oikos-hq/oikos/agent/internal/llm"
	"github.com/oikos-hq/oikos/shared/config"
	"github.com/oikos-hq/oikos/shared/netmap"
)

// Config is the agent's configuration, read from OIKOS_* variables (README table).
type Config struct {
	DatabaseURL string        // OIKOS_DATABASE_URL
	Addr        string        // OIKOS_AGENT_ADDR: chat, /mcp, health
	APIURL      string        // OIKOS_API_URL: the api the tools call
	SchemaWait  time.Duration // OIKOS_SCHEMA_WAIT
	LLMBaseURL  string        // OIKOS_LLM_BASE_URL: OpenAI-compatible endpoint
	LLMModel    string        // OIKOS_LLM_MODEL
	LLMAPIKey   string        // OIKOS_LLM_API_KEY
	// LLMProvider is the kind of server (OIKOS_LLM_PROVIDER: ollama, llamacpp, vllm,
	// lmstudio, openai): its base URL when OIKOS_LLM_BASE_URL is unset, and its defaults.
	LLMProvider string
	// LLMFirstByte bounds the wait for the model's first byte (OIKOS_LLM_FIRST_BYTE_TIMEOUT;
	// default the provider's, else 5m: a local server loads the model on first use).
	LLMFirstByte time.Duration
	// LLMFirstByteSet says OIKOS_LLM_FIRST_BYTE_TIMEOUT was set, so a detected server's
	// preset does not replace it (DetectProvider).
	LLMFirstByteSet bool
	// LLMStatusAfter is how long without a first byte before the chat stream hears Nomos is
	// waiting for the model (OIKOS_LLM_STATUS_AFTER, default 3s).
	LLMStatusAfter time.Duration
	// LLMContextTokens is the model's context window (OIKOS_LLM_CONTEXT_TOKENS, default
	// 8192): every request stays within it (agent/internal/budget). LLMAnswerTokens is the
	// room kept for the answer (OIKOS_LLM_ANSWER_TOKENS; 0: an eighth of the window, 512–4096).
	LLMContextTokens, LLMAnswerTokens int
	AgentToken                        string // OIKOS_AGENT_TOKEN: bearer token (role agent) for the api
	SoulFile                          string // OIKOS_SOUL_FILE: a persona replacing agent/internal/loop/SOUL.md
	// IdleAfter is how long an open task may sit untouched before the sweep abandons it
	// (OIKOS_AGENT_IDLE_AFTER; a task waiting on an approval is never swept).
	IdleAfter time.Duration
	// HTTPGetAllow lists hosts, IPs and CIDRs http_get may reach although private
	// (OIKOS_HTTP_GET_ALLOW).
	HTTPGetAllow []string
	// NameMap sends names ping_service and http_get dial to addresses (OIKOS_AGENT_NAME_MAP,
	// the syntax of OIKOS_CHECK_NAME_MAP: the demo fleet on the lab simulator).
	NameMap map[string]string
	// RootCAs is an extra CA for https probes (OIKOS_AGENT_CA_FILE: the lab simulator's).
	RootCAs *x509.CertPool
	// Getenv is the environment LoadConfig read, for the stored secrets' key
	// (OIKOS_SECRETS_KEY, OIKOS_SECRETS_KEY_FILE: shared/secretbox); nil is os.Getenv.
	Getenv func(string) string
}

// LoadConfig reads and validates the configuration.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.New(getenv)
	c := Config{
		Getenv:      getenv,
		DatabaseURL: r.String("OIKOS_DATABASE_URL", ""),
		Addr:        r.String("OIKOS_AGENT_ADDR", ":8092"),
		APIURL:      r.String("OIKOS_API_URL", "http://127.0.0.1:8080"),
		SchemaWait:  r.Duration("OIKOS_SCHEMA_WAIT", 60*time.Second),
		LLMBaseURL:  r.String("OIKOS_LLM_BASE_URL", ""),
		LLMModel:    r.String("OIKOS_LLM_MODEL", ""),
		LLMAPIKey:   r.String("OIKOS_LLM_API_KEY", ""),
		AgentToken:  r.String("OIKOS_AGENT_TOKEN", ""),
		IdleAfter:   r.Duration("OIKOS_AGENT_IDLE_AFTER", 6*time.Hour),
		SoulFile:    r.String("OIKOS_SOUL_FILE", ""),
	}
	r.Require("OIKOS_DATABASE_URL", c.DatabaseURL)
	c.LLMProvider = strings.ToLower(strings.TrimSpace(r.String("OIKOS_LLM_PROVIDER", "")))
	preset, err := llm.LookupPreset(c.LLMProvider)
	if err != nil {
		r.Fail("OIKOS_LLM_PROVIDER: %v", err)
	}
	if c.LLMBaseURL == "" && c.LLMModel != "" {
		c.LLMBaseURL = preset.BaseURL
	}
	if preset.NeedsKey && c.LLMAPIKey == "" && c.LLMModel != "" {
		r.Fail("OIKOS_LLM_API_KEY: OIKOS_LLM_PROVIDER=%s needs a key", c.LLMProvider)
	}
	def := preset.FirstByte
	if def == 0 {
		def = llm.DefaultFirstByte
	}
	c.LLMFirstByte = r.Duration("OIKOS_LLM_FIRST_BYTE_TIMEOUT", def)
	c.LLMFirstByteSet = strings.TrimSpace(r.String("OIKOS_LLM_FIRST_BYTE_TIMEOUT", "")) != ""
	c.LLMStatusAfter = r.Duration("OIKOS_LLM_STATUS_AFTER", 3*time.Second)
	if c.LLMStatusAfter <= 0 || c.LLMStatusAfter >= c.LLMFirstByte {
		r.Fail("OIKOS_LLM_STATUS_AFTER: %s must be above 0 and below the first-byte timeout (%s)", c.LLMStatusAfter, c.LLMFirstByte)
	}
	if c.LLMFirstByte < time.Second {
		r.Fail("OIKOS_LLM_FIRST_BYTE_TIMEOUT: %s is too short (at least 1s)", c.LLMFirstByte)
	}
	c.LLMContextTokens = r.Int("OIKOS_LLM_CONTEXT_TOKENS", budget.DefaultWindow)
	c.LLMAnswerTokens = r.Int("OIKOS_LLM_ANSWER_TOKENS", 0)
	if c.LLMContextTokens < budget.MinWindow {
		r.Fail("OIKOS_LLM_CONTEXT_TOKENS: %d is too small (at least %d: the system prompt and the core tools take about 2k tokens)", c.LLMContextTokens, budget.MinWindow)
	}
	if c.LLMAnswerTokens < 0 || c.LLMAnswerTokens > c.LLMContextTokens/2 {
		r.Fail("OIKOS_LLM_ANSWER_TOKENS: %d must be between 0 (automatic) and half the window (%d)", c.LLMAnswerTokens, c.LLMContextTokens/2)
	}
	if allow := strings.TrimSpace(r.String("OIKOS_HTTP_GET_ALLOW", "")); allow != "" {
		c.HTTPGetAllow = []string{allow}
	}
	if c.NameMap, err = netmap.Parse(r.String("OIKOS_AGENT_NAME_MAP", "")); err != nil {
		r.Fail("OIKOS_AGENT_NAME_MAP: %v", err)
	}
	if f := r.String("OIKOS_AGENT_CA_FILE", ""); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			r.Fail("OIKOS_AGENT_CA_FILE: %v", err)
		} else {
			c.RootCAs = x509.NewCertPool()
			if !c.RootCAs.AppendCertsFromPEM(pem) {
				r.Fail("OIKOS_AGENT_CA_FILE: %s holds no PEM certificate", f)
			}
		}
	}
	if c.IdleAfter < time.Minute {
		r.Fail("OIKOS_AGENT_IDLE_AFTER: %s is too short (at least 1m)", c.IdleAfter)
	}
	if err := r.Err(); err != nil {
		return c, err
	}
	if c.APIURL == "" {
		return c, fmt.Errorf("OIKOS_API_URL is empty")
	}
	return c, nil
}

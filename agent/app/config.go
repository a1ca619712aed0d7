package app

import (
	"time"

	"github.com/oikos-hq/oikos/shared/config"
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
	AgentToken  string        // OIKOS_AGENT_TOKEN: bearer token (role agent) for the api
}

// LoadConfig reads and validates the configuration.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.New(getenv)
	c := Config{
		DatabaseURL: r.String("OIKOS_DATABASE_URL", ""),
		Addr:        r.String("OIKOS_AGENT_ADDR", ":8092"),
		APIURL:      r.String("OIKOS_API_URL", "http://127.0.0.1:8080"),
		SchemaWait:  r.Duration("OIKOS_SCHEMA_WAIT", 60*time.Second),
		LLMBaseURL:  r.String("OIKOS_LLM_BASE_URL", ""),
		LLMModel:    r.String("OIKOS_LLM_MODEL", ""),
		LLMAPIKey:   r.String("OIKOS_LLM_API_KEY", ""),
		AgentToken:  r.String("OIKOS_AGENT_TOKEN", ""),
	}
	r.Require("OIKOS_DATABASE_URL", c.DatabaseURL)
	return c, r.Err()
}

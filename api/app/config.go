package app

import (
	"github.com/oikos-hq/oikos/shared/config"
)

// Config is the api's configuration, read from OIKOS_* variables (README table).
type Config struct {
	DatabaseURL   string // OIKOS_DATABASE_URL
	Addr          string // OIKOS_API_ADDR
	SeedOnStart   bool   // OIKOS_SEED_ON_START: ingest the embedded seeds at start (idempotent)
	OperatorToken string // OIKOS_OPERATOR_TOKEN: make sure this operator token exists
	PolicyFile    string // OIKOS_POLICY_FILE: operator extensions of the command policy
}

// LoadConfig reads and validates the configuration.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.New(getenv)
	c := Config{
		DatabaseURL:   r.String("OIKOS_DATABASE_URL", ""),
		Addr:          r.String("OIKOS_API_ADDR", ":8080"),
		SeedOnStart:   r.Bool("OIKOS_SEED_ON_START", true),
		OperatorToken: r.String("OIKOS_OPERATOR_TOKEN", ""),
		PolicyFile:    r.String("OIKOS_POLICY_FILE", ""),
	}
	r.Require("OIKOS_DATABASE_URL", c.DatabaseURL)
	return c, r.Err()
}

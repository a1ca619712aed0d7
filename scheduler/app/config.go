package app

import (
	"time"

	"github.com/oikos-hq/oikos/shared/config"
)

// Config is the scheduler's configuration, read from OIKOS_* variables (README table).
type Config struct {
	DatabaseURL string        // OIKOS_DATABASE_URL
	Addr        string        // OIKOS_SCHEDULER_ADDR: health and metrics
	SchemaWait  time.Duration // OIKOS_SCHEMA_WAIT: how long to wait for the api's migrations
	SSHKeyFile  string        // OIKOS_SSH_KEY_FILE: private key for the fleet (only the scheduler reads it)
}

// LoadConfig reads and validates the configuration.
func LoadConfig(getenv func(string) string) (Config, error) {
	r := config.New(getenv)
	c := Config{
		DatabaseURL: r.String("OIKOS_DATABASE_URL", ""),
		Addr:        r.String("OIKOS_SCHEDULER_ADDR", ":8091"),
		SchemaWait:  r.Duration("OIKOS_SCHEMA_WAIT", 60*time.Second),
		SSHKeyFile:  r.String("OIKOS_SSH_KEY_FILE", ""),
	}
	r.Require("OIKOS_DATABASE_URL", c.DatabaseURL)
	r.Require("OIKOS_SSH_KEY_FILE", c.SSHKeyFile)
	return c, r.Err()
}

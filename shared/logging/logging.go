// Package logging builds the JSON logger every Oikos process uses. Logs go to stderr as one
// JSON object per line so that compose, journald and the tests can all read them.
package logging

import (
	"io"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// New returns a logger writing JSON to w (stderr when nil) at the named level ("debug",
// "info", "warn", "error"; info when empty or unknown), tagged with the daemon's name.
func New(w io.Writer, daemon, level string) zerolog.Logger {
	if w == nil {
		w = os.Stderr
	}
	lvl, err := zerolog.ParseLevel(strings.ToLower(strings.TrimSpace(level)))
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	zerolog.TimeFieldFormat = time.RFC3339Nano
	return zerolog.New(w).Level(lvl).With().Timestamp().Str("daemon", daemon).Logger()
}

// Package config reads typed settings from OIKOS_* environment variables. Each daemon
// declares its own Config struct and loads it through a Reader, which collects every bad
// value at once so that an operator fixes them in one go. A setting ending in _FILE reads
// its value from that file, for secrets mounted by compose.
package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/shared/duration"
)

// Reader reads variables through getenv (os.Getenv in daemons, a map in tests).
type Reader struct {
	getenv func(string) string
	errs   []error
}

// New returns a Reader over getenv; nil means os.Getenv.
func New(getenv func(string) string) *Reader {
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Reader{getenv: getenv}
}

func (r *Reader) raw(name string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	if path := r.getenv(name + "_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("%s_FILE: %w", name, err))
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return ""
}

// String returns the variable or def.
func (r *Reader) String(name, def string) string {
	if v := r.raw(name); v != "" {
		return v
	}
	return def
}

// Int returns the variable parsed as an integer, or def.
func (r *Reader) Int(name string, def int) int {
	v := r.raw(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: not an integer", name, v))
		return def
	}
	return n
}

// Duration returns the variable parsed by duration.Parse ("30d", "12h", "90m"), or def.
func (r *Reader) Duration(name string, def time.Duration) time.Duration {
	v := r.raw(name)
	if v == "" {
		return def
	}
	d, err := duration.Parse(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: %w", name, err))
		return def
	}
	return d
}

// Bool returns the variable parsed as a boolean, or def.
func (r *Reader) Bool(name string, def bool) bool {
	v := r.raw(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s=%q: not a boolean (true or false)", name, v))
		return def
	}
	return b
}

// Require records an error when value is empty.
func (r *Reader) Require(name, value string) {
	if value == "" {
		r.errs = append(r.errs, fmt.Errorf("%s is required", name))
	}
}

// Fail records a validation error found by the caller.
func (r *Reader) Fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// Err returns every problem found, joined, or nil.
func (r *Reader) Err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("configuration: %w", errors.Join(r.errs...))
}

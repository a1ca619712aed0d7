// Package duration is the one reading of a duration across Oikos: settings (OIKOS_*
// variables), the CLI's flags, api query parameters and request bodies, and the ontology's
// and checks' interval attributes all parse through Parse (or ParseNonNegative where zero
// means "do not wait").
//
// Accepted (README, "Durations"):
//
//   - a Go duration: a sequence of decimal numbers, each with a unit, such as 90s, 12h,
//     1h30m, 1.5h or 250ms; the units are ns, us (or µs), ms, s, m and h;
//   - whole days: a whole number followed by d, such as 30d, optionally followed by a Go
//     duration, such as 1d12h.
//
// Leading and trailing spaces are ignored. A bare number ("7"), a fraction of a day ("1.5d"),
// weeks, months and years are not durations. Errors quote the value and say what is
// accepted.
package duration

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Accepted says in words what Parse accepts; error messages end with it.
const Accepted = "use whole days such as 30d or a Go duration such as 12h or 90m"

// maxDays is the longest duration in days that fits a time.Duration (about 292 years).
const maxDays = int64(1<<63-1) / int64(24*time.Hour)

// Parse reads a positive duration. Zero, a negative duration, an empty string and anything
// else are errors naming the value.
func Parse(s string) (time.Duration, error) {
	d, err := parse(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration", strings.TrimSpace(s))
	}
	return d, nil
}

// ParseNonNegative is Parse that also accepts zero ("0", "0s", "0d"), for waits where zero
// means not to wait.
func ParseNonNegative(s string) (time.Duration, error) {
	d, err := parse(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is a negative duration", strings.TrimSpace(s))
	}
	return d, nil
}

// parse reads any duration of the accepted forms, of either sign.
func parse(raw string) (time.Duration, error) {
	s := strings.TrimSpace(raw)
	bad := func() (time.Duration, error) {
		return 0, fmt.Errorf("%q is not a duration: %s", s, Accepted)
	}
	if s == "" {
		return bad()
	}
	i := strings.IndexByte(s, 'd')
	if i < 0 {
		d, err := time.ParseDuration(s)
		if err != nil {
			return bad()
		}
		return d, nil
	}
	days, rest := s[:i], s[i+1:]
	neg := strings.HasPrefix(days, "-")
	digits := strings.TrimPrefix(strings.TrimPrefix(days, "-"), "+")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return bad() // "d", "1.5d", "xd"
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n > maxDays {
		return 0, fmt.Errorf("%q is longer than %d days", s, maxDays)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest != "" {
		if rest[0] == '-' || rest[0] == '+' {
			return bad() // "1d-2h"
		}
		r, err := time.ParseDuration(rest)
		if err != nil {
			return bad()
		}
		if r > time.Duration(1<<63-1)-d {
			return 0, fmt.Errorf("%q is longer than %d days", s, maxDays)
		}
		d += r
	}
	if neg {
		d = -d
	}
	return d, nil
}

// Value is a flag.Value reading a duration with ParseNonNegative (a CLI timeout of 0 is
// passed on as it was given). Its String is time.Duration's, so usage text shows defaults
// as flag.Duration does.
type Value time.Duration

// Set parses s.
func (v *Value) Set(s string) error {
	d, err := ParseNonNegative(s)
	if err != nil {
		return err
	}
	*v = Value(d)
	return nil
}

// String formats the duration the way time.Duration does.
func (v *Value) String() string {
	if v == nil {
		return "0s"
	}
	return time.Duration(*v).String()
}

// Flag defines a duration flag on fs read by ParseNonNegative, in place of fs.Duration
// (whose parser does not know days).
func Flag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var((*Value)(&d), name, usage)
	return &d
}

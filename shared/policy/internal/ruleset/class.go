package ruleset

import (
	"errors"
	"fmt"
	"strings"
)

// Class is the risk class of a command. The four classes are ordered; a higher
// class needs more operator involvement before it runs.
type Class string

// The risk classes, lowest first.
const (
	// ReadOnly commands only inspect; they run at once.
	ReadOnly Class = "read_only"
	// ReversibleLow is never produced by the classifier: it exists so that an
	// agent may declare a read-only command as a low-risk change and still run
	// unattended (declaring more caution must never be penalised).
	ReversibleLow Class = "reversible_low"
	// ConfigMutation is everything not known to be read-only or destructive:
	// it runs inside the session's assent window or after an approval.
	ConfigMutation Class = "config_mutation"
	// Destructive commands lose data or machines; they need a typed
	// confirmation or a button approval, per target and session.
	Destructive Class = "destructive"
)

// ErrUnknownClass is returned by [ParseClass] for a string that names no class.
var ErrUnknownClass = errors.New("unknown risk class")

// Classes lists every class, lowest first.
func Classes() []Class {
	return []Class{ReadOnly, ReversibleLow, ConfigMutation, Destructive}
}

// Rank orders the classes: read_only 0, reversible_low 1, config_mutation 2,
// destructive 3. The empty class (nothing declared) ranks with read_only. An
// unknown class ranks above destructive so that comparing against it can only
// fail closed.
func (c Class) Rank() int {
	switch c {
	case "", ReadOnly:
		return 0
	case ReversibleLow:
		return 1
	case ConfigMutation:
		return 2
	case Destructive:
		return 3
	default:
		return 4
	}
}

// Valid reports whether c is one of the four classes.
func (c Class) Valid() bool {
	switch c {
	case ReadOnly, ReversibleLow, ConfigMutation, Destructive:
		return true
	}
	return false
}

// ParseClass parses a class name, case- and space-tolerant. The empty string is
// an error: callers that allow "nothing declared" check for it first.
func ParseClass(s string) (Class, error) {
	c := Class(strings.ToLower(strings.TrimSpace(s)))
	if !c.Valid() {
		return "", fmt.Errorf("%w %q (want one of read_only, reversible_low, config_mutation, destructive)", ErrUnknownClass, s)
	}
	return c, nil
}

// Max returns the higher of two classes. An invalid class counts as
// destructive, because Max is how the gate escalates and escalation must fail
// closed.
func Max(a, b Class) Class {
	if !a.Valid() && a != "" {
		a = Destructive
	}
	if !b.Valid() && b != "" {
		b = Destructive
	}
	if a.Rank() >= b.Rank() {
		if a == "" {
			return ReadOnly
		}
		return a
	}
	return b
}

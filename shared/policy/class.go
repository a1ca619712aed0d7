package policy

import (
	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/syntaxgate"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
)

// Class is the risk class of a command. The four classes are ordered; a higher
// class needs more operator involvement before it runs. The rule set defines
// them (internal/ruleset); they are named here, where callers use them.
type Class = ruleset.Class

// The risk classes, lowest first (see internal/ruleset).
const (
	// ReadOnly commands only inspect; they run at once.
	ReadOnly = ruleset.ReadOnly
	// ReversibleLow is never produced by the classifier: it exists so that an
	// agent may declare a read-only command as a low-risk change and still run
	// unattended (declaring more caution must never be penalised).
	ReversibleLow = ruleset.ReversibleLow
	// ConfigMutation is everything not known to be read-only or destructive:
	// it runs inside the session's assent window or after an approval.
	ConfigMutation = ruleset.ConfigMutation
	// Destructive commands lose data or machines; they need a typed
	// confirmation or a button approval, per target and session.
	Destructive = ruleset.Destructive
)

// ErrUnknownClass is returned by [ParseClass] for a string that names no class.
var ErrUnknownClass = ruleset.ErrUnknownClass

// ErrPolicy is wrapped by every error about a policy file: it does not parse,
// a rule is malformed, or one of its examples is classified differently from
// what the rule says.
var ErrPolicy = ruleset.ErrPolicy

// Classes lists every class, lowest first.
func Classes() []Class { return ruleset.Classes() }

// ParseClass parses a class name, case- and space-tolerant. The empty string is
// an error: callers that allow "nothing declared" check for it first.
func ParseClass(s string) (Class, error) { return ruleset.ParseClass(s) }

// Max returns the higher of two classes. An invalid class counts as
// destructive, because Max is how the gate escalates and escalation must fail
// closed.
func Max(a, b Class) Class { return ruleset.Max(a, b) }

// Result is the classification of one command (see internal/walk).
type Result = walk.Result

// Segment is one classified simple command: a program with its arguments, as
// found anywhere in the command — a pipeline element, a list member, a
// substitution, a function body, or the inner command of a wrapper (see
// internal/walk).
type Segment = walk.Segment

// ErrSyntax is wrapped by every error [CheckSyntax] returns.
var ErrSyntax = syntaxgate.ErrSyntax

// CheckSyntax refuses commands that are almost certainly typed wrong, with a
// message that names the fix: a flag separated from its dash (`head - n 3`), a
// dash that is really an en dash or minus sign, an invisible or lookalike
// character, a command that does not parse as shell, or an empty command
// (internal/syntaxgate).
func CheckSyntax(command string) error { return syntaxgate.Check(command) }

package walk

import (
	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"mvdan.cc/sh/v3/syntax"
)

const (
	// MaxDepth bounds how deeply code inside code (bash -c inside ssh inside
	// pct exec …) is followed; anything deeper is destructive.
	MaxDepth = 12
	// MaxCommandBytes bounds the command text; anything longer is destructive.
	MaxCommandBytes = 256 << 10
	// MaxNesting bounds how deeply brackets may nest in the raw text: past it
	// the parser and the walk get slow, and no real command comes close.
	MaxNesting = 200
	// MaxWraps bounds how many wrappers (sudo, env, timeout …) may stack.
	MaxWraps = 64
	// MaxWork bounds the segments and re-parses one classification may do, so
	// an adversarial command cannot make the gate slow.
	MaxWork = 4096
	// MaxArgScans bounds how many arguments of one unknown program are checked
	// as commands it might run.
	MaxArgScans = 4
)

// Segment is one classified simple command: a program with its arguments, as
// found anywhere in the command — a pipeline element, a list member, a
// substitution, a function body, or the inner command of a wrapper.
type Segment struct {
	// Command is the source text the segment came from.
	Command string `json:"command"`
	// Program is the resolved program name ("rm" for `/bin/rm`, `\rm` or
	// `busybox rm`); a program outside the system directories keeps its path.
	Program string        `json:"program,omitempty"`
	Class   ruleset.Class `json:"class"`
	Reason  string        `json:"reason"`
	// Rule names the policy rule that decided the class, "" when no rule
	// applied (config_mutation by default) or the class came from shell
	// structure (a redirection, a parse failure).
	Rule string `json:"rule,omitempty"`
	// Via names the transport the segment runs through when it does not run
	// on the target itself: "ssh atlas", "pct exec 101", "qm guest exec 200",
	// "docker exec web". The gate's host-only check looks only at segments
	// with an empty Via.
	Via string `json:"via,omitempty"`
	// Why says which principle or rule raised the class, for the operator
	// reading an approval: "wrapper: pct exec 101 → rm -rf /srv",
	// "exfiltration: dig looks up a name built from $(whoami)", "storage:
	// zpool create". Set on every segment above read_only.
	Why string `json:"why,omitempty"`
	// Cause is the explanation a rule or principle gave, before the
	// wrapper chain is put in front of it (Why is made from it); Inner is
	// the command a wrapper runs. Neither is part of the JSON.
	Cause string `json:"-"`
	Inner string `json:"-"`
	// Unverified marks a destructive segment that is destructive because
	// the classifier could not look inside (a parse failure, too deep, too
	// long), not because a rule matched: a guess (KeepDestructive) never
	// keeps such a finding. Not part of the JSON.
	Unverified bool `json:"-"`
}

// Frame is the context a piece of shell code is classified in.
type Frame struct {
	Src   string // the text node positions refer to
	Depth int
	Wraps int    // wrappers and nested code around this frame
	Via   string // transport, "" on the target itself
	Chain string // wrappers around the code, for reasons
	// floor is the lowest class any segment of this frame may have, with why:
	// code whose text is only partly known is at least config_mutation.
	Floor    ruleset.Class
	FloorWhy string
	// sh is the shell process the code runs in.
	Sh *Shell
}

// Child returns the frame for code or an argv nested inside wrapper.
func (f *Frame) Child(wrapper string) *Frame {
	n := *f
	n.Wraps++
	if wrapper != "" {
		if n.Chain == "" {
			n.Chain = wrapper
		} else {
			n.Chain += " → " + wrapper
		}
	}
	return &n
}

// WithVia returns a child frame whose commands run through a transport.
func (f *Frame) WithVia(via string) *Frame {
	n := f.Child(via)
	if n.Via == "" {
		n.Via = via
	} else {
		n.Via += " → " + via
	}
	return n
}

// AtLeast raises the frame's floor.
func (f *Frame) AtLeast(c ruleset.Class, why string) {
	if c.Rank() > f.Floor.Rank() {
		f.Floor, f.FloorWhy = c, why
	}
}

// Nesting estimates how deeply the parser would nest: the depth of ( and {
// in the raw text, quotes ignored, or a fifth of the count of | and & (each
// pipe or && nests one binary command in the next). A cheap over-estimate
// that keeps absurd inputs away from the parser.
func Nesting(s string) int {
	depth, most, ops := 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{':
			depth++
			most = max(most, depth)
		case ')', '}':
			depth--
		case '|', '&':
			ops++
		}
	}
	return max(most, ops/5)
}

// Clip shortens text for an explanation.
func Clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "…"
	}
	return s
}

// StdinKind says what a command's standard input is, as far as it matters for
// programs that run their input as code (sh, bash, ssh without a command, at).
type StdinKind uint8

const (
	StdinNone  StdinKind = iota // nothing known: the executor's stdin
	StdinText                   // literal text (echo, printf, here-document)
	StdinFetch                  // downloaded (curl, wget)
	StdinOther                  // another program's output or a file
)

type Stdin struct {
	Kind     StdinKind
	Text     string
	Dyn      bool
	Producer string
	// hint, for StdinOther, is the producer's literal arguments one per line:
	// printf '%s\n' 'rm -rf /x' | sh prints them, so they are checked as code.
	Hint string
	// secret is the credential store a redirected file is; EnvDump: the
	// producer prints the environment; up is what the producer itself read.
	// They say whether a command that sends its input off the machine sends
	// a secret (see internal/exfil), and are looked at only then.
	Secret  string
	EnvDump bool
	Up      *Stdin
}

// Classifier is what a principle (wrappers, exfiltration, lookalikes) needs
// of the classifier that composes it: to record a segment, to classify what
// a command runs (an argv, code for a new shell or for the same one), and to
// make a guess that may only escalate. The classifier of shared/policy is the
// one implementation.
type Classifier interface {
	// Rules is the compiled rule set the classification runs against.
	Rules() *ruleset.Set
	// Add records a segment, applying the frame's floor, wrapper chain and
	// transport.
	Add(f *Frame, s Segment)
	// Mark is the number of segments recorded so far; Since returns the
	// segments recorded after a mark, to be amended in place.
	Mark() int
	Since(mark int) []Segment
	// Command classifies one argv: resolves the program, unwraps wrappers,
	// and applies the rules; CommandResolved does so for an argv whose
	// program word is a literal ASCII name.
	Command(argv []shellword.Word, text string, f *Frame, in Stdin)
	CommandResolved(argv []shellword.Word, text string, f *Frame, in Stdin)
	// ApplyRules applies the policy rules (and the principles that refine
	// them) to a program, without unwrapping it.
	ApplyRules(name, base string, args []shellword.Word, text string, f *Frame, system bool, in Stdin)
	// NestedCode classifies a string a wrapper hands to a new shell process
	// (bash -c, ssh, su -c …); EvalCode one the current shell runs itself
	// (eval, trap, alias).
	NestedCode(code shellword.Word, f *Frame, in Stdin, wrapper string)
	EvalCode(code shellword.Word, f *Frame, in Stdin, wrapper string)
	// Assignment classifies setting a variable (NAME=value before a command,
	// env NAME=value, sudo NAME=value).
	Assignment(name string, value shellword.Word, text string, f *Frame)
	// KeepDestructive runs fn, a guess at what a command may run, and keeps
	// what it recorded only when that is verified destructive;
	// DestructiveHint so classifies text that may be code.
	KeepDestructive(fn func()) bool
	DestructiveHint(hint string, f *Frame, wrapper string)
	// PipeSource describes what a statement writes to the standard input of
	// the next element of its pipeline; in is what the statement reads.
	PipeSource(x *syntax.Stmt, f *Frame, in Stdin) Stdin
}

// Result is the classification of one command.
type Result struct {
	// Class is the highest class of any segment, and never below the declared
	// class.
	Class ruleset.Class `json:"class"`
	// Reasons explain Class: the reasons of the segments that reached it, and
	// the declared class when that is what decided.
	Reasons  []string  `json:"reasons"`
	Segments []Segment `json:"segments"`
	// Explanation names what raised the class, in one line that leads with
	// its principle or rule: "wrapper: pct exec 101 → rm -rf /srv (…)",
	// "exfiltration: dig looks up a name built from $(whoami)", "storage:
	// zpool create (…)". Empty for read_only.
	Explanation string `json:"explanation,omitempty"`
}

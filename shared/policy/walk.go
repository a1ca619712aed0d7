package policy

const (
	// maxDepth bounds how deeply code inside code (bash -c inside ssh inside
	// pct exec …) is followed; anything deeper is destructive.
	maxDepth = 12
	// maxCommandBytes bounds the command text; anything longer is destructive.
	maxCommandBytes = 256 << 10
	// maxNesting bounds how deeply brackets may nest in the raw text: past it
	// the parser and the walk get slow, and no real command comes close.
	maxNesting = 200
	// maxWraps bounds how many wrappers (sudo, env, timeout …) may stack.
	maxWraps = 64
	// maxWork bounds the segments and re-parses one classification may do, so
	// an adversarial command cannot make the gate slow.
	maxWork = 4096
	// maxArgScans bounds how many arguments of one unknown program are checked
	// as commands it might run.
	maxArgScans = 4
)

// Segment is one classified simple command: a program with its arguments, as
// found anywhere in the command — a pipeline element, a list member, a
// substitution, a function body, or the inner command of a wrapper.
type Segment struct {
	// Command is the source text the segment came from.
	Command string `json:"command"`
	// Program is the resolved program name ("rm" for `/bin/rm`, `\rm` or
	// `busybox rm`); a program outside the system directories keeps its path.
	Program string `json:"program,omitempty"`
	Class   Class  `json:"class"`
	Reason  string `json:"reason"`
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
	// why is the explanation a rule or principle gave, before the wrapper
	// chain is put in front of it; inner is the command a wrapper runs.
	why, inner string
	// unverified marks a destructive segment that is destructive because
	// the classifier could not look inside (a parse failure, too deep, too
	// long), not because a rule matched: a guess (keepDestructive) never
	// keeps such a finding.
	unverified bool
}

// frame is the context a piece of shell code is classified in.
type frame struct {
	src   string // the text node positions refer to
	depth int
	wraps int    // wrappers and nested code around this frame
	via   string // transport, "" on the target itself
	chain string // wrappers around the code, for reasons
	// floor is the lowest class any segment of this frame may have, with why:
	// code whose text is only partly known is at least config_mutation.
	floor    Class
	floorWhy string
	// sh is the shell process the code runs in.
	sh *shellState
}

// child returns the frame for code or an argv nested inside wrapper.
func (f *frame) child(wrapper string) *frame {
	n := *f
	n.wraps++
	if wrapper != "" {
		if n.chain == "" {
			n.chain = wrapper
		} else {
			n.chain += " → " + wrapper
		}
	}
	return &n
}

// withVia returns a child frame whose commands run through a transport.
func (f *frame) withVia(via string) *frame {
	n := f.child(via)
	if n.via == "" {
		n.via = via
	} else {
		n.via += " → " + via
	}
	return n
}

// atLeast raises the frame's floor.
func (f *frame) atLeast(c Class, why string) {
	if c.Rank() > f.floor.Rank() {
		f.floor, f.floorWhy = c, why
	}
}

// nesting estimates how deeply the parser would nest: the depth of ( and {
// in the raw text, quotes ignored, or a fifth of the count of | and & (each
// pipe or && nests one binary command in the next). A cheap over-estimate
// that keeps absurd inputs away from the parser.
func nesting(s string) int {
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

// clip shortens text for an explanation.
func clip(s string) string {
	if len(s) > 60 {
		return s[:57] + "…"
	}
	return s
}

// stdinKind says what a command's standard input is, as far as it matters for
// programs that run their input as code (sh, bash, ssh without a command, at).
type stdinKind uint8

const (
	stdinNone  stdinKind = iota // nothing known: the executor's stdin
	stdinText                   // literal text (echo, printf, here-document)
	stdinFetch                  // downloaded (curl, wget)
	stdinOther                  // another program's output or a file
)

type stdin struct {
	kind     stdinKind
	text     string
	dyn      bool
	producer string
	// hint, for stdinOther, is the producer's literal arguments one per line:
	// printf '%s\n' 'rm -rf /x' | sh prints them, so they are checked as code.
	hint string
	// secret is the credential store a redirected file is; envDump: the
	// producer prints the environment; up is what the producer itself read.
	// They say whether a command that sends its input off the machine sends
	// a secret (see exfil.go), and are looked at only then.
	secret  string
	envDump bool
	up      *stdin
}

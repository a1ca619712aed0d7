package policy

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"mvdan.cc/sh/v3/syntax"
)

// isTainted reports whether a variable's value may be text chosen by the
// command itself rather than a literal free of expansions: assigned from an
// expansion or a command's output, read, a loop over such words, or a
// positional or special parameter (`bash -c CODE _ ARGS` sets those).
// bash evaluates array subscripts inside arithmetic again, so arithmetic on
// such a value can run a command substitution hidden in it.
func (c *classifier) isTainted(f *walk.Frame, name string) bool {
	switch name {
	case "", "#", "?", "$", "!", "-":
		return false
	case "@", "*", "_":
		return true
	}
	if name[0] >= '0' && name[0] <= '9' {
		return true
	}
	s := f.Sh
	for ; s.Scanned < len(s.Files); s.Scanned++ {
		c.collectTaint(s, s.Files[s.Scanned])
	}
	return s.Tainted[name]
}

func (c *classifier) collectTaint(s *walk.Shell, file *syntax.File) {
	taint := func(name string) {
		if s.Tainted == nil {
			s.Tainted = map[string]bool{}
		}
		s.Tainted[name] = true
	}
	syntax.Walk(file, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Assign:
			if n.Name != nil && !shellword.SafeAssign(n) {
				taint(n.Name.Value)
			}
		case *syntax.ParamExp:
			if n.Param != nil && n.Exp != nil && (n.Exp.Op == syntax.AssignUnset || n.Exp.Op == syntax.AssignUnsetOrNull) {
				taint(n.Param.Value)
			}
		case *syntax.ForClause:
			if wi, ok := n.Loop.(*syntax.WordIter); ok && wi.Name != nil {
				safe := wi.InPos.IsValid()
				for _, it := range wi.Items {
					safe = safe && shellword.SafeWord(it)
				}
				if !safe {
					taint(wi.Name.Value)
				}
			}
		case *syntax.CallExpr:
			if len(n.Args) > 0 {
				if prog, ok := shellword.BareLiteral(n.Args[0]); ok && shellword.IsTaintingBuiltin(path.Base(prog)) {
					for _, a := range n.Args[1:] {
						if v, ok := shellword.BareLiteral(a); ok {
							if name := shellword.IdentPrefix(v); name != "" {
								taint(name)
							}
						}
					}
				}
			}
		case *syntax.SglQuoted:
			c.noteCodeLit(s, n.Value)
		case *syntax.Lit:
			c.noteCodeLit(s, n.Value)
		}
		return true
	})
}

func (c *classifier) noteCodeLit(s *walk.Shell, v string) {
	if len(s.CodeLits) < 8 && (strings.Contains(v, "$(") || strings.Contains(v, "`")) {
		s.CodeLits = append(s.CodeLits, v)
	}
}

// checkArith records that an arithmetic context (or an array subscript)
// refers to a tainted variable: bash expands `a[$(cmd)]` found in the value
// a second time, so the command's own text may run. It is at least
// config_mutation, and destructive when a quoted literal of the command
// holds a destructive command substitution.
func (c *classifier) checkArith(f *walk.Frame, n syntax.Node) {
	if n == nil || f.Sh.ArithFlagged || c.full {
		return
	}
	hit := ""
	syntax.Walk(n, func(m syntax.Node) bool {
		if hit != "" {
			return false
		}
		switch m := m.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			return false // classified as commands on their own
		case *syntax.ParamExp:
			if m.Param != nil && c.isTainted(f, m.Param.Value) {
				hit = m.Param.Value
			}
		case *syntax.Lit:
			if name := shellword.IdentPrefix(m.Value); name != "" && c.isTainted(f, name) {
				hit = name
			}
		}
		return true
	})
	if hit == "" {
		return
	}
	f.Sh.ArithFlagged = true
	c.Add(f, Segment{Command: shellword.NodeText(f.Src, n), Class: ConfigMutation,
		Reason: "arithmetic or an array subscript uses `" + hit + "`, whose value this command sets at run time; " +
			"bash expands a subscript found in it again, so text the command chose may run as a command (unknown code needs approval)"})
	for _, lit := range f.Sh.CodeLits {
		// The literal is expanded as a here-document body, which runs the
		// command substitutions in it wherever they sit.
		c.DestructiveHint(":<<OIKOS_LITERAL\n"+lit+"\nOIKOS_LITERAL\n", f, "text that arithmetic may run")
	}
}

// checkTest looks for arithmetic comparisons and -v tests in [[ ]].
func (c *classifier) checkTest(f *walk.Frame, x syntax.TestExpr) {
	switch x := x.(type) {
	case *syntax.BinaryTest:
		switch x.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLeq, syntax.TsGeq, syntax.TsLss, syntax.TsGtr:
			c.checkArith(f, x.X)
			c.checkArith(f, x.Y)
		default:
			c.checkTest(f, x.X)
			c.checkTest(f, x.Y)
		}
	case *syntax.UnaryTest:
		if x.Op == syntax.TsVarSet {
			if w, ok := x.X.(*syntax.Word); ok && shellword.HasBracket(w) {
				c.checkArith(f, w)
			}
		}
		c.checkTest(f, x.X)
	case *syntax.ParenTest:
		c.checkTest(f, x.X)
	}
}

// KeepDestructive runs fn, which classifies a guess at what a command may
// run, and keeps the segments it added only when one of them is verified
// destructive: a guess may catch a destructive command that would otherwise
// hide, but never make a command look safer or noisier. It reports whether
// it kept them.
func (c *classifier) KeepDestructive(fn func()) bool {
	if c.full {
		return false
	}
	mark := len(c.segs)
	fn()
	if c.full {
		return true
	}
	for _, s := range c.segs[mark:] {
		if s.Class == Destructive && !s.Unverified {
			return true
		}
	}
	c.segs = c.segs[:mark]
	return false
}

// programHint looks behind a program only known at run time for a
// destructive command: a glob (`/???/rm`, `/bin/r?`) is tried against every
// program a destructive rule names, and an expansion whose value the command
// itself spells out (`x=rm; $x`, `rm${IFS}-rf`, `$(echo rm)`, `$0 -c`) is
// substituted and the result classified.
func (c *classifier) programHint(argv []shellword.Word, text string, f *walk.Frame) {
	pw := argv[0]
	if pw.Glob && !pw.Dyn {
		base := path.Base(pw.Val)
		tried := 0
		for _, name := range c.p.HintPrograms {
			if ok, _ := path.Match(base, name); !ok {
				continue
			}
			if tried++; tried > walk.MaxArgScans*4 {
				return
			}
			cand := make([]shellword.Word, 0, len(argv))
			cand = append(cand, shellword.Word{Val: name})
			cand = append(cand, argv[1:]...)
			if c.KeepDestructive(func() {
				c.Command(cand, shellword.JoinVals(argv), f.Child("the glob "+pw.Val), walk.Stdin{})
			}) {
				return
			}
		}
		return
	}
	// ${RM} -rf /x, $SHELL -c '…': a variable named after a program
	// probably holds it.
	if m := paramNameRE.FindStringSubmatch(pw.Val); m != nil {
		if prog := programNamed(m[1]); prog != "" && slices.Contains(c.p.HintPrograms, prog) {
			cand := append([]shellword.Word{{Val: prog}}, argv[1:]...)
			if c.KeepDestructive(func() {
				c.Command(cand, shellword.JoinVals(argv), f.Child("the variable "+pw.Val), walk.Stdin{})
			}) {
				return
			}
		}
	}
	guess := substituteKnown(c.staticSubst(text, f), f.Sh)
	if guess == text {
		return
	}
	if _, err := c.parse(guess); err != nil {
		return
	}
	c.DestructiveHint(guess, f, "the expansion "+pw.Val)
}

// paramNameRE matches a word that is one variable: $X, ${X}, "$X".
var paramNameRE = regexp.MustCompile(`^\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?$`)

// programNamed guesses the program a variable holds from its name: SHELL and
// BASH hold shells, RM or RM_CMD holds rm, MKFS_BIN mkfs.
func programNamed(name string) string {
	switch name {
	case "SHELL", "BASH", "ZSH_NAME", "0":
		return "sh"
	}
	n := strings.ToLower(name)
	for _, suffix := range []string{"_cmd", "_bin", "_prog", "_exe", "_command", "cmd", "bin"} {
		if t, ok := strings.CutSuffix(n, suffix); ok && t != "" {
			n = strings.TrimSuffix(t, "_")
			break
		}
	}
	return strings.ReplaceAll(n, "_", "-")
}

// cmdSubstRE finds $(…) without nested parentheses.
var cmdSubstRE = regexp.MustCompile(`\$\(([^()]*)\)`)

// staticSubst replaces each $(…) whose output the command spells out (echo
// … | base64 -d, printf '\x72\x6d') with that output, trailing newlines cut
// as the shell does.
func (c *classifier) staticSubst(s string, f *walk.Frame) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	return cmdSubstRE.ReplaceAllStringFunc(s, func(m string) string {
		file, err := c.parse(m[2 : len(m)-1])
		if err != nil || len(file.Stmts) != 1 {
			return m
		}
		sub := *f
		sub.Src = m[2 : len(m)-1]
		out := c.PipeSource(file.Stmts[0], &sub, walk.Stdin{})
		if out.Kind != walk.StdinText || out.Dyn {
			return m
		}
		return strings.TrimRight(out.Text, "\n")
	})
}

var (
	defaultParamRE   = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*):?[-=]([^{}$` + "`" + `]*)\}`)
	transformParamRE = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)@([EPQaAKkUuL])\}`)
	knownParamRE     = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*|[0-9])\}?`)
	echoSubstRE      = regexp.MustCompile("\\$\\((?:echo|printf)\\s+([^()`]*)\\)|`(?:echo|printf)\\s+([^()`]*)`")
)

// substituteKnown replaces the expansions a command spells out itself with
// their values: IFS with a space, $0 with a shell, a variable with the
// literal the command assigned it (or the default in ${x:-word}), $(echo X)
// with X.
func substituteKnown(s string, sh *walk.Shell) string {
	if strings.IndexByte(s, '$') < 0 && strings.IndexByte(s, '`') < 0 {
		return s
	}
	s = echoSubstRE.ReplaceAllString(s, "$1$2")
	// ${x:-word}: the literal assigned to x, or else the default word.
	s = defaultParamRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := defaultParamRE.FindStringSubmatch(m)
		if v, ok := sh.Lits[sub[1]]; ok && v != "" {
			return v
		}
		return sub[2]
	})
	// ${x@E}, ${x@P}, ${x@Q}: the value transformed (escapes decoded for E;
	// P expands it as a prompt, which runs the substitutions in it).
	s = transformParamRE.ReplaceAllStringFunc(s, func(m string) string {
		sub := transformParamRE.FindStringSubmatch(m)
		v, ok := sh.Lits[sub[1]]
		if !ok {
			return m
		}
		if sub[2] == "E" {
			if d, ok := shellword.DecodeANSIC(v); ok {
				return d
			}
		}
		return v
	})
	return knownParamRE.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "${}")
		switch {
		case name == "IFS":
			return " "
		case name == "0":
			return "sh"
		}
		if v, ok := sh.Lits[name]; ok {
			return v
		}
		return m
	})
}

// argHints looks inside the arguments of a program that no rule vouches for
// (python3 -c, awk, psql -c '\!', tar --to-command=, rsync -e, git -c
// alias.x='!…') for a destructive shell command: such programs often run a
// string they are given. Only a verified destructive finding is kept.
func (c *classifier) argHints(args []shellword.Word, f *walk.Frame, program string) {
	if c.p.HintRE == nil {
		return
	}
	tries := 0
	for _, a := range args {
		if a.Dyn || c.full || tries >= walk.MaxArgScans*2 {
			return
		}
		v := a.Val
		if !strings.ContainsAny(v, " \t\n") {
			continue
		}
		for _, loc := range c.p.HintRE.FindAllStringSubmatchIndex(v, walk.MaxArgScans) {
			if tries >= walk.MaxArgScans*2 {
				return
			}
			tries++
			if c.codeHint(v[loc[2]:], f, "`"+program+"` argument") {
				return
			}
		}
	}
}

// codeHint classifies text that starts with a program name as shell code,
// cut at a closing quote or bracket when the whole does not parse, and keeps
// only a verified destructive finding.
func (c *classifier) codeHint(text string, f *walk.Frame, wrapper string) bool {
	try := func(s string) bool {
		if _, err := c.parse(s); err != nil {
			return false
		}
		return c.KeepDestructive(func() { c.NestedCode(shellword.Word{Val: s, Dyn: true}, f, walk.Stdin{}, wrapper) })
	}
	if try(text) {
		return true
	}
	if i := strings.IndexAny(text, "\"')`"); i > 0 {
		return try(text[:i])
	}
	return false
}

// stdinFields returns a here-document's or echo's text, split into words,
// for matching destructive rules against what a program reads (`echo
// FLUSHALL | redis-cli`, `psql <<< 'DROP TABLE x'`).
func stdinFields(in walk.Stdin) []shellword.Word {
	if in.Kind != walk.StdinText || in.Dyn || len(in.Text) > 64<<10 {
		return nil
	}
	fs := strings.Fields(in.Text)
	if len(fs) > 256 {
		fs = fs[:256]
	}
	// The whole text too, for rules that look for a phrase (DELETE FROM).
	out := make([]shellword.Word, 0, len(fs)+1)
	out = append(out, shellword.Word{Val: strings.TrimSpace(in.Text)})
	for _, s := range fs {
		out = append(out, shellword.Word{Val: s})
	}
	return out
}

package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/oikos-hq/oikos/shared/policy/internal/exfil"
	"github.com/oikos-hq/oikos/shared/policy/internal/lookalike"
	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"github.com/oikos-hq/oikos/shared/policy/internal/wrappers"
	"mvdan.cc/sh/v3/syntax"
)

// classifier holds the per-call state of one classification. It is pooled by
// the Policy and used by one goroutine at a time.
type classifier struct {
	p      *ruleset.Set
	failed error // see Policy.failed
	parser *syntax.Parser
	reader strings.Reader
	segs   []Segment
	trace  map[string]bool
	top    walk.Shell // the shell the command itself runs in
	work   int
	full   bool

	substFrame *walk.Frame
	walkFn     func(syntax.Node) bool
	// pipes remembers the output of nested pipelines (see PipeSource).
	pipes    map[*syntax.Stmt]walk.Stdin
	cmdlines []*shellword.Cmdline // free list, so rule matching does not allocate
}

func newClassifier(p *Policy) *classifier {
	c := &classifier{p: p.rules, failed: p.failed, parser: syntax.NewParser(syntax.Variant(syntax.LangBash))}
	c.walkFn = c.visitSubst
	return c
}

// parse parses shell source with the classifier's parser. The tree it returns
// stays valid across later parses.
func (c *classifier) parse(src string) (*syntax.File, error) {
	c.reader.Reset(src)
	return c.parser.Parse(&c.reader, "")
}

func (c *classifier) getCmdline() *shellword.Cmdline {
	if n := len(c.cmdlines); n > 0 {
		cl := c.cmdlines[n-1]
		c.cmdlines = c.cmdlines[:n-1]
		return cl
	}
	return &shellword.Cmdline{}
}

func (c *classifier) putCmdline(cl *shellword.Cmdline) { c.cmdlines = append(c.cmdlines, cl) }

func (c *classifier) run(command string, declared Class) (res Result) {
	c.segs, c.work, c.full = c.segs[:0], 0, false
	c.top.Reset()
	clear(c.pipes)
	top := &walk.Frame{Src: command, Sh: &c.top}
	func() {
		defer func() {
			if r := recover(); r != nil {
				c.segs = append(c.segs, Segment{Command: command, Class: Destructive, Unverified: true,
					Reason: fmt.Sprintf("classifier error (%v); failing closed", r)})
			}
		}()
		switch {
		case c.failed != nil:
			c.Add(top, Segment{Command: command, Class: Destructive,
				Reason: "the policy failed to compile (" + c.failed.Error() + "); every command is destructive"})
		case len(command) > walk.MaxCommandBytes:
			c.Add(top, Segment{Command: command[:80] + "…", Class: Destructive, Unverified: true,
				Reason: fmt.Sprintf("command longer than %d bytes; not verified", walk.MaxCommandBytes)})
		case walk.Nesting(command) > walk.MaxNesting:
			c.Add(top, Segment{Command: command, Class: Destructive, Unverified: true,
				Reason: fmt.Sprintf("brackets or pipelines nested more than %d deep; not verified", walk.MaxNesting)})
		default:
			c.code(top, walk.Stdin{})
			c.lookalikes(command)
		}
	}()

	res.Segments = slices.Clone(c.segs)
	if res.Segments == nil {
		res.Segments = []Segment{}
	}
	found := ReadOnly
	for _, s := range res.Segments {
		found = Max(found, s.Class)
	}
	res.Class = Max(found, declared)
	for _, s := range res.Segments {
		if s.Class == res.Class && s.Why != "" {
			res.Explanation = s.Why
			break
		}
	}
	if res.Explanation == "" && res.Class != ReadOnly {
		res.Explanation = "declared: the caller declared " + string(res.Class) + ", and the classifier never lowers a declared risk"
	}
	for _, s := range res.Segments {
		if s.Class == res.Class && !slices.Contains(res.Reasons, s.Reason) {
			res.Reasons = append(res.Reasons, s.Reason)
		}
	}
	switch {
	case declared != "" && !declared.Valid():
		res.Reasons = append(res.Reasons, fmt.Sprintf("declared risk %q is not a class; treated as destructive", string(declared)))
	case declared.Rank() > found.Rank():
		res.Reasons = append(res.Reasons, fmt.Sprintf("declared %s; the classifier never lowers a declared risk", declared))
	}
	if len(res.Segments) == 0 && len(res.Reasons) == 0 {
		res.Reasons = append(res.Reasons, "no command runs")
	}
	return res
}

// lookalikes classifies the command a second time as it reads once
// normalised (see Normalise) and keeps that reading's segments when
// they raise the class: `рm -rf /` is classified as `rm -rf /` would be, not
// as an unknown program. The first reading stays, so a class is never lowered.
func (c *classifier) lookalikes(command string) {
	norm := lookalike.Normalise(command)
	if norm == command || c.full {
		return
	}
	before := len(c.segs)
	found := ReadOnly
	for _, s := range c.segs {
		found = Max(found, s.Class)
	}
	c.top.Reset()
	clear(c.pipes)
	c.code(&walk.Frame{Src: norm, Sh: &c.top}, walk.Stdin{})
	raised := false
	for _, s := range c.segs[before:] {
		raised = raised || s.Class.Rank() > found.Rank()
	}
	if !raised {
		c.segs = c.segs[:before]
		return
	}
	label := "lookalike: " + lookalike.Label(command)
	for i := before; i < len(c.segs); i++ {
		s := &c.segs[i]
		s.Reason = "read as `" + norm + "`: " + s.Reason
		if s.Class == ReadOnly {
			continue
		}
		if s.Why == "" {
			s.Why = label
		} else {
			s.Why = label + " → " + s.Why
		}
	}
}

// Add records a segment, applying the frame's floor, wrapper chain and
// transport.
func (c *classifier) Add(f *walk.Frame, s Segment) {
	if c.full {
		return
	}
	c.work++
	if c.work > walk.MaxWork {
		c.full = true
		c.segs = append(c.segs, Segment{Command: f.Src, Class: Destructive, Unverified: true,
			Reason: fmt.Sprintf("more than %d commands to verify; failing closed", walk.MaxWork)})
		return
	}
	if f.Floor.Rank() > s.Class.Rank() {
		s.Class = f.Floor
		s.Reason = f.FloorWhy + "; " + s.Reason
		s.Rule = ""
	}
	if s.Class != ReadOnly {
		why := s.Cause
		if why == "" {
			why = s.Reason
		}
		if f.Chain != "" {
			inner := s.Inner
			if inner == "" {
				inner = s.Program
			}
			why = "wrapper: " + f.Chain + " → " + walk.Clip(inner) + " (" + why + ")"
		}
		s.Why = why
	}
	if f.Chain != "" {
		s.Reason += " (inside " + f.Chain + ")"
	}
	if s.Via == "" {
		s.Via = f.Via
	}
	c.segs = append(c.segs, s)
}

// code parses f.src as shell and classifies every statement in it.
func (c *classifier) code(f *walk.Frame, in walk.Stdin) {
	if c.full {
		return
	}
	if f.Depth > walk.MaxDepth {
		c.Add(f, Segment{Command: f.Src, Class: Destructive, Unverified: true,
			Reason: fmt.Sprintf("code nested more than %d levels deep; not verified", walk.MaxDepth)})
		return
	}
	c.work++
	file, err := c.parse(f.Src)
	if err != nil {
		c.Add(f, Segment{Command: f.Src, Class: Destructive, Unverified: true,
			Reason: "does not parse as shell (" + err.Error() + "), so nothing in it can be verified"})
		return
	}
	f.Sh.Files = append(f.Sh.Files, file)
	for _, st := range file.Stmts {
		c.stmt(st, f, in)
		// A function is known to be defined only by a definition at the
		// top level of the shell's code: one inside if, &&, a loop, a
		// subshell or the background may not have run (or not in this
		// shell), and a call would then run the program of that name.
		if fd, ok := st.Cmd.(*syntax.FuncDecl); ok && fd.Name != nil && !st.Background && !st.Coprocess && !st.Negated {
			f.Sh.DefineFunc(fd.Name.Value)
		}
	}
}

// NestedCode classifies a string that a wrapper hands to a new shell
// process (bash -c, ssh, su -c …).
func (c *classifier) NestedCode(code shellword.Word, f *walk.Frame, in walk.Stdin, wrapper string) {
	c.nested(code, f, in, wrapper, false)
}

// EvalCode classifies a string the current shell itself runs (eval, trap,
// alias, text evaluated later): it shares the shell's functions and
// variables.
func (c *classifier) EvalCode(code shellword.Word, f *walk.Frame, in walk.Stdin, wrapper string) {
	c.nested(code, f, in, wrapper, true)
}

func (c *classifier) nested(code shellword.Word, f *walk.Frame, in walk.Stdin, wrapper string, sameShell bool) {
	n := f.Child(wrapper)
	n.Src, n.Depth = code.Val, f.Depth+1
	if !sameShell {
		n.Sh = &walk.Shell{}
	}
	if code.Dyn {
		by := wrapper
		if by == "" {
			by = "the remote shell"
		}
		n.AtLeast(ConfigMutation, "the code run by "+by+" is only partly known before it runs")
	}
	c.code(n, in)
}

func (c *classifier) stmts(list []*syntax.Stmt, f *walk.Frame, in walk.Stdin) {
	for _, st := range list {
		c.stmt(st, f, in)
	}
}

func (c *classifier) stmt(st *syntax.Stmt, f *walk.Frame, in walk.Stdin) {
	if c.full || st == nil {
		return
	}
	sin := in
	for _, r := range st.Redirs {
		if r.Op == syntax.RdrIn {
			sin = c.fileInput(f, r)
		} else if h, ok := hereInput(f.Src, r); ok {
			sin = h
		}
	}
	c.redirects(st, f)

	switch cmd := st.Cmd.(type) {
	case nil:
	case *syntax.CallExpr:
		c.call(st, cmd, f, sin)
	case *syntax.BinaryCmd:
		if cmd.Op == syntax.Pipe || cmd.Op == syntax.PipeAll {
			c.stmt(cmd.X, f, sin)
			c.stmt(cmd.Y, f, c.PipeSource(cmd.X, f, sin))
		} else {
			c.stmt(cmd.X, f, sin)
			c.stmt(cmd.Y, f, sin)
		}
	case *syntax.Block:
		c.stmts(cmd.Stmts, f, sin)
	case *syntax.Subshell:
		c.stmts(cmd.Stmts, f, sin)
	case *syntax.IfClause:
		for cl := cmd; cl != nil; cl = cl.Else {
			c.stmts(cl.Cond, f, sin)
			c.stmts(cl.Then, f, sin)
		}
	case *syntax.WhileClause:
		c.stmts(cmd.Cond, f, sin)
		c.stmts(cmd.Do, f, sin)
	case *syntax.ForClause:
		c.subst(cmd.Loop, f)
		if wi, ok := cmd.Loop.(*syntax.WordIter); ok && wi.Name != nil && wi.InPos.IsValid() {
			known := true
			for _, w := range wi.Items {
				known = known && shellword.PlainWord(w)
			}
			if known {
				if f.Sh.LoopVars == nil {
					f.Sh.LoopVars = map[string]bool{}
				}
				f.Sh.LoopVars[wi.Name.Value] = true
			}
		}
		if cl, ok := cmd.Loop.(*syntax.CStyleLoop); ok {
			c.checkArith(f, cl.Init)
			c.checkArith(f, cl.Cond)
			c.checkArith(f, cl.Post)
		}
		c.stmts(cmd.Do, f, sin)
	case *syntax.CaseClause:
		c.subst(cmd.Word, f)
		for _, item := range cmd.Items {
			for _, p := range item.Patterns {
				c.subst(p, f)
			}
			c.stmts(item.Stmts, f, sin)
		}
	case *syntax.FuncDecl:
		// A function body runs only when called, but it is classified as if
		// it ran: the call site may be anywhere, including later in the
		// same command. Only a definition at the top level of the shell's
		// code makes later calls name the function (see code).
		c.stmt(cmd.Body, f, walk.Stdin{})
		if cmd.Name != nil && callsItself(cmd.Name.Value, cmd.Body) {
			c.Add(f, Segment{Command: shellword.StmtText(f.Src, st), Program: cmd.Name.Value, Class: Destructive,
				Reason: "the function " + cmd.Name.Value + " calls itself, which forks without end (a fork bomb takes the machine down)"})
		}
	case *syntax.ArithmCmd:
		c.subst(cmd, f)
		c.checkArith(f, cmd.X)
		c.posixArith(st, cmd, f)
	case *syntax.LetClause:
		c.subst(cmd, f)
		for _, x := range cmd.Exprs {
			c.checkArith(f, x)
		}
	case *syntax.TestClause:
		c.subst(cmd, f)
		c.checkTest(f, cmd.X)
	case *syntax.DeclClause:
		c.decl(st, cmd, f)
	case *syntax.TimeClause:
		c.stmt(cmd.Stmt, f, sin)
	case *syntax.CoprocClause:
		if cmd.Name != nil {
			c.subst(cmd.Name, f)
		}
		c.stmt(cmd.Stmt, f, sin)
	default:
		c.Add(f, Segment{Command: shellword.StmtText(f.Src, st), Class: Destructive,
			Reason: fmt.Sprintf("shell construct %T is not known to the classifier; failing closed", cmd)})
	}
}

// callsItself reports whether a function body calls the function itself:
// recursion in a one-line command is a fork bomb (:(){ :|:& };:).
func callsItself(name string, body *syntax.Stmt) bool {
	found := false
	syntax.Walk(body, func(n syntax.Node) bool {
		if call, ok := n.(*syntax.CallExpr); ok && len(call.Args) > 0 {
			if prog, ok := shellword.BareLiteral(call.Args[0]); ok && prog == name {
				found = true
			}
		}
		return !found
	})
	return found
}

// subst classifies every command and process substitution inside a node
// (words, arithmetic, tests, assignments, redirections). Their commands run
// wherever the enclosing word is expanded, whatever the enclosing command is.
func (c *classifier) subst(n syntax.Node, f *walk.Frame) {
	if n == nil {
		return
	}
	if w, ok := n.(*syntax.Word); ok && shellword.PlainWord(w) {
		return
	}
	saved := c.substFrame
	c.substFrame = f
	syntax.Walk(n, c.walkFn)
	c.substFrame = saved
}

// visitSubst is the syntax.Walk callback of subst; it is bound once per
// classifier so walking does not allocate a closure per word.
func (c *classifier) visitSubst(n syntax.Node) bool {
	switch n := n.(type) {
	case *syntax.CmdSubst:
		c.stmts(n.Stmts, c.substFrame, walk.Stdin{})
		return false
	case *syntax.ProcSubst:
		c.stmts(n.Stmts, c.substFrame, walk.Stdin{})
		return false
	case *syntax.ArithmExp:
		c.checkArith(c.substFrame, n.X)
	case *syntax.ParamExp:
		if n.Exp != nil && n.Exp.Op == syntax.OtherParamOps && n.Exp.Word != nil && n.Param != nil {
			// ${x@P} expands x as a prompt, running the command
			// substitutions in its value: code, unless the value is a
			// literal this command set (its substitutions are classified
			// where it is assigned).
			if op, _ := shellword.BareLiteral(n.Exp.Word); op == "P" {
				if _, known := c.substFrame.Sh.Lits[n.Param.Value]; !known {
					f := c.substFrame
					c.Add(f, Segment{Command: shellword.NodeText(f.Src, n), Class: ConfigMutation,
						Reason: "${" + n.Param.Value + "@P} expands a value only known at run time as a prompt, which runs the commands in it (unknown code needs approval)"})
				}
			}
		}
		if n.Excl {
			// ${!x} looks up the variable x names, and bash evaluates a
			// subscript in that name.
			c.checkArith(c.substFrame, n)
		}
		if n.Index != nil {
			c.checkArith(c.substFrame, n.Index)
		}
		if n.Slice != nil {
			c.checkArith(c.substFrame, n.Slice.Offset)
			c.checkArith(c.substFrame, n.Slice.Length)
		}
	case *syntax.ExtGlob:
		c.extGlob(n, c.substFrame)
	}
	return true
}

// extGlob classifies an extended glob such as *(…) or @(…). bash without
// extglob refuses it, but zsh (the login shell on macOS) reads *(e:'cmd':)
// as a glob qualifier that runs cmd for every file: it is at least
// config_mutation, and destructive when it spells out a destructive command.
func (c *classifier) extGlob(g *syntax.ExtGlob, f *walk.Frame) {
	text := shellword.NodeText(f.Src, g)
	c.Add(f, Segment{Command: text, Class: ConfigMutation,
		Reason: "the extended glob " + text + " is a glob qualifier in zsh, which can run commands (unknown code needs approval)"})
	if g.Pattern != nil && c.p.HintRE != nil {
		for _, loc := range c.p.HintRE.FindAllStringSubmatchIndex(g.Pattern.Value, walk.MaxArgScans) {
			if c.codeHint(g.Pattern.Value[loc[2]:], f, "the glob qualifier "+text) {
				return
			}
		}
	}
}

// posixArith classifies ((…)) as POSIX sh reads it. Commands for containers
// run under `sh -c`, and dash parses `((rm -rf /x))` as two nested
// subshells running rm: so ((…)) is at least config_mutation, and
// destructive when its text is a destructive command.
func (c *classifier) posixArith(st *syntax.Stmt, cmd *syntax.ArithmCmd, f *walk.Frame) {
	text := shellword.StmtText(f.Src, st)
	c.Add(f, Segment{Command: text, Class: ConfigMutation,
		Reason: "`((…))` is arithmetic in bash but runs its text as a command in POSIX sh (dash runs container commands); unknown code needs approval"})
	start, end := int(cmd.Left.Offset())+2, int(cmd.Right.Offset())
	if start < end && end <= len(f.Src) {
		inner := f.Src[start:end]
		if _, err := c.parse(inner); err == nil {
			c.DestructiveHint(inner, f, "((…)) as POSIX sh")
		}
	}
}

// redirects classifies a statement's output redirections: writing a file is a
// mutation, writing a raw device destructive; /dev/null and duplicating a
// file descriptor are nothing.
func (c *classifier) redirects(st *syntax.Stmt, f *walk.Frame) {
	for _, r := range st.Redirs {
		c.subst(r, f)
		// `echo 'rm -rf /x' > >(sh)`: the process substitution reads this
		// command's output, which is checked like a pipe into it.
		if r.Word != nil && len(r.Word.Parts) == 1 && (r.Op == syntax.RdrOut || r.Op == syntax.AppOut || r.Op == syntax.RdrAll) {
			if ps, ok := r.Word.Parts[0].(*syntax.ProcSubst); ok && ps.Op == syntax.CmdOut {
				if call, ok := st.Cmd.(*syntax.CallExpr); ok {
					out := c.producerOutput(st, call, f, walk.Stdin{})
					c.KeepDestructive(func() { c.stmts(ps.Stmts, f, out) })
				}
				continue
			}
		}
		switch r.Op {
		case syntax.RdrOut, syntax.AppOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll,
			syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob, syntax.RdrInOut:
		case syntax.DplOut:
			w := shellword.ResolveParts(f.Src, r.Word.Parts)
			if !w.Dyn && (w.Val == "-" || shellword.IsDigits(w.Val)) {
				continue
			}
		default:
			continue
		}
		w := shellword.ResolveParts(f.Src, r.Word.Parts)
		text := shellword.StmtText(f.Src, st)
		// > (not >>) empties the file before anything is written.
		overwrite := r.Op != syntax.AppOut && r.Op != syntax.AppClob && r.Op != syntax.AppAll &&
			r.Op != syntax.AppAllClob && r.Op != syntax.RdrInOut && r.Op != syntax.DplOut
		switch {
		case w.Dyn:
			c.Add(f, Segment{Command: text, Class: ConfigMutation,
				Reason: "output redirected to a file only known at run time (" + w.Val + ")"})
		case !w.Dyn && (strings.HasPrefix(w.Val, "/dev/tcp/") || strings.HasPrefix(w.Val, "/dev/udp/")):
			// bash opens a socket for /dev/tcp/HOST/PORT: what the
			// statement writes leaves the machine.
			seg := Segment{Command: text}
			exfil.Describe(&seg, "the shell", "sends", w.Val, []exfil.Payload{c.statementPayload(st, f)})
			c.Add(f, seg)
		case !w.Glob && ruleset.AnyRE(c.p.SafeRedirects, w.Val):
			// /dev/null, /dev/stderr …: checked first, because the
			// destructive targets include every node below /dev.
		case ruleset.ArgMatches(c.p.DestructiveOut, w):
			c.Add(f, Segment{Command: text, Class: Destructive,
				Reason: "output redirected to " + w.Val + ", a raw device or kernel trigger"})
		case overwrite && ruleset.ArgMatches(c.p.Protected, w):
			c.Add(f, Segment{Command: text, Class: Destructive,
				Reason: "output redirected over " + w.Val + ", a protected file, whose contents are lost"})
		case overwrite && c.truncates(st, f):
			c.Add(f, Segment{Command: text, Class: Destructive,
				Reason: "empties " + w.Val + " (a redirection that writes nothing truncates the file)"})
		default:
			c.Add(f, Segment{Command: text, Class: ConfigMutation,
				Reason: "output redirected to the file " + w.Val})
		}
	}
}

// truncates reports whether a statement's only effect on its output file is
// to empty it: no command (`> f`), or one that writes nothing (`: > f`,
// `true > f`, `cat /dev/null > f`, `echo -n > f`, printf of an empty format).
func (c *classifier) truncates(st *syntax.Stmt, f *walk.Frame) bool {
	if st.Cmd == nil {
		return true
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok {
		return false
	}
	if len(call.Args) == 0 {
		return true
	}
	argv := shellword.ResolveWords(f.Src, call.Args, nil)
	for _, a := range argv {
		if a.Dyn || a.Glob {
			return false
		}
	}
	name, _, system := c.p.ResolveProgram(argv[0].Val)
	if !system {
		return false
	}
	args := argv[1:]
	switch name {
	case ":", "true", "false":
		return true
	case "cat":
		return len(args) > 0 && slices.ContainsFunc(args, func(w shellword.Word) bool { return w.Val == "/dev/null" }) &&
			!slices.ContainsFunc(args, func(w shellword.Word) bool { return w.Val != "/dev/null" && !strings.HasPrefix(w.Val, "-") })
	case "echo":
		return len(args) == 1 && args[0].Val == "-n" || len(args) == 2 && args[0].Val == "-n" && args[1].Val == ""
	case "printf":
		return len(args) == 1 && args[0].Val == ""
	}
	return false
}

// decl classifies declare/export/local/readonly/typeset: they set shell
// variables only; substitutions in their arguments are classified, and so are
// the assignments themselves.
func (c *classifier) decl(st *syntax.Stmt, d *syntax.DeclClause, f *walk.Frame) {
	c.subst(d, f)
	text := shellword.StmtText(f.Src, st)
	integer, nameref := false, false
	for _, a := range d.Args {
		if a.Naked && a.Value != nil {
			if v, ok := shellword.BareLiteral(a.Value); ok && strings.HasPrefix(v, "-") {
				integer = integer || strings.ContainsRune(v, 'i')
				nameref = nameref || strings.ContainsRune(v, 'n')
			}
		}
	}
	for _, a := range d.Args {
		if nameref && a.Value != nil && !a.Naked {
			// declare -n r=$x: using r looks up the variable x names,
			// subscript included, as ${!x} does.
			c.checkArith(f, a.Value)
		}
		if integer && a.Name != nil {
			if f.Sh.Integers == nil {
				f.Sh.Integers = map[string]bool{}
			}
			f.Sh.Integers[a.Name.Value] = true
		}
		c.assign(a, text, f)
		c.checkAssignArith(a, f, integer)
	}
	name := "declare"
	if d.Variant != nil {
		name = d.Variant.Value
	}
	c.Add(f, Segment{Command: text, Program: name, Class: ReadOnly,
		Reason: name + " only sets shell variables"})
}

// assign classifies a shell assignment NAME=value (see assignment).
func (c *classifier) assign(a *syntax.Assign, text string, f *walk.Frame) {
	if a == nil || a.Name == nil || a.Naked {
		return
	}
	var value shellword.Word
	if a.Value != nil {
		value = shellword.ResolveParts(f.Src, a.Value.Parts)
	}
	if !value.Dyn && !value.Glob && a.Index == nil && a.Array == nil {
		f.Sh.SetLit(a.Name.Value, value.Val)
	}
	c.Assignment(a.Name.Value, value, text, f)
}

// checkAssignArith checks the arithmetic in an assignment: a subscript
// (a[$i]=v, a=([$i]=v)), or the value of an integer variable (declare -i),
// which bash evaluates as arithmetic.
func (c *classifier) checkAssignArith(a *syntax.Assign, f *walk.Frame, integer bool) {
	if a == nil {
		return
	}
	c.checkArith(f, a.Index)
	if a.Array != nil {
		for _, el := range a.Array.Elems {
			c.checkArith(f, el.Index)
		}
	}
	if integer && a.Value != nil {
		c.checkArith(f, a.Value)
	}
}

// Assignment classifies setting a variable, wherever it happens (a shell
// assignment, export, env NAME=value, sudo NAME=value):
//
//   - PATH that puts any directory before the old $PATH other than the
//     system directories is config_mutation: bare program names may then run
//     something else;
//   - a variable whose value points at code programs load or run (the
//     policy's code_variables: LD_PRELOAD, BASH_ENV …) is config_mutation;
//   - the value of a variable that holds a command (command_variables:
//     GIT_SSH_COMMAND, PAGER …) is classified as a command, and is
//     config_mutation when it does not parse;
//   - literal text holding a command substitution is classified as code: it
//     runs when the variable is evaluated later (eval, arithmetic, a prompt).
func (c *classifier) Assignment(name string, value shellword.Word, text string, f *walk.Frame) {
	if value.Dyn {
		if s := exfil.SecretInText(c, value.Val, f); s != "" {
			if f.Sh.Secrets == nil {
				f.Sh.Secrets = map[string]string{}
			}
			f.Sh.Secrets[name] = s
		}
	}
	switch {
	case name == "PATH" && !c.p.SafePath(value):
		c.Add(f, Segment{Command: text, Class: ConfigMutation,
			Reason: "sets PATH to " + value.Val + ", so program names may resolve outside the system directories"})
	case c.p.CodeVars[name] || shellword.MatchAlt(c.p.CodeVarGlobs, name):
		c.Add(f, Segment{Command: text, Class: ConfigMutation,
			Reason: "sets " + name + ", which makes programs load or run other code"})
	case c.p.CommandVars[name] && value.Val != "":
		if _, err := c.parse(value.Val); err != nil {
			c.Add(f, Segment{Command: text, Class: ConfigMutation,
				Reason: "sets " + name + " to a command that does not parse"})
			return
		}
		c.NestedCode(value, f, walk.Stdin{}, "the command in "+name)
		return
	}
	if value.Dyn || !(strings.Contains(value.Val, "$(") || strings.Contains(value.Val, "`")) {
		return
	}
	if _, err := c.parse(value.Val); err != nil {
		return // text that does not parse cannot run as shell either
	}
	c.EvalCode(value, f, walk.Stdin{}, "text assigned to "+name)
}

func (c *classifier) call(st *syntax.Stmt, call *syntax.CallExpr, f *walk.Frame, in walk.Stdin) {
	text := shellword.StmtText(f.Src, st)
	for _, a := range call.Assigns {
		c.subst(a, f)
		c.assign(a, text, f)
		c.checkAssignArith(a, f, a.Name != nil && f.Sh.Integers[a.Name.Value])
	}
	for _, w := range call.Args {
		c.subst(w, f)
	}
	if len(call.Args) > 1 {
		if prog, ok := shellword.BareLiteral(call.Args[0]); ok && shellword.IsNameBuiltin(prog) {
			for _, w := range call.Args[1:] {
				if shellword.HasBracket(w) {
					c.checkArith(f, w)
				}
			}
		}
	}
	if len(call.Args) == 0 {
		c.Add(f, Segment{Command: text, Class: ReadOnly, Reason: "only assigns shell variables"})
		return
	}
	argv := shellword.ResolveWords(f.Src, call.Args, make([]shellword.Word, 0, len(call.Args)))
	c.Command(argv, text, f, in)
}

// Command classifies one argv: resolves the program, unwraps wrappers, and
// applies the rules.
func (c *classifier) Command(argv []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	if c.full || len(argv) == 0 {
		return
	}
	pw, args := argv[0], argv[1:]
	if f.Wraps > walk.MaxWraps {
		c.Add(f, Segment{Command: text, Program: pw.Val, Class: Destructive,
			Reason: fmt.Sprintf("wrapped more than %d times; not verified", walk.MaxWraps)})
		return
	}
	if pw.Dyn || pw.Glob {
		seg := Segment{Command: text, Program: pw.Val, Class: ConfigMutation,
			Reason: "the program `" + pw.Val + "` is only known at run time (unknown code needs approval)"}
		// `$X rm -rf /`, `"$@" dd of=/dev/sda`: whatever $X is, it is
		// handed a destructive command, which it probably runs.
		c.scanArgs(pw.Val, args, text, f, &seg, in)
		c.Add(f, seg)
		if seg.Class != Destructive {
			c.programHint(argv, text, f)
		}
		return
	}
	if !lookalike.IsASCII(pw.Val) {
		lookalike.Command(c, argv, text, f, in)
		return
	}
	c.CommandResolved(argv, text, f, in)
}

// CommandResolved classifies an argv whose program word is a literal.
func (c *classifier) CommandResolved(argv []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	pw, args := argv[0], argv[1:]
	name, base, system := c.p.ResolveProgram(pw.Val)
	// A function this shell has certainly defined shadows a program of the
	// same name, but only where the shell itself looks the name up: sudo,
	// env, command, exec … run the real program.
	if f.Wraps == 0 && f.Sh.Funcs[pw.Val] {
		c.Add(f, Segment{Command: text, Program: pw.Val, Class: ReadOnly,
			Reason: "calls the function " + pw.Val + " defined in this command, whose body is classified on its own"})
		return
	}
	if name == "unset" && system {
		f.Sh.Unset(args)
	}
	if !system {
		c.ApplyRules(name, base, args, text, f, false, in)
		return
	}
	if wrappers.Unwrap(c, name, args, text, f, in) {
		return
	}
	c.ApplyRules(name, name, args, text, f, true, in)
}

// ApplyRules applies the policy rules to a program. For a program outside the
// system directories (system false), read-only rules do not apply and the
// destructive rules are matched against its base name.
func (c *classifier) ApplyRules(name, base string, args []shellword.Word, text string, f *walk.Frame, system bool, in walk.Stdin) {
	cl := c.getCmdline()
	best := c.p.Best(base, args, cl, system, c.trace)
	dynamic := cl.Dyn || cl.FlagLike
	// What a program reads on its standard input is matched against its
	// destructive rules as if it were given as arguments: `echo FLUSHALL |
	// redis-cli`, `psql <<< 'DROP TABLE x'`.
	fromStdin := false
	if (best == nil || best.Class != Destructive) && in.Kind == walk.StdinText && c.p.HasRules(base) {
		if extra := stdinFields(in); len(extra) > 0 {
			all := make([]shellword.Word, 0, len(args)+len(extra))
			all = append(append(all, args...), extra...)
			best, fromStdin = c.p.Raise(best, base, all, cl, system, c.trace)
		}
	}
	asksHelp := system && c.p.AsksHelp(base, cl)
	ruleWhy := ""
	if best != nil && best.Class != ReadOnly && !asksHelp {
		ruleWhy = best.Explain(name, cl)
	}
	c.putCmdline(cl)
	seg := Segment{Command: text, Program: name}
	switch {
	case asksHelp:
		seg.Class = ReadOnly
		seg.Reason = name + ": --help or --version prints and exits; nothing else runs"
	case best != nil:
		seg.Class, seg.Rule = best.Class, best.Name
		seg.Reason = name + ": " + best.Reason + " (rule " + best.Name + ")"
		if fromStdin {
			seg.Reason += ", in what it reads from " + in.Producer
		}
		if best.Class != ReadOnly && dynamic {
			seg.Reason += "; some arguments are only known at run time, so the rule is assumed to apply"
		}
	case !system:
		seg.Class = ConfigMutation
		seg.Reason = "`" + name + "` is not a program from the system directories, so no rule vouches for it"
	default:
		seg.Class = ConfigMutation
		seg.Reason = "no rule makes `" + name + "` read-only"
	}
	if base == "find" {
		c.findExec(args, text, f, in)
	}
	if seg.Class == ConfigMutation && base != "find" {
		c.scanArgs(name, args, text, f, &seg, in)
	}
	if seg.Class == ConfigMutation && c.p.CodeDeletion != nil && c.p.IsInterpreter(base) {
		for _, a := range args {
			if !a.Dyn {
				if m := c.p.CodeDeletion.FindString(a.Val); m != "" {
					seg.Class, seg.Rule = Destructive, ""
					seg.Reason = "`" + name + "` runs code that deletes or truncates files (" + m + ")"
					break
				}
			}
		}
	}
	if seg.Class != Destructive {
		exfil.Check(c, base, args, f, in, &seg)
	}
	if seg.Cause == "" && seg.Rule != "" {
		seg.Cause = ruleWhy
	}
	if f.Chain != "" && seg.Class != ReadOnly {
		seg.Inner = name + " " + shellword.JoinVals(args)
	}
	c.Add(f, seg)
	if seg.Class == ConfigMutation {
		c.argHints(args, f, name)
	}
}

// scanArgs checks whether an unknown program is handed a destructive command
// as its arguments (systemd-run rm -rf /x, strace -f dd of=/dev/sda): such a
// program probably runs it, so the whole is destructive.
// The command it may run gets the program's standard input (strace bash
// /dev/stdin <<< '…' hands it on).
func (c *classifier) scanArgs(name string, args []shellword.Word, text string, f *walk.Frame, seg *Segment, in walk.Stdin) {
	scans := 0
	// For a program the policy knows (pct, qm, docker …) the first word that
	// is not an option is its subcommand (pct reboot 101), not a command.
	skipSub := c.p.Knows(name)
	for i, w := range args {
		if w.Dyn || w.Glob || scans >= walk.MaxArgScans || c.full {
			return
		}
		if skipSub && !strings.HasPrefix(w.Val, "-") {
			skipSub = false
			continue
		}
		n, _, system := c.p.ResolveProgram(w.Val)
		if !system || !(c.p.IsTrigger(n) || wrappers.IsWrapper(n)) {
			continue
		}
		scans++
		mark := len(c.segs)
		c.Command(args[i:], text, f.Child(name+" argument"), in)
		worst := ReadOnly
		for _, s := range c.segs[mark:] {
			worst = Max(worst, s.Class)
		}
		if c.full {
			return
		}
		if worst == Destructive {
			seg.Class = Destructive
			seg.Reason = "`" + name + "` is given `" + shellword.JoinVals(args[i:]) + "` as arguments, which it may run as a command"
			return
		}
		c.segs = c.segs[:mark]
	}
}

// findExec classifies the commands find runs with -exec, -execdir, -ok and
// -okdir; {} stands for a path only known at run time.
func (c *classifier) findExec(args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	for i := 0; i < len(args); i++ {
		switch args[i].Val {
		case "-exec", "-execdir", "-ok", "-okdir":
		default:
			continue
		}
		var inner []shellword.Word
		j := i + 1
		for ; j < len(args); j++ {
			v := args[j].Val
			if !args[j].Dyn && (v == ";" || v == "+") {
				break
			}
			w := args[j]
			if strings.Contains(v, "{}") {
				w.Dyn = true
			}
			inner = append(inner, w)
		}
		// The commands find runs inherit its standard input.
		c.Command(inner, text, f.Child("find "+args[i].Val), in)
		i = j
	}
}

// The classifier is what the principles call back through.
var _ walk.Classifier = (*classifier)(nil)

// Rules is the compiled rule set (Classifier).
func (c *classifier) Rules() *ruleset.Set { return c.p }

// Mark is the number of segments recorded so far (Classifier).
func (c *classifier) Mark() int { return len(c.segs) }

// Since returns the segments recorded after mark (Classifier).
func (c *classifier) Since(mark int) []Segment { return c.segs[mark:] }

package policy

import (
	"strings"

	"github.com/oikos-hq/oikos/shared/policy/internal/exfil"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"mvdan.cc/sh/v3/syntax"
)

// fileInput is the standard input a `< FILE` redirection gives.
func (c *classifier) fileInput(f *walk.Frame, r *syntax.Redirect) walk.Stdin {
	in := walk.Stdin{Kind: walk.StdinOther, Producer: "the file " + shellword.NodeText(f.Src, r.Word)}
	w := shellword.ResolveParts(f.Src, r.Word.Parts)
	in.Secret = exfil.SecretInWord(c, w, f)
	return in
}

// PipeSource describes what the last command of a pipeline element writes to
// the next element's stdin; in is what the element itself reads. A pipeline
// nests to the left (a | b | c is (a | b) | c), so the sources of nested
// pipelines are remembered: each element is looked at once.
func (c *classifier) PipeSource(x *syntax.Stmt, f *walk.Frame, in walk.Stdin) walk.Stdin {
	switch cmd := x.Cmd.(type) {
	case *syntax.BinaryCmd:
		if cmd.Op == syntax.Pipe || cmd.Op == syntax.PipeAll {
			if out, ok := c.pipes[x]; ok {
				return out
			}
			// A decoder (base64 -d, xxd -r) passes on what it is fed,
			// decoded; any other program passes on only the taint of what
			// it read (see stdin.up).
			out := c.PipeSource(cmd.Y, f, c.PipeSource(cmd.X, f, in))
			if c.pipes == nil {
				c.pipes = map[*syntax.Stmt]walk.Stdin{}
			}
			c.pipes[x] = out
			return out
		}
	case *syntax.CallExpr:
		return c.producerOutput(x, cmd, f, in)
	case *syntax.DeclClause:
		// export, declare -p/-x with nothing to set print the environment.
		out := walk.Stdin{Kind: walk.StdinOther, Producer: "`" + shellword.NodeText(f.Src, x) + "`"}
		out.EnvDump = true
		for _, a := range cmd.Args {
			if !a.Naked || a.Value == nil {
				out.EnvDump = false
			}
		}
		return out
	}
	out := walk.Stdin{Kind: walk.StdinOther, Producer: "`" + shellword.NodeText(f.Src, x) + "`"}
	if in.Kind != walk.StdinNone {
		out.Up = &in
	}
	return out
}

// hereInput is the standard input a here-document or here-string gives; ok
// is false for any other redirection.
func hereInput(src string, r *syntax.Redirect) (in walk.Stdin, ok bool) {
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		w := shellword.HeredocText(src, r)
		return walk.Stdin{Kind: walk.StdinText, Text: w.Val, Dyn: w.Dyn, Producer: "a here-document"}, true
	case syntax.WordHdoc:
		w := shellword.ResolveParts(src, r.Word.Parts)
		return walk.Stdin{Kind: walk.StdinText, Text: w.Val + "\n", Dyn: w.Dyn, Producer: "a here-string"}, true
	}
	return walk.Stdin{}, false
}

// ownInput is what a statement's own here-document or here-string feeds it,
// or in when it has none.
func ownInput(st *syntax.Stmt, f *walk.Frame, in walk.Stdin) walk.Stdin {
	for i := len(st.Redirs) - 1; i >= 0; i-- {
		r := st.Redirs[i]
		if h, ok := hereInput(f.Src, r); ok {
			return h
		}
		if r.Op == syntax.RdrIn {
			return walk.Stdin{Kind: walk.StdinOther, Producer: "the file " + shellword.NodeText(f.Src, r.Word)}
		}
	}
	return in
}

// envPrinter reports whether a program prints the environment, as env,
// printenv, set and export do when given no command or variable to set:
// their output is a credential store.
func envPrinter(name string, args []shellword.Word) bool {
	switch name {
	case "printenv":
		return true
	case "env":
		for _, a := range args {
			if !strings.HasPrefix(a.Val, "-") && !shellword.IsAssignment(a) {
				return false
			}
		}
		return true
	case "set", "export":
		return len(args) == 0 || len(args) == 1 && args[0].Val == "-p"
	}
	return false
}

// producerOutput describes what a command writes to its standard output, as
// far as it matters to a program that runs it as code; in is what the
// command itself reads.
func (c *classifier) producerOutput(st *syntax.Stmt, call *syntax.CallExpr, f *walk.Frame, in walk.Stdin) walk.Stdin {
	other := walk.Stdin{Kind: walk.StdinOther, Producer: "`" + shellword.NodeText(f.Src, st) + "`"}
	if len(call.Args) == 0 {
		return other
	}
	argv := shellword.ResolveWords(f.Src, call.Args, nil)
	if argv[0].Dyn || argv[0].Glob {
		return other
	}
	var hint strings.Builder
	for _, a := range argv[1:] {
		if !a.Dyn && !strings.HasPrefix(a.Val, "-") {
			hint.WriteString(a.Val)
			hint.WriteByte('\n')
		}
	}
	other.Hint = hint.String()
	own := ownInput(st, f, in)
	if own.Kind != walk.StdinNone {
		other.Up = &own
	}
	name, _, system := c.p.ResolveProgram(argv[0].Val)
	if !system {
		return other
	}
	args := argv[1:]
	other.EnvDump = envPrinter(name, args)
	if shellword.IsDecoder(name) {
		if out, ok := decodeOutput(name, args, own); ok {
			return out
		}
		return other
	}
	switch name {
	case "curl", "wget":
		return walk.Stdin{Kind: walk.StdinFetch, Producer: name}
	case "echo":
		newline, escapes := true, false
		for len(args) > 0 && len(args[0].Val) > 1 && args[0].Val[0] == '-' && strings.Trim(args[0].Val[1:], "neE") == "" && !args[0].Dyn {
			if strings.Contains(args[0].Val, "n") {
				newline = false
			}
			if strings.Contains(args[0].Val, "e") {
				escapes = true
			}
			args = args[1:]
		}
		out := walk.Stdin{Kind: walk.StdinText, Text: shellword.JoinVals(args), Producer: "echo"}
		for _, a := range args {
			out.Dyn = out.Dyn || a.Dyn || a.Glob
		}
		if escapes && strings.Contains(out.Text, `\`) {
			if s, ok := shellword.DecodeANSIC(out.Text); ok {
				out.Text = s
			} else {
				out.Dyn = true
			}
		}
		if newline {
			out.Text += "\n"
		}
		return out
	case "printf":
		if len(args) != 1 || args[0].Dyn || args[0].Glob || strings.Contains(args[0].Val, "%") {
			return other
		}
		s, ok := shellword.DecodeANSIC(args[0].Val)
		return walk.Stdin{Kind: walk.StdinText, Text: s, Dyn: !ok, Producer: "printf"}
	case "cat":
		if len(args) > 0 {
			return other
		}
		for i := len(st.Redirs) - 1; i >= 0; i-- {
			if h, ok := hereInput(f.Src, st.Redirs[i]); ok {
				return h
			}
		}
	}
	return other
}

// DestructiveHint classifies text that may be code and keeps what it finds
// only when it is destructive: a guess must never make a command look safer
// or noisier, only catch what would otherwise hide.
func (c *classifier) DestructiveHint(hint string, f *walk.Frame, wrapper string) {
	if strings.TrimSpace(hint) == "" || c.full {
		return
	}
	c.KeepDestructive(func() { c.NestedCode(shellword.Word{Val: hint, Dyn: true}, f, walk.Stdin{}, wrapper) })
}

// statementPayload is what a statement writes to its output, for a
// redirection that sends it off the machine: its program's output, which
// holds a credential store when the program read one.
func (c *classifier) statementPayload(st *syntax.Stmt, f *walk.Frame) exfil.Payload {
	p := exfil.Payload{What: "the output of `" + walk.Clip(shellword.StmtText(f.Src, st)) + "`"}
	if call, ok := st.Cmd.(*syntax.CallExpr); ok {
		p.Secret = exfil.SecretOfStdin(c, c.producerOutput(st, call, f, ownInput(st, f, walk.Stdin{})), f, 0)
	}
	return p
}

// decodeOutput is what a decoder writes when it reads in: only literal text
// read from its standard input is followed (see decode).
func decodeOutput(name string, args []shellword.Word, in walk.Stdin) (walk.Stdin, bool) {
	if in.Kind != walk.StdinText || in.Dyn {
		return walk.Stdin{}, false
	}
	out, ok := shellword.Decode(name, args, in.Text)
	if !ok {
		return walk.Stdin{}, false
	}
	return walk.Stdin{Kind: walk.StdinText, Text: out, Producer: name + " decoding " + in.Producer}, true
}

package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// fileInput is the standard input a `< FILE` redirection gives.
func (c *classifier) fileInput(f *frame, r *syntax.Redirect) stdin {
	in := stdin{kind: stdinOther, producer: "the file " + nodeText(f.src, r.Word)}
	w := resolveParts(f.src, r.Word.Parts)
	in.secret = c.secretInWord(w, f)
	return in
}

// pipeSource describes what the last command of a pipeline element writes to
// the next element's stdin; in is what the element itself reads. A pipeline
// nests to the left (a | b | c is (a | b) | c), so the sources of nested
// pipelines are remembered: each element is looked at once.
func (c *classifier) pipeSource(x *syntax.Stmt, f *frame, in stdin) stdin {
	switch cmd := x.Cmd.(type) {
	case *syntax.BinaryCmd:
		if cmd.Op == syntax.Pipe || cmd.Op == syntax.PipeAll {
			if out, ok := c.pipes[x]; ok {
				return out
			}
			// A decoder (base64 -d, xxd -r) passes on what it is fed,
			// decoded; any other program passes on only the taint of what
			// it read (see stdin.up).
			out := c.pipeSource(cmd.Y, f, c.pipeSource(cmd.X, f, in))
			if c.pipes == nil {
				c.pipes = map[*syntax.Stmt]stdin{}
			}
			c.pipes[x] = out
			return out
		}
	case *syntax.CallExpr:
		return c.producerOutput(x, cmd, f, in)
	case *syntax.DeclClause:
		// export, declare -p/-x with nothing to set print the environment.
		out := stdin{kind: stdinOther, producer: "`" + nodeText(f.src, x) + "`"}
		out.envDump = true
		for _, a := range cmd.Args {
			if !a.Naked || a.Value == nil {
				out.envDump = false
			}
		}
		return out
	}
	out := stdin{kind: stdinOther, producer: "`" + nodeText(f.src, x) + "`"}
	if in.kind != stdinNone {
		out.up = &in
	}
	return out
}

// ownInput is what a statement's own here-document or here-string feeds it,
// or in when it has none.
func ownInput(st *syntax.Stmt, f *frame, in stdin) stdin {
	for i := len(st.Redirs) - 1; i >= 0; i-- {
		r := st.Redirs[i]
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			w := heredocText(f.src, r)
			return stdin{kind: stdinText, text: w.val, dyn: w.dyn, producer: "a here-document"}
		case syntax.WordHdoc:
			w := resolveParts(f.src, r.Word.Parts)
			return stdin{kind: stdinText, text: w.val + "\n", dyn: w.dyn, producer: "a here-string"}
		case syntax.RdrIn:
			return stdin{kind: stdinOther, producer: "the file " + nodeText(f.src, r.Word)}
		}
	}
	return in
}

// envPrinters print the environment when given no command or variable to
// set: their output is a credential store.
func envPrinter(name string, args []word) bool {
	switch name {
	case "printenv":
		return true
	case "env":
		for _, a := range args {
			if !strings.HasPrefix(a.val, "-") && !isAssignment(a) {
				return false
			}
		}
		return true
	case "set", "export":
		return len(args) == 0 || len(args) == 1 && args[0].val == "-p"
	}
	return false
}

// producerOutput describes what a command writes to its standard output, as
// far as it matters to a program that runs it as code; in is what the
// command itself reads.
func (c *classifier) producerOutput(st *syntax.Stmt, call *syntax.CallExpr, f *frame, in stdin) stdin {
	other := stdin{kind: stdinOther, producer: "`" + nodeText(f.src, st) + "`"}
	if len(call.Args) == 0 {
		return other
	}
	argv := resolveWords(f.src, call.Args, nil)
	if argv[0].dyn || argv[0].glob {
		return other
	}
	var hint strings.Builder
	for _, a := range argv[1:] {
		if !a.dyn && !strings.HasPrefix(a.val, "-") {
			hint.WriteString(a.val)
			hint.WriteByte('\n')
		}
	}
	other.hint = hint.String()
	own := ownInput(st, f, in)
	if own.kind != stdinNone {
		other.up = &own
	}
	name, _, system := c.p.resolveProgram(argv[0].val)
	if !system {
		return other
	}
	args := argv[1:]
	other.envDump = envPrinter(name, args)
	if isDecoder(name) {
		if out, ok := decodeOutput(name, args, own); ok {
			return out
		}
		return other
	}
	switch name {
	case "curl", "wget":
		return stdin{kind: stdinFetch, producer: name}
	case "echo":
		newline, escapes := true, false
		for len(args) > 0 && len(args[0].val) > 1 && args[0].val[0] == '-' && strings.Trim(args[0].val[1:], "neE") == "" && !args[0].dyn {
			if strings.Contains(args[0].val, "n") {
				newline = false
			}
			if strings.Contains(args[0].val, "e") {
				escapes = true
			}
			args = args[1:]
		}
		out := stdin{kind: stdinText, text: joinVals(args), producer: "echo"}
		for _, a := range args {
			out.dyn = out.dyn || a.dyn || a.glob
		}
		if escapes && strings.Contains(out.text, `\`) {
			if s, ok := decodeANSIC(out.text); ok {
				out.text = s
			} else {
				out.dyn = true
			}
		}
		if newline {
			out.text += "\n"
		}
		return out
	case "printf":
		if len(args) != 1 || args[0].dyn || args[0].glob || strings.Contains(args[0].val, "%") {
			return other
		}
		s, ok := decodeANSIC(args[0].val)
		return stdin{kind: stdinText, text: s, dyn: !ok, producer: "printf"}
	case "cat":
		if len(args) > 0 {
			return other
		}
		for i := len(st.Redirs) - 1; i >= 0; i-- {
			r := st.Redirs[i]
			switch r.Op {
			case syntax.Hdoc, syntax.DashHdoc:
				w := heredocText(f.src, r)
				return stdin{kind: stdinText, text: w.val, dyn: w.dyn, producer: "a here-document"}
			case syntax.WordHdoc:
				w := resolveParts(f.src, r.Word.Parts)
				return stdin{kind: stdinText, text: w.val + "\n", dyn: w.dyn, producer: "a here-string"}
			}
		}
	}
	return other
}

// destructiveHint classifies text that may be code and keeps what it finds
// only when it is destructive: a guess must never make a command look safer
// or noisier, only catch what would otherwise hide.
func (c *classifier) destructiveHint(hint string, f *frame, wrapper string) {
	if strings.TrimSpace(hint) == "" || c.full {
		return
	}
	c.keepDestructive(func() { c.nestedCode(word{val: hint, dyn: true}, f, stdin{}, wrapper) })
}

// statementPayload is what a statement writes to its output, for a
// redirection that sends it off the machine: its program's output, which
// holds a credential store when the program read one.
func (c *classifier) statementPayload(st *syntax.Stmt, f *frame) payload {
	p := payload{what: "the output of `" + clip(stmtText(f.src, st)) + "`"}
	if call, ok := st.Cmd.(*syntax.CallExpr); ok {
		p.secret = c.secretOfStdin(c.producerOutput(st, call, f, ownInput(st, f, stdin{})), f, 0)
	}
	return p
}

// decodeOutput is what a decoder writes when it reads in: only literal text
// read from its standard input is followed (see decode).
func decodeOutput(name string, args []word, in stdin) (stdin, bool) {
	if in.kind != stdinText || in.dyn {
		return stdin{}, false
	}
	out, ok := decode(name, args, in.text)
	if !ok {
		return stdin{}, false
	}
	return stdin{kind: stdinText, text: out, producer: name + " decoding " + in.producer}, true
}

package shellword

import (
	"path"
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// IsNameBuiltin reports whether a builtin takes variable names as
// arguments. A name with a subscript (`printf -v "a[$x]"`, `[ -v "a[$x]" ]`)
// evaluates the subscript as arithmetic.
func IsNameBuiltin(name string) bool {
	switch name {
	case "read", "mapfile", "readarray", "getopts", "printf", "unset", "test", "[", "declare", "typeset",
		"local", "export", "readonly", "let":
		return true
	}
	return false
}

// IsTaintingBuiltin reports whether a builtin sets the variables it is given
// from data the command controls (printf only with -v, but any name-looking
// argument is counted, which only makes the check more cautious).
func IsTaintingBuiltin(name string) bool {
	switch name {
	case "read", "mapfile", "readarray", "getopts", "printf":
		return true
	}
	return false
}

// SafeAssign reports whether an assignment sets a literal free of "$" and
// "`" (or nothing).
func SafeAssign(a *syntax.Assign) bool {
	if a.Value != nil && !SafeWord(a.Value) {
		return false
	}
	if a.Array != nil {
		for _, el := range a.Array.Elems {
			if el.Value != nil && !SafeWord(el.Value) {
				return false
			}
		}
	}
	return true
}

// SafeWord: literal text (globs allowed: file names are the machine's, not
// the command's) that holds no "$" or "`".
func SafeWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.ContainsAny(p.Value, "$`") {
				return false
			}
		case *syntax.SglQuoted:
			if p.Dollar || strings.ContainsAny(p.Value, "$`") {
				return false
			}
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok || strings.ContainsAny(l.Value, "$`") {
					return false
				}
			}
		case *syntax.ExtGlob, *syntax.ArithmExp:
			// A glob names the machine's files; $((…)) is a number.
		case *syntax.CmdSubst:
			if !NumericOutput(p) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// NumericOutput reports whether a command substitution can only produce
// numbers whatever its text says: `$(wc -l < f)`, `$(nproc)`, `$(id -u)`,
// `$(grep -c x f)`, `$(seq 1 5)`. Such a value cannot smuggle a subscript
// into arithmetic, so counting idioms stay read-only.
func NumericOutput(cs *syntax.CmdSubst) bool {
	if len(cs.Stmts) != 1 || cs.Stmts[0] == nil {
		return false
	}
	st := cs.Stmts[0]
	for {
		b, ok := st.Cmd.(*syntax.BinaryCmd)
		if !ok || (b.Op != syntax.Pipe && b.Op != syntax.PipeAll) {
			break
		}
		st = b.Y
	}
	call, ok := st.Cmd.(*syntax.CallExpr)
	if !ok || len(call.Args) == 0 || len(call.Assigns) > 0 {
		return false
	}
	for _, r := range st.Redirs {
		// An error message (which may quote a file name) must not reach
		// the output.
		if r.Op != syntax.RdrIn {
			return false
		}
	}
	prog, ok := BareLiteral(call.Args[0])
	if !ok {
		return false
	}
	var opts, pos []string
	for _, a := range call.Args[1:] {
		v, ok := BareLiteral(a)
		if !ok {
			return false
		}
		if strings.HasPrefix(v, "-") && len(v) > 1 {
			opts = append(opts, v)
		} else {
			pos = append(pos, v)
		}
	}
	// onlyShort: every option is a cluster of the given letters.
	onlyShort := func(letters string) bool {
		for _, o := range opts {
			if strings.HasPrefix(o, "--") || strings.Trim(o[1:], letters) != "" {
				return false
			}
		}
		return true
	}
	switch path.Base(prog) {
	case "wc":
		// Standard input only: with a file wc also prints its name.
		return len(pos) == 0 && onlyShort("lwcmL")
	case "nproc":
		return len(pos) == 0 && len(opts) == 0
	case "id":
		return len(pos) == 0 && len(opts) > 0 && onlyShort("ugG")
	case "grep":
		// A count for standard input or one file (more files, -r or -H
		// print names).
		return (len(pos) == 1 || len(pos) == 2) && onlyShort("civEFwx") &&
			slices.ContainsFunc(opts, func(o string) bool { return strings.ContainsRune(o, 'c') })
	case "seq":
		for _, v := range pos {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return false
			}
		}
		return len(opts) == 0 && len(pos) > 0
	}
	return false
}

// HasBracket reports whether a word has a literal '[' (a subscript).
func HasBracket(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if strings.IndexByte(p.Value, '[') >= 0 {
				return true
			}
		case *syntax.SglQuoted:
			if strings.IndexByte(p.Value, '[') >= 0 {
				return true
			}
		case *syntax.DblQuoted:
			if HasBracket(&syntax.Word{Parts: p.Parts}) {
				return true
			}
		}
	}
	return false
}

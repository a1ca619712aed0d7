package shellword

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// JoinWords joins arguments with spaces, the way ssh, eval and watch build the
// code they hand to a shell.
func JoinWords(ws []Word) Word {
	out := Word{Val: JoinVals(ws)}
	for _, w := range ws {
		out.Dyn = out.Dyn || w.Dyn
	}
	return out
}

// PlainWord reports whether a word is made only of literal and single-quoted
// parts, which can hold no substitution.
func PlainWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			return false
		}
	}
	return true
}

// IsDigits reports whether s is a non-empty string of ASCII digits: a file
// descriptor (2>&1), a number in a command.
func IsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// JoinVals joins the words' values with spaces.
func JoinVals(ws []Word) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.Val)
	}
	return b.String()
}

// StmtText is a statement's source without its terminating ";".
func StmtText(src string, st *syntax.Stmt) string {
	t := NodeText(src, st)
	if st.Semicolon.IsValid() && !st.Background && !st.Coprocess && !st.Disown {
		t = strings.TrimSuffix(t, ";")
	}
	return strings.TrimRight(t, " \t")
}

// BareLiteral returns the value of a word written as one unquoted literal.
func BareLiteral(w *syntax.Word) (string, bool) {
	if len(w.Parts) != 1 {
		return "", false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	if !ok {
		return "", false
	}
	return l.Value, true
}

// IdentPrefix returns the shell identifier a string starts with ("a" for
// "a[1]"), or "".
func IdentPrefix(s string) string {
	i := 0
	for ; i < len(s); i++ {
		ch := s[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			break
		}
	}
	return s[:i]
}

// IsShell reports whether name is a shell that runs code given with -c, a
// script file or its stdin. Code for any of them is parsed as bash, which
// accepts the others' code or fails to parse it (and then fails closed).
func IsShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "rbash", "fish":
		return true
	}
	return false
}

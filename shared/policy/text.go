package policy

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// glob matches s against a pattern whose only special character is '*'.
func glob(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, pattern = s[len(pattern[:star]):], pattern[star+1:]
	for {
		star = strings.IndexByte(pattern, '*')
		if star < 0 {
			return strings.HasSuffix(s, pattern)
		}
		j := strings.Index(s, pattern[:star])
		if j < 0 {
			return false
		}
		s, pattern = s[j+star:], pattern[star+1:]
	}
}

func matchAlt(alts []string, s string) bool {
	for _, a := range alts {
		if glob(a, s) {
			return true
		}
	}
	return false
}

// scanOpts consumes leading options. shortValue lists the single-letter
// options that take a value; longValue the long ones. It returns the options
// and the index of the first word after them (after a "--").
func scanOpts(args []word, shortValue string, longValue []string) ([]option, int) {
	var opts []option
	i := 0
	for ; i < len(args); i++ {
		w := args[i]
		// A dynamic word is an option only when its literal text starts with
		// "-" (an expansion's placeholder never does): find -exec xargs -I{}.
		if len(w.val) < 2 || w.val[0] != '-' {
			return opts, i
		}
		if w.val == "--" {
			return opts, i + 1
		}
		if strings.HasPrefix(w.val, "--") {
			name, val, has := strings.Cut(w.val, "=")
			o := option{name: name, value: val, hasValue: has}
			if !has && containsExact(longValue, name) && i+1 < len(args) {
				i++
				o.value, o.hasValue, o.valueDyn = args[i].val, true, args[i].dyn
			}
			opts = append(opts, o)
			continue
		}
		if w.val[1] >= '0' && w.val[1] <= '9' {
			opts = append(opts, option{name: w.val})
			continue
		}
		for j := 1; j < len(w.val); j++ {
			o := option{name: shortOpts[w.val[j]]}
			if strings.IndexByte(shortValue, w.val[j]) >= 0 {
				o.hasValue = true
				o.value, o.valueDyn = shortOptValue(args, &i, j)
				opts = append(opts, o)
				break
			}
			opts = append(opts, o)
		}
	}
	return opts, i
}

// shortOptValue returns the value of the short option at args[*i].val[j]: the
// rest of the word (-n5), or else the next word (-n 5), advancing *i.
func shortOptValue(args []word, i *int, j int) (string, bool) {
	if w := args[*i]; j+1 < len(w.val) {
		return w.val[j+1:], false
	}
	if *i+1 < len(args) {
		*i++
		return args[*i].val, args[*i].dyn
	}
	return "", false
}

func hasOption(opts []option, names ...string) bool {
	for _, o := range opts {
		for _, n := range names {
			if optionMatches(o.name, n) {
				return true
			}
		}
	}
	return false
}

func optionValue(opts []option, names ...string) (option, bool) {
	for _, o := range opts {
		for _, n := range names {
			if optionMatches(o.name, n) {
				return o, true
			}
		}
	}
	return option{}, false
}

// joinWords joins arguments with spaces, the way ssh, eval and watch build the
// code they hand to a shell.
func joinWords(ws []word) word {
	out := word{val: joinVals(ws)}
	for _, w := range ws {
		out.dyn = out.dyn || w.dyn
	}
	return out
}

func isAssignment(w word) bool {
	if w.dyn {
		return false
	}
	name, _, ok := strings.Cut(w.val, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return true
}

// plainWord reports whether a word is made only of literal and single-quoted
// parts, which can hold no substitution.
func plainWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			return false
		}
	}
	return true
}

func isDigits(s string) bool {
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

func joinVals(ws []word) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.val)
	}
	return b.String()
}

// stmtText is a statement's source without its terminating ";".
func stmtText(src string, st *syntax.Stmt) string {
	t := nodeText(src, st)
	if st.Semicolon.IsValid() && !st.Background && !st.Coprocess && !st.Disown {
		t = strings.TrimSuffix(t, ";")
	}
	return strings.TrimRight(t, " \t")
}

// bareLiteral returns the value of a word written as one unquoted literal.
func bareLiteral(w *syntax.Word) (string, bool) {
	if len(w.Parts) != 1 {
		return "", false
	}
	l, ok := w.Parts[0].(*syntax.Lit)
	if !ok {
		return "", false
	}
	return l.Value, true
}

// identPrefix returns the shell identifier a string starts with ("a" for
// "a[1]"), or "".
func identPrefix(s string) string {
	i := 0
	for ; i < len(s); i++ {
		ch := s[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			break
		}
	}
	return s[:i]
}

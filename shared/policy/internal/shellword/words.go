package shellword

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Word is one argument after the shell has done its work, as far as the
// classifier can know it without running anything.
type Word struct {
	// val is the argument's value. For a dynamic word it is the value with every
	// unresolvable part replaced by that part's own source text (so "$DIR" stays
	// "$DIR"), which keeps the text re-parseable when the word is shell code.
	Val string
	// dyn: the word contains a parameter, command, arithmetic or process
	// expansion, so its value — and even how many arguments it becomes — is only
	// known at run time.
	Dyn bool
	// glob: the word contains an unquoted glob character. Its literal text is
	// still a good description (a glob with a literal prefix expands to names
	// with that prefix) but it is not the argument the program will see.
	Glob bool
	// FlagLike: a glob with no literal prefix, which can expand to a file name
	// that starts with "-" and so to an option.
	FlagLike bool
	// split: an expansion outside quotes, which the shell splits into any
	// number of words; a word whose expansions are all quoted stays one word.
	Split bool
	// fixed is how many bytes of val come before the first expansion: the
	// part of a dynamic word that is known.
	Fixed int
	// proc is set when the whole word is one process substitution <(…):
	// a shell given it as its script runs that command's output.
	Proc *syntax.ProcSubst
}

// maxBraceWords bounds brace expansion: a word that expands to more arguments
// than this is treated as dynamic rather than enumerated.
const maxBraceWords = 64

// ResolveWords resolves a command's words into arguments, performing brace
// expansion (which is how `{rm,-rf,/x}` runs rm).
func ResolveWords(src string, ws []*syntax.Word, out []Word) []Word {
	for _, w := range ws {
		out = resolveWord(src, w, out)
	}
	return out
}

func resolveWord(src string, w *syntax.Word, out []Word) []Word {
	if hasBraceCandidate(w) {
		// SplitBraces rewrites the word it is given; work on a copy so the
		// tree (which other passes walk) never sees BraceExp nodes.
		cp := &syntax.Word{Parts: append([]syntax.WordPart(nil), w.Parts...)}
		if syntax.SplitBraces(cp) {
			start := len(out)
			n := 0
			for ew, err := range expand.BracesSeq(nil, cp) {
				n++
				if err != nil || n > maxBraceWords {
					out = out[:start]
					return append(out, Word{Val: NodeText(src, w), Dyn: true})
				}
				out = append(out, ResolveParts(src, ew.Parts))
			}
			return out
		}
	}
	return append(out, ResolveParts(src, w.Parts))
}

func hasBraceCandidate(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.IndexByte(l.Value, '{') >= 0 {
			return true
		}
	}
	return false
}

// ResolveParts resolves the parts of one word (no brace expansion).
func ResolveParts(src string, parts []syntax.WordPart) Word {
	// Fast paths for the overwhelmingly common shapes: one plain literal, one
	// single-quoted string, one double-quoted plain literal.
	if len(parts) == 1 {
		switch p := parts[0].(type) {
		case *syntax.Lit:
			if strings.IndexByte(p.Value, '\\') < 0 && !strings.ContainsAny(p.Value, "*?[") {
				return Word{Val: p.Value}
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				return Word{Val: p.Value}
			}
		case *syntax.ProcSubst:
			return Word{Val: NodeText(src, p), Dyn: true, Split: true, Proc: p}
		case *syntax.DblQuoted:
			if len(p.Parts) == 1 {
				if l, ok := p.Parts[0].(*syntax.Lit); ok && strings.IndexByte(l.Value, '\\') < 0 {
					return Word{Val: l.Value}
				}
			}
		}
	}
	var b strings.Builder
	var w Word
	resolveInto(src, parts, false, &b, &w)
	w.Val = b.String()
	return w
}

func resolveInto(src string, parts []syntax.WordPart, quoted bool, b *strings.Builder, w *Word) {
	for _, part := range parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if quoted {
				unescapeDouble(p.Value, b)
			} else {
				unescapeBare(p.Value, b, w)
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				b.WriteString(p.Value)
				continue
			}
			if s, ok := DecodeANSIC(p.Value); ok {
				b.WriteString(s)
			} else {
				w.markDyn(b, quoted)
				b.WriteString(NodeText(src, p))
			}
		case *syntax.DblQuoted:
			resolveInto(src, p.Parts, true, b, w)
		case *syntax.ExtGlob:
			if !quoted {
				if b.Len() == 0 {
					w.FlagLike = true
				}
				w.Glob = true
			}
			b.WriteString(NodeText(src, p))
		default:
			// Parameter, command, arithmetic and process expansions, and any
			// part kind this code does not know: only known at run time.
			w.markDyn(b, quoted)
			b.WriteString(NodeText(src, p))
		}
	}
}

// markDyn records an expansion at the current end of b.
func (w *Word) markDyn(b *strings.Builder, quoted bool) {
	if !w.Dyn {
		w.Fixed = b.Len()
	}
	w.Dyn = true
	w.Split = w.Split || !quoted
}

// unescapeBare removes the backslashes of an unquoted literal and notes
// unquoted glob characters.
func unescapeBare(s string, b *strings.Builder, w *Word) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
			continue
		case '*', '?', '[':
			// A '[' is a glob only when a ']' closes it: `[ -f x ]` runs [.
			if c == '[' && strings.IndexByte(s[i+1:], ']') < 0 {
				break
			}
			if b.Len() == 0 && !w.Glob {
				w.FlagLike = true
			}
			w.Glob = true
		}
		b.WriteByte(c)
	}
}

// unescapeDouble applies the backslash rules inside double quotes (and in an
// unquoted here-document): a backslash escapes only $ ` " \ and newline.
func unescapeDouble(s string, b *strings.Builder) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '$', '`', '"', '\\':
				i++
				b.WriteByte(s[i])
				continue
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(c)
	}
}

// DecodeANSIC decodes the body of a $'...' string. Escapes it does not know
// make the word dynamic rather than guessed.
func DecodeANSIC(s string) (string, bool) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(e)
		case 'x', 'u', 'U':
			max := 2
			if e == 'u' {
				max = 4
			} else if e == 'U' {
				max = 8
			}
			j := i + 1
			for j < len(s) && j-i-1 < max && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				return "", false
			}
			n, err := strconv.ParseUint(s[i+1:j], 16, 32)
			if err != nil {
				return "", false
			}
			if e == 'x' {
				b.WriteByte(byte(n))
			} else {
				if !utf8.ValidRune(rune(n)) {
					return "", false
				}
				b.WriteRune(rune(n))
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(n))
			i = j - 1
		default:
			return "", false
		}
	}
	return b.String(), true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// NodeText returns the source text of a node, or "" when its positions do not
// fit the source (which would mean the node came from another parse).
func NodeText(src string, n syntax.Node) string {
	start, end := int(n.Pos().Offset()), int(n.End().Offset())
	if start < 0 || end > len(src) || start > end {
		return ""
	}
	return src[start:end]
}

// HeredocText resolves a here-document body. A quoted delimiter (<<'EOF')
// makes the body literal; otherwise it expands like a double-quoted string.
func HeredocText(src string, r *syntax.Redirect) Word {
	if r.Hdoc == nil {
		return Word{}
	}
	if delimiterQuoted(r.Word) {
		var b strings.Builder
		for _, p := range r.Hdoc.Parts {
			if l, ok := p.(*syntax.Lit); ok {
				b.WriteString(l.Value)
			} else {
				return Word{Val: NodeText(src, r.Hdoc), Dyn: true}
			}
		}
		return Word{Val: b.String()}
	}
	var b strings.Builder
	var w Word
	resolveInto(src, r.Hdoc.Parts, true, &b, &w)
	w.Val = b.String()
	return w
}

func delimiterQuoted(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		case *syntax.Lit:
			if strings.IndexByte(p.Value, '\\') >= 0 {
				return true
			}
		}
	}
	return false
}

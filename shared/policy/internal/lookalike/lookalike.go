package lookalike

import (
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/unicode/runenames"
)

// Names that only look alike. A command word written with a Cyrillic `о`, a
// fullwidth `ｒ` or a zero-width space reads as an ASCII program to a person
// approving it, yet is a different string to the shell and to the rules. The
// gate treats such text twice: the syntax gate refuses it, naming the
// character (checkLookalikes), and the classifier also classifies the text as
// it would read once normalised, keeping whichever class is higher, so a
// lookalike is never an unknown harmless word.

// confusables maps letters of other scripts to the ASCII letter they are
// drawn like in common fonts. NFKC already folds fullwidth, mathematical and
// ligature forms; this covers what it leaves: Cyrillic, Greek, Armenian and
// Latin extensions, after Unicode's confusables data (UTS #39) restricted to
// single letters that are indistinguishable in a terminal font.
var confusables = map[rune]byte{
	// Cyrillic
	'а': 'a', 'в': 'B', 'е': 'e', 'ԁ': 'd', 'һ': 'h', 'і': 'i', 'ј': 'j', 'к': 'k',
	'ӏ': 'l', 'м': 'M', 'н': 'H', 'о': 'o', 'р': 'p', 'ԛ': 'q', 'г': 'r', 'ѕ': 's',
	'т': 'T', 'у': 'y', 'ԝ': 'w', 'х': 'x', 'ү': 'y', 'ɡ': 'g', 'с': 'c', 'ь': 'b',
	'А': 'A', 'В': 'B', 'Е': 'E', 'Н': 'H', 'І': 'I', 'Ј': 'J', 'К': 'K', 'М': 'M',
	'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T', 'У': 'Y', 'Х': 'X', 'Ѕ': 'S', 'Ԁ': 'D',
	'Ү': 'Y', 'Ԛ': 'Q', 'Ԝ': 'W', 'Ӏ': 'I', 'Ꙇ': 'I',
	// Greek
	'α': 'a', 'ο': 'o', 'ν': 'v', 'ι': 'i', 'κ': 'k', 'ρ': 'p', 'τ': 't', 'υ': 'u',
	'χ': 'x', 'ϲ': 'c', 'ϳ': 'j', 'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H',
	'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y',
	'Χ': 'X', 'Ϲ': 'C',
	// Armenian
	'օ': 'o', 'ս': 'u', 'հ': 'h', 'ո': 'n', 'ց': 'g', 'զ': 'q', 'ա': 'w', 'Օ': 'O',
	'Ս': 'U',
	// Latin letters outside ASCII drawn as ASCII ones
	'ı': 'i', 'ȷ': 'j', 'ɑ': 'a', 'ɩ': 'i', 'ǀ': 'l',
	// small capitals, read as the lower-case letter they stand for
	'ʟ': 'l', 'ʀ': 'r', 'ꜱ': 's', 'ᴄ': 'c', 'ᴏ': 'o', 'ᴠ': 'v', 'ᴡ': 'w', 'ᴢ': 'z',
	'ʏ': 'y', 'ɪ': 'i', 'ᴋ': 'k', 'ᴍ': 'm', 'ɴ': 'n', 'ᴘ': 'p', 'ᴛ': 't', 'ᴜ': 'u',
	'ʙ': 'b', 'ᴅ': 'd', 'ᴇ': 'e', 'ɢ': 'g', 'ʜ': 'h', 'ᴊ': 'j',
}

// IsUnicodeSpace reports characters that display as a space but are not one to the
// shell, so `rm` NO-BREAK SPACE `-rf` is a single word.
func IsUnicodeSpace(r rune) bool {
	return r > 0x7f && unicode.Is(unicode.Zs, r)
}

// IsInvisible reports characters that display as nothing (or nearly so) and so
// let a command run differently from how it reads: format characters (zero
// width spaces and joiners, soft hyphen, word joiner, byte-order mark, tags),
// control characters other than tab and newline, the Hangul fillers, and the
// combining grapheme joiner and variation selectors.
func IsInvisible(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
		return true
	case r < 0x80:
		return false
	case r == 0x115f || r == 0x1160 || r == 0x3164 || r == 0xffa0 || r == 0x034f || r == 0x180e:
		return true
	case r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// IsBidi reports the bidirectional controls, which reorder how the text
// around them is displayed ("Trojan Source").
func IsBidi(r rune) bool {
	switch {
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	case r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}

// IsASCII reports whether s is all ASCII.
func IsASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Normalise returns the text as a reader of it would take it:
// invisible characters removed, Unicode spaces made spaces, NFKC applied
// (fullwidth `ｒｍ` is `rm`) and confusable letters replaced by the ASCII
// letter they look like. ASCII text is returned unchanged without copying.
func Normalise(s string) string {
	if IsASCII(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case IsInvisible(r):
		case IsUnicodeSpace(r):
			b.WriteByte(' ')
		case confusables[r] != 0:
			// Before NFKC too: it folds some lookalikes (Greek lunate
			// sigma ϲ) to letters that no longer look like ASCII.
			b.WriteByte(confusables[r])
		default:
			b.WriteRune(r)
		}
	}
	folded := norm.NFKC.String(b.String())
	b.Reset()
	for _, r := range folded {
		if a, ok := confusables[r]; ok {
			b.WriteByte(a)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Command classifies an argv whose program word is not ASCII: as
// the worst program it could be taken for when that is destructive, else as
// the unknown program it is, explained as a lookalike either way.
func Command(c walk.Classifier, argv []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	if lookalikeProgram(c, argv, text, f, in) {
		return
	}
	mark := c.Mark()
	c.CommandResolved(argv, text, f, in)
	r, _ := firstLookalike(argv[0].Val)
	label := fmt.Sprintf("lookalike: `%s` is not an ASCII program name (%s)", printable(argv[0].Val), DescribeRune(r))
	segs := c.Since(mark)
	for i := range segs {
		if s := &segs[i]; s.Class != ruleset.ReadOnly && !strings.HasPrefix(s.Why, "lookalike: ") {
			s.Why = label + " → " + s.Why
		}
	}
}

// lookalikeProgram classifies a program word that is not ASCII as the worst
// program it could be taken for. A letter from another script stands in for
// an ASCII one by its shape (Cyrillic `р` is drawn like `p`) or by its sound
// on a phonetic keyboard (the same `р` sits on the R key), so no one-to-one
// table says which program the writer meant: each such letter is a wildcard,
// and every program a destructive rule names that fits the pattern is tried
// with the same arguments, as a glob program word is. It reports whether a
// destructive reading was found; otherwise the word is classified as the
// unknown program it is (config_mutation, never read_only).
func lookalikeProgram(c walk.Classifier, argv []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	pw := argv[0]
	base := pw.Val
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		base = base[i+1:]
	}
	pattern, wild, ok := lookalikePattern(base)
	if !ok || !wild && pattern == base {
		return false
	}
	tried := 0
	for _, name := range c.Rules().HintPrograms {
		if len(name) != len(pattern) {
			continue
		}
		if ok, _ := path.Match(pattern, name); !ok {
			continue
		}
		if tried++; tried > walk.MaxArgScans*4 {
			break
		}
		cand := append([]shellword.Word{{Val: name}}, argv[1:]...)
		mark := c.Mark()
		if c.KeepDestructive(func() { c.Command(cand, text, f, in) }) {
			r, _ := firstLookalike(base)
			label := fmt.Sprintf("lookalike: `%s` could be `%s` (%s in a program name)", printable(pw.Val), name, DescribeRune(r))
			segs := c.Since(mark)
			for i := range segs {
				s := &segs[i]
				s.Reason = "`" + printable(pw.Val) + "` read as `" + name + "`: " + s.Reason
				if s.Class != ruleset.ReadOnly {
					s.Why = label + " → " + s.Why
				}
			}
			return true
		}
	}
	return false
}

// lookalikePattern turns a program name into a path.Match pattern: ASCII
// stays, invisible characters go, letters NFKC folds to ASCII (fullwidth)
// are folded, and any other letter is `?`. ok is false when the name holds
// something that is neither (a symbol, a digit of another script), which no
// ASCII program name imitates.
func lookalikePattern(name string) (pattern string, wild, ok bool) {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r < utf8.RuneSelf:
			if strings.ContainsRune(`*?[\`, r) {
				b.WriteByte('\\')
			}
			b.WriteRune(r)
		case IsInvisible(r) || IsBidi(r):
		case confusables[r] != 0:
			b.WriteByte('?')
			wild = true
		default:
			if n := norm.NFKC.String(string(r)); IsASCII(n) && n != "" {
				b.WriteString(n)
			} else if unicode.IsLetter(r) {
				b.WriteByte('?')
				wild = true
			} else {
				return "", false, false
			}
		}
	}
	return b.String(), wild, b.Len() > 0
}

// firstLookalike returns the first character of s outside printable ASCII.
func firstLookalike(s string) (rune, bool) {
	for _, r := range s {
		if r >= utf8.RuneSelf || IsInvisible(r) {
			return r, true
		}
	}
	return 0, false
}

// DescribeRune names a character the way the syntax gate's messages do:
// "U+0440 CYRILLIC SMALL LETTER ER".
func DescribeRune(r rune) string {
	name := runenames.Name(r)
	if name == "" || strings.HasPrefix(name, "<") {
		switch {
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f):
			name = "a control character"
		default:
			name = "an unnamed character"
		}
	}
	return fmt.Sprintf("U+%04X %s", r, name)
}

// LooksLike says what a non-ASCII character reads as, "" when it does not
// read as ASCII.
func LooksLike(r rune) string {
	if IsInvisible(r) || IsBidi(r) {
		return "nothing"
	}
	if IsUnicodeSpace(r) {
		return "a space"
	}
	if n := Normalise(string(r)); n != "" && IsASCII(n) {
		return "`" + n + "`"
	}
	return ""
}

// Label names the first word of command that normalising changed,
// for the explanation of a class raised by reading it normalised:
// "`рm` reads as `pm` (U+0440 CYRILLIC SMALL LETTER ER looks like `p`)".
func Label(command string) string {
	for _, w := range strings.FieldsFunc(command, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == ';' || r == '|' || r == '&' }) {
		n := Normalise(w)
		if n == w {
			continue
		}
		for _, r := range w {
			if r < utf8.RuneSelf && !IsInvisible(r) {
				continue
			}
			if like := LooksLike(r); like != "" || IsInvisible(r) {
				return fmt.Sprintf("`%s` reads as `%s` (%s looks like %s)", printable(w), n, DescribeRune(r), like)
			}
		}
		return fmt.Sprintf("`%s` reads as `%s`", printable(w), n)
	}
	return "the command reads differently once normalised"
}

// printable writes invisible and bidirectional characters as \u escapes, so a
// message shows where they are.
func printable(s string) string {
	if IsASCII(s) && !strings.ContainsFunc(s, IsInvisible) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if IsInvisible(r) || IsBidi(r) {
			fmt.Fprintf(&b, "\\u%04X", r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

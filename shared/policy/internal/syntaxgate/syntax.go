package syntaxgate

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/oikos-hq/oikos/shared/policy/internal/lookalike"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"golang.org/x/text/unicode/norm"
	"mvdan.cc/sh/v3/syntax"
)

// ErrSyntax is wrapped by every error [Check] returns.
var ErrSyntax = errors.New("syntax gate")

// Check refuses commands that are almost certainly typed wrong, with a
// message that names the fix: a flag separated from its dash (`head - n 3`,
// which runs head on the files "-", "n" and "3"), a dash that is really an en
// dash or minus sign (`–n`, pasted from a document), a command that does not
// parse as shell, or an empty command. Valid commands such as `tail -n 3`
// pass: the check works on parsed words, never on the raw text, so quoted
// text (`echo 'a - b'`) is not inspected.
func Check(command string) error {
	return CheckWith(syntax.NewParser(syntax.Variant(syntax.LangBash)), command)
}

// CheckWith is Check with the caller's parser (the classifier's pooled one).
func CheckWith(parser *syntax.Parser, command string) error {
	if strings.TrimSpace(command) == "" {
		return fmt.Errorf("%w: the command is empty", ErrSyntax)
	}
	if len(command) > walk.MaxCommandBytes {
		return fmt.Errorf("%w: the command is longer than %d bytes; split it up", ErrSyntax, walk.MaxCommandBytes)
	}
	if walk.Nesting(command) > walk.MaxNesting {
		return fmt.Errorf("%w: brackets or pipelines nest more than %d deep; simplify the command", ErrSyntax, walk.MaxNesting)
	}
	if err := checkInvisible(command); err != nil {
		return err
	}
	return checkSyntax(parser, command, 0)
}

// checkInvisible refuses characters that let a command run differently from
// how it reads, wherever they are, quoted text and comments included:
// bidirectional controls reorder what is displayed, and invisible characters
// (zero-width spaces, joiners, soft hyphens, control characters) change the
// words without showing. Neither belongs in a command an operator approves;
// a file name that really holds one can be written with bash's $'\u…'.
func checkInvisible(command string) error {
	if lookalike.IsASCII(command) && !strings.ContainsFunc(command, lookalike.IsInvisible) {
		return nil
	}
	n := 0
	for _, r := range command {
		n++
		switch {
		case lookalike.IsBidi(r):
			return fmt.Errorf("%w: %s at character %d is a bidirectional control: it makes the command display in a different order from how it runs; delete it",
				ErrSyntax, lookalike.DescribeRune(r), n)
		case lookalike.IsInvisible(r):
			return fmt.Errorf("%w: %s at character %d is invisible: the command would run differently from how it reads; delete it",
				ErrSyntax, lookalike.DescribeRune(r), n)
		}
	}
	return nil
}

func checkSyntax(parser *syntax.Parser, src string, depth int) error {
	file, err := parser.Parse(strings.NewReader(src), "")
	if err != nil {
		return fmt.Errorf("%w: the command does not parse as shell (%v); check its quoting and brackets", ErrSyntax, err)
	}
	var found error
	syntax.Walk(file, func(n syntax.Node) bool {
		if found != nil {
			return false
		}
		call, ok := n.(*syntax.CallExpr)
		if !ok {
			return true
		}
		found = checkCall(parser, src, call, depth)
		return found == nil
	})
	return found
}

func checkCall(parser *syntax.Parser, src string, call *syntax.CallExpr, depth int) error {
	args := call.Args
	for i, w := range args {
		if err := checkLookalikes(src, w, i == 0, depth); err != nil {
			return err
		}
		lit, bare := shellword.BareLiteral(w)
		if !bare {
			continue
		}
		if r, size := utf8.DecodeRuneInString(lit); size > 1 && isDashLookalike(r) {
			fixed := "-" + lit[size:]
			return fmt.Errorf("%w: `%s` starts with %s, not a hyphen; write `%s`", ErrSyntax, lit, dashName(r), fixed)
		}
		if i == 0 || lit != "-" || i+1 >= len(args) {
			continue
		}
		next, ok := shellword.BareLiteral(args[i+1])
		if !ok || len(next) != 1 || !isASCIILetter(next[0]) {
			continue
		}
		if prev, ok := shellword.BareLiteral(args[i-1]); ok && i > 1 && strings.HasPrefix(prev, "-") {
			// `tar -cf - x`: the lone dash is the previous option's value.
			continue
		}
		bad := shellword.NodeText(src, args[i]) + " " + shellword.NodeText(src, args[i+1])
		fixedArgs := make([]string, 0, len(args)-1)
		for j := 0; j < len(args); j++ {
			if j == i {
				fixedArgs = append(fixedArgs, "-"+next)
				j++
				continue
			}
			fixedArgs = append(fixedArgs, shellword.NodeText(src, args[j]))
		}
		return fmt.Errorf("%w: flag typo `%s`: a space separates the dash from its flag; write `-%s`, as in `%s`",
			ErrSyntax, bad, next, strings.Join(fixedArgs, " "))
	}
	// Follow literal code given to a shell with -c.
	if depth < 4 && len(args) >= 3 {
		prog, ok := shellword.BareLiteral(args[0])
		if ok {
			if i := strings.LastIndexByte(prog, '/'); i >= 0 {
				prog = prog[i+1:]
			}
		}
		if ok && shellword.IsShell(prog) {
			for i := 1; i+1 < len(args); i++ {
				opt, ok := shellword.BareLiteral(args[i])
				if !ok || !strings.HasPrefix(opt, "-") || strings.HasPrefix(opt, "--") {
					continue
				}
				if strings.ContainsRune(opt, 'c') {
					code := shellword.ResolveParts(src, args[i+1].Parts)
					if code.Dyn {
						break
					}
					if err := checkSyntax(parser, code.Val, depth+1); err != nil {
						return err
					}
					break
				}
			}
		}
	}
	return nil
}

func isASCIILetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

func isDashLookalike(r rune) bool {
	switch r {
	case '\u2010', '\u2011', '\u2012', '\u2013', '\u2014', '\u2015', '\u2212', '\uFE63', '\uFF0D':
		return true
	}
	return false
}

func dashName(r rune) string {
	switch r {
	case '\u2013':
		return "an en dash (U+2013)"
	case '\u2014':
		return "an em dash (U+2014)"
	case '\u2212':
		return "a minus sign (U+2212)"
	}
	return fmt.Sprintf("a dash look-alike (U+%04X)", r)
}

// checkLookalikes refuses a word that only looks like what it is. The program
// word must be ASCII: program names on the hosts Oikos manages are, so `рm`
// (Cyrillic er) or `ｌｓ` (fullwidth) is a lookalike, never a program the
// rules know. In other words, unquoted text is refused when it holds a
// Unicode space (which joins what look like two words into one) or when it
// reads as a different ASCII word (`-гf`); quoted arguments, and non-ASCII
// file names that do not imitate ASCII (`données`, `фото`), keep their
// Unicode.
func checkLookalikes(src string, w *syntax.Word, program bool, depth int) error {
	if lookalike.IsASCII(src[w.Pos().Offset():w.End().Offset()]) {
		return nil
	}
	start, end := int(w.Pos().Offset()), int(w.End().Offset())
	at := func(r rune) string {
		off := start
		if i := strings.IndexRune(src[start:end], r); i >= 0 {
			off += i
		}
		n := utf8.RuneCountInString(src[:off]) + 1
		if depth > 0 {
			return fmt.Sprintf("character %d of the code given to the shell", n)
		}
		return fmt.Sprintf("character %d", n)
	}
	for _, part := range w.Parts {
		if lit, ok := part.(*syntax.Lit); ok {
			for _, r := range lit.Value {
				if lookalike.IsUnicodeSpace(r) {
					return fmt.Errorf("%w: `%s` contains %s at %s, which looks like a space but joins the text around it into one word; type a plain space, or quote the word if the character is meant",
						ErrSyntax, lit.Value, lookalike.DescribeRune(r), at(r))
				}
			}
		}
	}
	if program {
		val := shellword.ResolveParts(src, w.Parts)
		name := val.Val
		if strings.ContainsRune(name, '/') && lookalike.Normalise(name) == name {
			// A path: its directories may be non-ASCII; its name is
			// checked by the classifier like any other program outside
			// the system directories.
			return nil
		}
		for _, r := range name {
			if r < utf8.RuneSelf {
				continue
			}
			fix := "program names are ASCII; retype it in ASCII"
			if n := norm.NFKC.String(name); n != name && lookalike.IsASCII(n) {
				fix = "program names are ASCII; write `" + n + "`"
			}
			like := "which is not ASCII"
			if l := lookalike.LooksLike(r); l != "" {
				like = "which looks like " + l + " but is not ASCII"
			}
			return fmt.Errorf("%w: the command word `%s` contains %s at %s, %s; %s",
				ErrSyntax, name, lookalike.DescribeRune(r), at(r), like, fix)
		}
		return nil
	}
	for _, part := range w.Parts {
		lit, ok := part.(*syntax.Lit)
		if !ok {
			continue
		}
		if n := lookalike.Normalise(lit.Value); n != lit.Value && lookalike.IsASCII(n) {
			for _, r := range lit.Value {
				if l := lookalike.LooksLike(r); r >= utf8.RuneSelf && l != "" {
					return fmt.Errorf("%w: `%s` contains %s at %s, which looks like %s but is not ASCII; type `%s`, or quote the word if the character is meant",
						ErrSyntax, lit.Value, lookalike.DescribeRune(r), at(r), l, n)
				}
			}
		}
	}
	return nil
}

package policy

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"
)

// ErrSyntax is wrapped by every error [CheckSyntax] returns.
var ErrSyntax = errors.New("syntax gate")

// CheckSyntax refuses commands that are almost certainly typed wrong, with a
// message that names the fix: a flag separated from its dash (`head - n 3`,
// which runs head on the files "-", "n" and "3"), a dash that is really an en
// dash or minus sign (`–n`, pasted from a document), a command that does not
// parse as shell, or an empty command. Valid commands such as `tail -n 3`
// pass: the check works on parsed words, never on the raw text, so quoted
// text (`echo 'a - b'`) is not inspected.
func CheckSyntax(command string) error {
	return checkSyntaxWith(syntax.NewParser(syntax.Variant(syntax.LangBash)), command)
}

func checkSyntaxWith(parser *syntax.Parser, command string) error {
	if strings.TrimSpace(command) == "" {
		return fmt.Errorf("%w: the command is empty", ErrSyntax)
	}
	if len(command) > maxCommandBytes {
		return fmt.Errorf("%w: the command is longer than %d bytes; split it up", ErrSyntax, maxCommandBytes)
	}
	if nesting(command) > maxNesting {
		return fmt.Errorf("%w: brackets or pipelines nest more than %d deep; simplify the command", ErrSyntax, maxNesting)
	}
	return checkSyntax(parser, command, 0)
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
		lit, bare := bareLiteral(w)
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
		next, ok := bareLiteral(args[i+1])
		if !ok || len(next) != 1 || !isASCIILetter(next[0]) {
			continue
		}
		if prev, ok := bareLiteral(args[i-1]); ok && i > 1 && strings.HasPrefix(prev, "-") {
			// `tar -cf - x`: the lone dash is the previous option's value.
			continue
		}
		bad := nodeText(src, args[i]) + " " + nodeText(src, args[i+1])
		fixedArgs := make([]string, 0, len(args)-1)
		for j := 0; j < len(args); j++ {
			if j == i {
				fixedArgs = append(fixedArgs, "-"+next)
				j++
				continue
			}
			fixedArgs = append(fixedArgs, nodeText(src, args[j]))
		}
		return fmt.Errorf("%w: flag typo `%s`: a space separates the dash from its flag; write `-%s`, as in `%s`",
			ErrSyntax, bad, next, strings.Join(fixedArgs, " "))
	}
	// Follow literal code given to a shell with -c.
	if depth < 4 && len(args) >= 3 {
		prog, ok := bareLiteral(args[0])
		if ok {
			if i := strings.LastIndexByte(prog, '/'); i >= 0 {
				prog = prog[i+1:]
			}
		}
		if ok && isShell(prog) {
			for i := 1; i+1 < len(args); i++ {
				opt, ok := bareLiteral(args[i])
				if !ok || !strings.HasPrefix(opt, "-") || strings.HasPrefix(opt, "--") {
					continue
				}
				if strings.ContainsRune(opt, 'c') {
					code := resolveParts(src, args[i+1].Parts)
					if code.dyn {
						break
					}
					if err := checkSyntax(parser, code.val, depth+1); err != nil {
						return err
					}
					break
				}
			}
		}
	}
	return nil
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

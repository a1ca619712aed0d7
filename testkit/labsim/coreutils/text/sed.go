package text

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// sedAddr is one address: a line number, "$" or a regular expression.
type sedAddr struct {
	line int
	last bool
	re   *regexp.Regexp
}

func (a *sedAddr) match(line string, n int, isLast bool) bool {
	switch {
	case a.last:
		return isLast
	case a.re != nil:
		return a.re.MatchString(line)
	}
	return n == a.line
}

// sedCmd is one command of a sed script.
type sedCmd struct {
	a1, a2  *sedAddr
	negate  bool
	inRange bool
	name    byte
	re      *regexp.Regexp
	repl    string
	global  bool
	nth     int
	print   bool
	text    string
	from    []rune
	to      []rune
}

func (c *sedCmd) selected(line string, n int, isLast bool) bool {
	var sel bool
	switch {
	case c.a1 == nil:
		sel = true
	case c.a2 == nil:
		sel = c.a1.match(line, n, isLast)
	case c.inRange:
		sel = true
		if c.a2.re != nil {
			if c.a2.match(line, n, isLast) {
				c.inRange = false
			}
		} else if c.a2.last {
			if isLast {
				c.inRange = false
			}
		} else if n >= c.a2.line {
			c.inRange = false
		}
	case c.a1.match(line, n, isLast):
		sel = true
		if c.a2.re != nil || c.a2.last || c.a2.line > n {
			c.inRange = !(c.a2.last && isLast)
		}
	}
	if c.negate {
		return !sel
	}
	return sel
}

type sedParser struct {
	s        string
	i        int
	extended bool
}

func (p *sedParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// delimited reads up to the next unescaped delim, keeping escapes for the regex compiler.
func (p *sedParser) delimited(delim byte) (string, error) {
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '\\' && p.i+1 < len(p.s) {
			if p.s[p.i+1] == delim {
				b.WriteByte(delim)
			} else if p.s[p.i+1] == 'n' {
				b.WriteByte('\n')
			} else {
				b.WriteByte('\\')
				b.WriteByte(p.s[p.i+1])
			}
			p.i += 2
			continue
		}
		if c == delim {
			p.i++
			return b.String(), nil
		}
		b.WriteByte(c)
		p.i++
	}
	return "", fmt.Errorf("unterminated `s' command")
}

func (p *sedParser) regex(src string, fold bool) (*regexp.Regexp, error) {
	if !p.extended {
		src = breToERE(src)
	}
	if fold {
		src = "(?i)" + src
	}
	return regexp.Compile(src)
}

func (p *sedParser) addr() (*sedAddr, error) {
	if p.i >= len(p.s) {
		return nil, nil
	}
	c := p.s[p.i]
	switch {
	case c == '$':
		p.i++
		return &sedAddr{last: true}, nil
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		n, _ := strconv.Atoi(p.s[j:p.i])
		return &sedAddr{line: n}, nil
	case c == '/' || c == '\\':
		delim := byte('/')
		if c == '\\' {
			p.i++
			delim = p.s[p.i]
		}
		p.i++
		src, err := p.delimited(delim)
		if err != nil {
			return nil, fmt.Errorf("unterminated address regex")
		}
		re, err := p.regex(src, false)
		if err != nil {
			return nil, err
		}
		return &sedAddr{re: re}, nil
	}
	return nil, nil
}

func (p *sedParser) parse() ([]*sedCmd, error) {
	var cmds []*sedCmd
	for {
		for p.i < len(p.s) && strings.IndexByte(" \t\n;", p.s[p.i]) >= 0 {
			p.i++
		}
		if p.i >= len(p.s) {
			return cmds, nil
		}
		c := &sedCmd{}
		var err error
		if c.a1, err = p.addr(); err != nil {
			return nil, err
		}
		if c.a1 != nil && p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			if c.a2, err = p.addr(); err != nil {
				return nil, err
			}
		}
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == '!' {
			c.negate = true
			p.i++
			p.skipSpace()
		}
		if p.i >= len(p.s) {
			return nil, fmt.Errorf("missing command")
		}
		c.name = p.s[p.i]
		p.i++
		switch c.name {
		case 'p', 'd', 'q', 'Q', '=', 'P', 'D':
		case 's':
			if p.i >= len(p.s) {
				return nil, fmt.Errorf("unterminated `s' command")
			}
			delim := p.s[p.i]
			p.i++
			src, err := p.delimited(delim)
			if err != nil {
				return nil, err
			}
			repl, err := p.delimited(delim)
			if err != nil {
				return nil, err
			}
			fold := false
			for p.i < len(p.s) && strings.IndexByte("gpiI0123456789", p.s[p.i]) >= 0 {
				switch f := p.s[p.i]; {
				case f == 'g':
					c.global = true
				case f == 'p':
					c.print = true
				case f == 'i' || f == 'I':
					fold = true
				default:
					c.nth = c.nth*10 + int(f-'0')
				}
				p.i++
			}
			if c.re, err = p.regex(src, fold); err != nil {
				return nil, err
			}
			c.repl = repl
		case 'y':
			delim := p.s[p.i]
			p.i++
			from, err := p.delimited(delim)
			if err != nil {
				return nil, err
			}
			to, err := p.delimited(delim)
			if err != nil {
				return nil, err
			}
			c.from, c.to = []rune(from), []rune(to)
			if len(c.from) != len(c.to) {
				return nil, fmt.Errorf("strings for `y' command are different lengths")
			}
		case 'a', 'i', 'c':
			p.skipSpace()
			if p.i < len(p.s) && p.s[p.i] == '\\' {
				p.i++
				if p.i < len(p.s) && p.s[p.i] == '\n' {
					p.i++
				}
			}
			j := strings.IndexByte(p.s[p.i:], '\n')
			if j < 0 {
				j = len(p.s) - p.i
			}
			c.text = p.s[p.i : p.i+j]
			p.i += j
		default:
			return nil, fmt.Errorf("unknown command: `%c'", c.name)
		}
		cmds = append(cmds, c)
	}
}

// expandRepl builds the replacement text for one match (& and \1..\9).
func expandRepl(repl string, line string, m []int) string {
	var b strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '&':
			b.WriteString(line[m[0]:m[1]])
		case c == '\\' && i+1 < len(repl):
			i++
			d := repl[i]
			if d >= '0' && d <= '9' {
				g := int(d - '0')
				if 2*g+1 < len(m) && m[2*g] >= 0 {
					b.WriteString(line[m[2*g]:m[2*g+1]])
				}
			} else if d == 'n' {
				b.WriteByte('\n')
			} else if d == 't' {
				b.WriteByte('\t')
			} else {
				b.WriteByte(d)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func substitute(c *sedCmd, line string) (string, bool) {
	matches := c.re.FindAllStringSubmatchIndex(line, -1)
	if len(matches) == 0 {
		return line, false
	}
	var b strings.Builder
	prev := 0
	done := false
	for k, m := range matches {
		if (c.nth > 0 && k+1 != c.nth) || (c.nth == 0 && !c.global && k > 0) || (c.nth > 0 && c.global && k+1 < c.nth) {
			continue
		}
		b.WriteString(line[prev:m[0]])
		b.WriteString(expandRepl(c.repl, line, m))
		prev = m[1]
		done = true
		if !c.global {
			break
		}
	}
	if !done {
		return line, false
	}
	b.WriteString(line[prev:])
	return b.String(), true
}

func sed(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	var scripts []string
	var files []string
	quiet, extended, inPlace := false, false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-n" || a == "--quiet" || a == "--silent":
			quiet = true
		case a == "-E" || a == "-r" || a == "--regexp-extended":
			extended = true
		case a == "-e" || a == "--expression":
			if i+1 >= len(args) {
				return cli.Usage(inv, fmt.Errorf("option requires an argument -- 'e'"), 1)
			}
			i++
			scripts = append(scripts, args[i])
		case strings.HasPrefix(a, "-i") || strings.HasPrefix(a, "--in-place"):
			inPlace = true
		case a == "-s" || a == "-u" || a == "--posix":
		case len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "nEr") == "":
			quiet = quiet || strings.Contains(a, "n")
			extended = extended || strings.ContainsAny(a, "Er")
		default:
			if len(scripts) == 0 {
				scripts = append(scripts, a)
			} else {
				files = append(files, a)
			}
		}
	}
	if len(scripts) == 0 {
		fmt.Fprintln(inv.Stderr, "Usage: sed [OPTION]... {script-only-if-no-other-script} [input-file]...")
		return 1
	}
	p := &sedParser{s: strings.Join(scripts, "\n"), extended: extended}
	cmds, err := p.parse()
	if err != nil {
		inv.Errorf("-e expression #1, char %d: %v", p.i, err)
		return 1
	}
	run := func(lines []string, endsNL bool, out io.Writer) (quit bool) {
		for n, line := range lines {
			if ctx.Err() != nil {
				return true
			}
			isLast := n == len(lines)-1
			var appendText []string
			deleted := false
			for _, c := range cmds {
				if !c.selected(line, n+1, isLast) {
					continue
				}
				switch c.name {
				case 'p', 'P':
					fmt.Fprintln(out, line)
				case 'd', 'D':
					deleted = true
				case '=':
					fmt.Fprintln(out, n+1)
				case 's':
					nl, ok := substitute(c, line)
					line = nl
					if ok && c.print {
						fmt.Fprintln(out, line)
					}
				case 'y':
					rs := []rune(line)
					for i, r := range rs {
						for j, f := range c.from {
							if r == f {
								rs[i] = c.to[j]
							}
						}
					}
					line = string(rs)
				case 'a':
					appendText = append(appendText, c.text)
				case 'i':
					fmt.Fprintln(out, c.text)
				case 'c':
					fmt.Fprintln(out, c.text)
					deleted = true
				case 'q':
					if !quiet {
						fmt.Fprintln(out, line)
					}
					for _, t := range appendText {
						fmt.Fprintln(out, t)
					}
					return true
				case 'Q':
					return true
				}
				if deleted {
					break
				}
			}
			if !deleted && !quiet {
				if isLast && !endsNL {
					io.WriteString(out, line)
				} else {
					fmt.Fprintln(out, line)
				}
			}
			for _, t := range appendText {
				fmt.Fprintln(out, t)
			}
		}
		return false
	}
	if inPlace {
		code := 0
		for _, f := range files {
			data, err := inv.FS().ReadFile(inv.Abs(f))
			if err != nil {
				inv.Errorf("can't read %s: %s", f, sandbox.Describe(err))
				code = 2
				continue
			}
			lines, endsNL, _ := cli.ReadLines(strings.NewReader(string(data)))
			var b strings.Builder
			run(lines, endsNL, &b)
			for _, c := range cmds {
				c.inRange = false
			}
			if err := inv.FS().WriteFile(inv.Abs(f), []byte(b.String()), 0o644); err != nil {
				code = inv.PathError(f, err)
			}
		}
		return code
	}
	var lines []string
	endsNL := true
	code := cli.EachInput(inv, files, func(_ string, r io.Reader) error {
		ls, nl, err := cli.ReadLines(r)
		lines = append(lines, ls...)
		endsNL = nl
		return err
	})
	if code != 0 {
		code = 2
	}
	run(lines, endsNL, inv.Stdout)
	return code
}

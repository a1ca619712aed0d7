// Package cli holds what the simulated utilities share: getopt-style option parsing, the
// usage message GNU tools print for a bad option, and reading operands (files or stdin)
// whole or line by line.
package cli

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// ErrIsDir is the error of reading a directory as a file.
var ErrIsDir = syscall.EISDIR

// Opts is the result of parsing command-line options getopt-style.
type Opts struct {
	Flags map[string]bool     // short ("n") and long ("recursive") flags seen
	Vals  map[string][]string // values of options that take one
	Args  []string            // operands
}

// Has reports whether any of the flags was given.
func (o Opts) Has(names ...string) bool {
	for _, n := range names {
		if o.Flags[n] {
			return true
		}
	}
	return false
}

// Val is the last value given to any of the options.
func (o Opts) Val(names ...string) (string, bool) {
	for _, n := range names {
		if v, ok := o.Vals[n]; ok && len(v) > 0 {
			return v[len(v)-1], true
		}
	}
	return "", false
}

// Parse parses args getopt-style. withVal lists the short option letters that take a
// value; longVal lists long options that take one. Parsing stops at "--" or (when
// stopAtOperand) at the first operand, so commands that wrap other commands keep theirs.
func Parse(args []string, withVal string, longVal []string, stopAtOperand bool) (Opts, error) {
	o := Opts{Flags: map[string]bool{}, Vals: map[string][]string{}}
	isLongVal := func(n string) bool {
		for _, l := range longVal {
			if l == n {
				return true
			}
		}
		return false
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			o.Args = append(o.Args, args[i+1:]...)
			return o, nil
		case strings.HasPrefix(a, "--"):
			name, v, hasV := strings.Cut(a[2:], "=")
			if hasV {
				o.Vals[name] = append(o.Vals[name], v)
				continue
			}
			if isLongVal(name) {
				if i+1 >= len(args) {
					return o, fmt.Errorf("option '--%s' requires an argument", name)
				}
				i++
				o.Vals[name] = append(o.Vals[name], args[i])
				continue
			}
			o.Flags[name] = true
		case len(a) > 1 && a[0] == '-':
			for j := 1; j < len(a); j++ {
				c := string(a[j])
				if strings.Contains(withVal, c) {
					v := a[j+1:]
					if v == "" {
						if i+1 >= len(args) {
							return o, fmt.Errorf("option requires an argument -- '%s'", c)
						}
						i++
						v = args[i]
					}
					o.Vals[c] = append(o.Vals[c], v)
					break
				}
				o.Flags[c] = true
			}
		default:
			if stopAtOperand {
				o.Args = append(o.Args, args[i:]...)
				return o, nil
			}
			o.Args = append(o.Args, a)
		}
	}
	return o, nil
}

// Usage reports a bad option the way GNU tools do and returns the given status.
func Usage(inv *shell.Invocation, err error, code int) int {
	inv.Errorf("%v", err)
	fmt.Fprintf(inv.Stderr, "Try '%s --help' for more information.\n", inv.Name())
	return code
}

// OpenInput opens an operand for reading; "-" is stdin.
func OpenInput(inv *shell.Invocation, name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(inv.Stdin), nil
	}
	f, err := inv.FS().Open(inv.Abs(name))
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, ErrIsDir
	}
	return f, nil
}

// EachInput calls fn for every operand (stdin when none), reporting unreadable ones as
// "<prog>: <name>: <reason>". It returns 1 if any operand failed.
func EachInput(inv *shell.Invocation, names []string, fn func(name string, r io.Reader) error) int {
	if len(names) == 0 {
		names = []string{"-"}
	}
	code := 0
	for _, n := range names {
		r, err := OpenInput(inv, n)
		if err != nil {
			code = inv.PathError(n, err)
			continue
		}
		err = fn(n, r)
		r.Close()
		if err != nil {
			code = inv.PathError(n, err)
		}
	}
	return code
}

// ReadLines splits data into lines keeping track of whether the last one had a newline.
func ReadLines(r io.Reader) ([]string, bool, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, false, err
	}
	if len(data) == 0 {
		return nil, true, nil
	}
	s := string(data)
	endsNL := strings.HasSuffix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	return strings.Split(s, "\n"), endsNL, nil
}

// ScanLines streams lines (without the newline) to fn; fn returning false stops.
func ScanLines(r io.Reader, fn func(line string) bool) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			if !fn(strings.TrimSuffix(line, "\n")) {
				return nil
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Atoi is strconv.Atoi with a boolean.
func Atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// Expand renders a format of %-directives (stat -c, date +FORMAT): conv writes the value of
// directive c to b and reports whether it knows c. "%%" is "%", an unknown directive stays
// as written and a "%" at the end stays itself. With backslash, \n and \t are a newline and
// a tab and a backslash before any other character stands for that character (stat).
func Expand(format string, backslash bool, conv func(b *strings.Builder, c byte) bool) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if backslash && c == '\\' && i+1 < len(format) {
			i++
			switch format[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(format[i])
			}
			continue
		}
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		if format[i] == '%' {
			b.WriteByte('%')
			continue
		}
		if !conv(&b, format[i]) {
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

// Package coreutils holds the simulated file and text utilities of lab machines: a subset of
// GNU coreutils, findutils, grep and sed, written in Go against the machine's sandbox.FS.
// They behave like the real tools for the options Oikos and its tests use (message formats,
// exit statuses), and nothing in them can reach a file outside the machine's directory.
package coreutils

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Register adds every utility of this package to reg.
func Register(reg shell.Registry) {
	for name, p := range map[string]shell.Program{
		"cat": cat, "head": head, "tail": tail, "ls": ls, "mkdir": mkdir, "rm": rm, "rmdir": rmdir,
		"touch": touch, "cp": cp, "mv": mv, "ln": ln, "stat": stat, "find": find,
		"readlink": readlink, "realpath": realpath, "basename": basename, "dirname": dirname,
		"tee": tee, "chmod": chmod, "chown": chown, "du": du,
		"wc": wc, "grep": grep, "egrep": grep, "fgrep": grep, "sort": sortProg, "uniq": uniq,
		"cut": cut, "tr": tr, "sed": sed, "seq": seq, "md5sum": hashsum, "sha256sum": hashsum,
		"sleep": sleep, "env": env, "xargs": xargs, "sh": sh, "bash": sh, "dash": sh,
		"timeout": timeout, "which": which, "sudo": sudo, "nohup": passthrough, "nice": nice,
		"true": trueProg, "false": falseProg, "yes": yes,
	} {
		reg[name] = p
	}
}

// opts is the result of parsing command-line options getopt-style.
type opts struct {
	flags map[string]bool     // short ("n") and long ("recursive") flags seen
	vals  map[string][]string // values of options that take one
	args  []string            // operands
}

func (o opts) has(names ...string) bool {
	for _, n := range names {
		if o.flags[n] {
			return true
		}
	}
	return false
}

func (o opts) val(names ...string) (string, bool) {
	for _, n := range names {
		if v, ok := o.vals[n]; ok && len(v) > 0 {
			return v[len(v)-1], true
		}
	}
	return "", false
}

// parseOpts parses args getopt-style. withVal lists the short option letters that take a
// value; longVal lists long options that take one. Parsing stops at "--" or (when
// stopAtOperand) at the first operand, so commands that wrap other commands keep theirs.
func parseOpts(args []string, withVal string, longVal []string, stopAtOperand bool) (opts, error) {
	o := opts{flags: map[string]bool{}, vals: map[string][]string{}}
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
			o.args = append(o.args, args[i+1:]...)
			return o, nil
		case strings.HasPrefix(a, "--"):
			name, v, hasV := strings.Cut(a[2:], "=")
			if hasV {
				o.vals[name] = append(o.vals[name], v)
				continue
			}
			if isLongVal(name) {
				if i+1 >= len(args) {
					return o, fmt.Errorf("option '--%s' requires an argument", name)
				}
				i++
				o.vals[name] = append(o.vals[name], args[i])
				continue
			}
			o.flags[name] = true
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
					o.vals[c] = append(o.vals[c], v)
					break
				}
				o.flags[c] = true
			}
		default:
			if stopAtOperand {
				o.args = append(o.args, args[i:]...)
				return o, nil
			}
			o.args = append(o.args, a)
		}
	}
	return o, nil
}

// usage reports a bad option the way GNU tools do and returns the given status.
func usage(inv *shell.Invocation, err error, code int) int {
	inv.Errorf("%v", err)
	fmt.Fprintf(inv.Stderr, "Try '%s --help' for more information.\n", inv.Name())
	return code
}

// openInput opens an operand for reading; "-" is stdin.
func openInput(inv *shell.Invocation, name string) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(inv.Stdin), nil
	}
	f, err := inv.FS().Open(inv.Abs(name))
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		f.Close()
		return nil, errIsDir
	}
	return f, nil
}

// eachInput calls fn for every operand (stdin when none), reporting unreadable ones as
// "<prog>: <name>: <reason>". It returns 1 if any operand failed.
func eachInput(inv *shell.Invocation, names []string, fn func(name string, r io.Reader) error) int {
	if len(names) == 0 {
		names = []string{"-"}
	}
	code := 0
	for _, n := range names {
		r, err := openInput(inv, n)
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

// lines splits data into lines keeping track of whether the last one had a newline.
func readLines(r io.Reader) ([]string, bool, error) {
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

// scanLines streams lines (without the newline) to fn; fn returning false stops.
func scanLines(r io.Reader, fn func(line string) bool) error {
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

func atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func trueProg(context.Context, *shell.Invocation) int  { return 0 }
func falseProg(context.Context, *shell.Invocation) int { return 1 }

func yes(ctx context.Context, inv *shell.Invocation) int {
	word := "y"
	if len(inv.Args) > 1 {
		word = strings.Join(inv.Args[1:], " ")
	}
	line := []byte(word + "\n")
	for ctx.Err() == nil {
		if _, err := inv.Stdout.Write(line); err != nil {
			return 0
		}
	}
	return 130
}

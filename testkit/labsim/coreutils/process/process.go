// Package process holds the simulated utilities that run or wait for other commands (sleep,
// env, xargs, sh, timeout, which, sudo, nohup, nice) and the trivial ones (true, false, yes).
package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode"

	"mvdan.cc/sh/v3/expand"

	"github.com/oikos-hq/oikos/testkit/labsim/coreutils/cli"
	"github.com/oikos-hq/oikos/testkit/labsim/sandbox"
	"github.com/oikos-hq/oikos/testkit/labsim/shell"
)

// Register adds the process utilities to reg.
func Register(reg shell.Registry) {
	maps.Copy(reg, shell.Registry{
		"sleep": sleep, "env": env, "xargs": xargs, "sh": sh, "bash": sh, "dash": sh,
		"timeout": timeout, "which": which, "sudo": sudo, "nohup": passthrough, "nice": nice,
		"true": trueProg, "false": falseProg, "yes": yes,
	})
}

// parseDuration reads sleep/timeout durations: "1", "0.5", "2s", "3m", "1h", "1d".
func parseDuration(s string) (time.Duration, bool) {
	mult := time.Second
	if s != "" {
		switch s[len(s)-1] {
		case 's':
			s = s[:len(s)-1]
		case 'm':
			mult, s = time.Minute, s[:len(s)-1]
		case 'h':
			mult, s = time.Hour, s[:len(s)-1]
		case 'd':
			mult, s = 24*time.Hour, s[:len(s)-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 {
		return 0, false
	}
	return time.Duration(f * float64(mult)), true
}

func sleep(ctx context.Context, inv *shell.Invocation) int {
	if len(inv.Args) < 2 {
		return cli.Usage(inv, errors.New("missing operand"), 1)
	}
	var total time.Duration
	for _, a := range inv.Args[1:] {
		if a == "infinity" {
			total = 1<<63 - 1
			break
		}
		d, ok := parseDuration(a)
		if !ok {
			return cli.Usage(inv, fmt.Errorf("invalid time interval '%s'", a), 1)
		}
		total += d
	}
	t := time.NewTimer(total)
	defer t.Stop()
	select {
	case <-t.C:
		return 0
	case <-ctx.Done():
		// Killed by the caller's deadline or a closed session, as SIGTERM would.
		return 143
	}
}

func env(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	clear := false
	var unset []string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch a := args[0]; {
		case a == "-i" || a == "-" || a == "--ignore-environment":
			clear = true
		case a == "-u":
			if len(args) < 2 {
				return cli.Usage(inv, errors.New("option requires an argument -- 'u'"), 125)
			}
			unset = append(unset, args[1])
			args = args[1:]
		case a == "--":
			args = args[1:]
			goto assignments
		default:
			return cli.Usage(inv, fmt.Errorf("invalid option -- '%s'", strings.TrimLeft(a, "-")), 125)
		}
		args = args[1:]
	}
assignments:
	var assigns []string
	for len(args) > 0 && strings.Contains(args[0], "=") {
		assigns = append(assigns, args[0])
		args = args[1:]
	}
	vars := map[string]string{}
	var order []string
	if !clear {
		for name, vr := range inv.Env.Each {
			if vr.Exported && vr.IsSet() {
				if _, seen := vars[name]; !seen {
					order = append(order, name)
				}
				vars[name] = vr.String()
			}
		}
	}
	for _, u := range unset {
		delete(vars, u)
	}
	for _, kv := range assigns {
		k, v, _ := strings.Cut(kv, "=")
		if _, seen := vars[k]; !seen {
			order = append(order, k)
		}
		vars[k] = v
	}
	if len(args) == 0 {
		for _, k := range order {
			if v, ok := vars[k]; ok {
				fmt.Fprintf(inv.Stdout, "%s=%s\n", k, v)
			}
		}
		return 0
	}
	pairs := make([]string, 0, len(vars))
	for _, k := range order {
		if v, ok := vars[k]; ok {
			pairs = append(pairs, k+"="+v)
		}
	}
	sub := *inv
	sub.Env = envFromPairs(pairs)
	code := run(ctx, &sub, args, shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr})
	if code == 127 {
		return 127
	}
	return code
}

// xargs splits stdin into arguments the way xargs does (blanks and newlines, quotes, or NUL
// with -0, or a custom delimiter with -d).
func splitXargs(data string, nul bool, delim string) []string {
	if nul {
		return strings.FieldsFunc(data, func(r rune) bool { return r == 0 })
	}
	if delim != "" {
		parts := strings.Split(data, delim)
		if len(parts) > 0 && parts[len(parts)-1] == "" {
			parts = parts[:len(parts)-1]
		}
		return parts
	}
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range data {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case unicode.IsSpace(r):
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out
}

func xargs(ctx context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "nIdPLsi", []string{"max-args", "replace", "delimiter", "max-procs"}, true)
	if err != nil {
		return cli.Usage(inv, err, 1)
	}
	cmd := o.Args
	if len(cmd) == 0 {
		cmd = []string{"echo"}
	}
	data, err := io.ReadAll(inv.Stdin)
	if err != nil {
		return 1
	}
	delim, _ := o.Val("d", "delimiter")
	if delim == `\n` {
		delim = "\n"
	}
	items := splitXargs(string(data), o.Has("0", "null"), delim)
	if len(items) == 0 && o.Has("r", "no-run-if-empty") {
		return 0
	}
	stdio := shell.Stdio{Stdout: inv.Stdout, Stderr: inv.Stderr}
	worst := 0
	note := func(code int) bool {
		switch {
		case code == 255:
			inv.Errorf("%s: exited with status 255; aborting", cmd[0])
			worst = 124
			return false
		case code == 127:
			worst = 127
			return false
		case code != 0:
			worst = 123
		}
		return true
	}
	if rep, ok := o.Val("I", "replace", "i"); ok {
		if rep == "" {
			rep = "{}"
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		for _, item := range lines {
			if item == "" {
				continue
			}
			argv := make([]string, len(cmd))
			for i, a := range cmd {
				argv[i] = strings.ReplaceAll(a, rep, item)
			}
			if !note(run(ctx, inv, argv, stdio)) {
				break
			}
		}
		return worst
	}
	per := len(items)
	if v, ok := o.Val("n", "max-args"); ok {
		if n, ok := cli.Atoi(v); ok && n > 0 {
			per = n
		}
	}
	if v, ok := o.Val("L"); ok {
		if n, ok := cli.Atoi(v); ok && n > 0 {
			per = n
		}
	}
	if per == 0 {
		per = 1
	}
	if len(items) == 0 {
		note(run(ctx, inv, cmd, stdio))
		return worst
	}
	for i := 0; i < len(items); i += per {
		argv := append(append([]string{}, cmd...), items[i:min(i+per, len(items))]...)
		if !note(run(ctx, inv, argv, stdio)) {
			break
		}
	}
	return worst
}

// sh is sh/bash/dash: `-c script [name [args…]]`, a script file, or a script on stdin.
func sh(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	var setOpts []string
	command := false
	for len(args) > 0 && (strings.HasPrefix(args[0], "-") || strings.HasPrefix(args[0], "+")) && args[0] != "-" {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		if a == "-o" || a == "+o" {
			if len(args) > 0 {
				setOpts = append(setOpts, a+" "+args[0])
				args = args[1:]
			}
			continue
		}
		if strings.HasPrefix(a, "--") {
			continue // --login, --norc, --noprofile
		}
		for _, c := range a[1:] {
			switch c {
			case 'c':
				command = true
			case 'l', 'i', 's':
			default:
				setOpts = append(setOpts, string(a[0])+string(c))
			}
		}
	}
	prefix := ""
	if len(setOpts) > 0 {
		prefix = "set " + strings.Join(setOpts, " ") + "\n"
	}
	stdio := shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr}
	arg0 := inv.Name()
	if !command && len(args) > 0 && args[0] != "-" {
		arg0 = args[0]
	}
	ctx = shell.WithInterpreter(ctx, inv.Name(), arg0)
	if command {
		if len(args) == 0 {
			fmt.Fprintf(inv.Stderr, "%s: -c: option requires an argument\n", inv.Name())
			return 2
		}
		params := []string{inv.Name()}
		if len(args) > 1 {
			params = args[1:]
		}
		return inv.RunScript(ctx, prefix+args[0], params, stdio)
	}
	if len(args) > 0 && args[0] != "-" {
		data, err := inv.FS().ReadFile(inv.Abs(args[0]))
		if err != nil {
			fmt.Fprintf(inv.Stderr, "%s: %s: %s\n", inv.Name(), args[0], sandbox.Describe(err))
			return 127
		}
		return inv.RunScript(ctx, prefix+string(data), args, stdio)
	}
	// A script on stdin runs line by line as it arrives, as sh does: a client may keep the
	// shell open and feed it one command at a time.
	in := inv.Stdin
	if prefix != "" {
		in = io.MultiReader(strings.NewReader(prefix), in)
	}
	return inv.RunInteractive(ctx, in, []string{inv.Name()}, stdio)
}

func timeout(ctx context.Context, inv *shell.Invocation) int {
	o, err := cli.Parse(inv.Args[1:], "sk", []string{"signal", "kill-after"}, true)
	if err != nil {
		return cli.Usage(inv, err, 125)
	}
	if len(o.Args) < 2 {
		return cli.Usage(inv, errors.New("missing operand"), 125)
	}
	d, ok := parseDuration(o.Args[0])
	if !ok {
		return cli.Usage(inv, fmt.Errorf("invalid time interval '%s'", o.Args[0]), 125)
	}
	cctx := ctx
	var cancel context.CancelFunc
	if d > 0 {
		cctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	code := run(cctx, inv, o.Args[1:], shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr})
	if ctx.Err() == nil && cctx.Err() != nil {
		if o.Has("preserve-status") {
			return 143
		}
		return 124
	}
	return code
}

func which(_ context.Context, inv *shell.Invocation) int {
	code := 0
	for _, a := range inv.Args[1:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		p, ok := inv.Shell.Lookup(a, inv.Env, inv.Dir)
		if !ok || !strings.Contains(p, "/") {
			code = 1
			continue
		}
		fmt.Fprintln(inv.Stdout, p)
	}
	return code
}

// sudo runs the command as is: every session of the lab already is root.
func sudo(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		if a == "-u" || a == "-g" || a == "-C" || a == "-D" {
			if len(args) > 0 {
				args = args[1:]
			}
		}
	}
	if len(args) == 0 {
		fmt.Fprintln(inv.Stderr, "usage: sudo -h | -K | -k | -V")
		return 1
	}
	return run(ctx, inv, args, shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr})
}

func passthrough(ctx context.Context, inv *shell.Invocation) int {
	if len(inv.Args) < 2 {
		return cli.Usage(inv, errors.New("missing operand"), 125)
	}
	return run(ctx, inv, inv.Args[1:], shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr})
}

func nice(ctx context.Context, inv *shell.Invocation) int {
	args := inv.Args[1:]
	if len(args) > 0 && args[0] == "-n" {
		args = args[min(2, len(args)):]
	} else if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		args = args[1:]
	}
	if len(args) == 0 {
		fmt.Fprintln(inv.Stdout, "0")
		return 0
	}
	return run(ctx, inv, args, shell.Stdio{Stdin: inv.Stdin, Stdout: inv.Stdout, Stderr: inv.Stderr})
}

func envFromPairs(pairs []string) expand.Environ { return expand.ListEnviron(pairs...) }

// run executes argv for a program that runs another command (env, timeout, nohup, nice,
// xargs, sudo); a command that does not exist is reported in that program's words, as
// coreutils, findutils and sudo do, since no shell is there to say "command not found".
func run(ctx context.Context, inv *shell.Invocation, argv []string, stdio shell.Stdio) int {
	if len(argv) > 0 {
		if _, ok := inv.Shell.Lookup(argv[0], inv.Env, inv.Dir); !ok {
			name := argv[0]
			switch inv.Name() {
			case "env":
				fmt.Fprintf(inv.Stderr, "env: '%s': No such file or directory\n", name)
			case "timeout", "nohup":
				fmt.Fprintf(inv.Stderr, "%s: failed to run command '%s': No such file or directory\n", inv.Name(), name)
			case "nice":
				fmt.Fprintf(inv.Stderr, "nice: '%s': No such file or directory\n", name)
			case "xargs":
				fmt.Fprintf(inv.Stderr, "xargs: %s: No such file or directory\n", name)
			case "sudo":
				fmt.Fprintf(inv.Stderr, "sudo: %s: command not found\n", name)
				return 1
			default:
				return inv.Exec(ctx, argv, stdio)
			}
			return 127
		}
	}
	return inv.Exec(ctx, argv, stdio)
}

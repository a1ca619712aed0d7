package wrappers

import (
	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"regexp"
	"strconv"
	"strings"
)

// The unwrap functions of wrapperTable that need more than an option spec.

// timeCmd: time [-p] [-f FMT] [-o FILE] [-a] [-v] [-q] command… (time(1),
// GNU time); -o writes its report to a file.
func timeCmd(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	opts, rest, unknown := timeOpts.scan(args)
	n := unknownOption(f, name, unknown)
	if shellword.HasOption(opts, "-o", "--output") {
		n = n.Child("")
		n.AtLeast(ruleset.ConfigMutation, "time -o writes its report to a file")
	}
	inner(c, name, args[rest:], text, n, in, "")
}

var timeOpts = optSpec{flags: "apvqV", values: "fo", long: []string{"--append", "--portability", "--verbose", "--quiet"},
	longValues: []string{"--format", "--output"}}

// watch [options] command: without -x the command is joined and run by sh -c
// (watch(1), procps-ng).
func watch(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, _ walk.Stdin) {
	opts, rest, unknown := watchOpts.scan(args)
	f = unknownOption(f, name, unknown)
	switch {
	case rest >= len(args):
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly, Reason: "watch without a command runs nothing"})
	case shellword.HasOption(opts, "-x", "--exec"):
		inner(c, name, args[rest:], text, f, walk.Stdin{}, "")
	default:
		c.NestedCode(shellword.JoinWords(args[rest:]), f, walk.Stdin{}, "watch")
	}
}

var watchOpts = optSpec{flags: "bcCefgprtwx", values: "nqs", optional: "d",
	long: []string{"--beep", "--color", "--no-color", "--errexit", "--chgexit", "--precise", "--no-rerun", "--no-title", "--no-wrap",
		"--exec", "--differences", "--no-linewrap"}, longValues: []string{"--interval", "--equexit", "--shotsdir"}}

// sg GROUP [-c] COMMAND (sg(1)): the command is a string run by /bin/sh.
func sg(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	rest := args
	if len(rest) > 0 && rest[0].Val == "-" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		shellStdin(c, name, text, f.Child(name), in)
		return
	}
	rest = rest[1:] // the group
	if len(rest) > 0 && rest[0].Val == "-c" && !rest[0].Dyn {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		shellStdin(c, name, text, f.Child(name), in)
		return
	}
	c.NestedCode(shellword.JoinWords(rest), f, in, name+" -c")
}

// source FILE / . FILE runs a script in this shell.
func source(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	if len(args) == 0 {
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
			Reason: name + " without a file fails or runs unknown code"})
		return
	}
	script(c, name, args[0], text, f, in)
}

// lxcAttach: lxc-attach -n NAME [options] [-- COMMAND…] (lxc-attach(1));
// without a command it starts a shell in the container.
func lxcAttach(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	for i, a := range args {
		if a.Val == "--" && !a.Dyn {
			transport(c, name, name, args[i+1:], text, f, in)
			return
		}
	}
	_, rest := shellword.ScanOpts(args, "nfPasvugLlo", []string{"--name", "--rcfile", "--lxcpath", "--arch",
		"--namespaces", "--set-var", "--keep-var", "--uid", "--gid", "--pty-log",
		"--logfile", "--logpriority", "--context"})
	if rest < len(args) {
		transport(c, name, name, args[rest:], text, f, in)
		return
	}
	shellStdin(c, name, text, f.WithVia(name), in)
}

// at / batch schedule the commands on their standard input (at(1)).
func at(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	opts, _ := shellword.ScanOpts(args, "qfMmt", nil)
	switch {
	case shellword.HasOption(opts, "-l", "-c"):
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly, Reason: name + " -l/-c only lists jobs"})
	case shellword.HasOption(opts, "-f"):
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
			Reason: name + " schedules a script file whose contents are not known"})
	default:
		n := f.Child("")
		n.AtLeast(ruleset.ConfigMutation, name+" schedules a job")
		shellStdin(c, name, text, n, in)
	}
}

// systemdRunOpts are systemd-run's options (systemd-run(1)).
var systemdRunOpts = optSpec{flags: "rtPSqGdh", values: "upEHMs",
	long: []string{"--user", "--system", "--scope", "--remain-after-exit", "--send-sighup", "--pty", "--pipe", "--shell", "--quiet",
		"--verbose", "--collect", "--wait", "--no-block", "--no-ask-password", "--same-dir", "--expand-environment", "--ignore-failure",
		"--json"},
	longValues: []string{"--unit", "--property", "--description", "--slice", "--slice-inherit", "--uid", "--gid", "--nice",
		"--working-directory", "--setenv", "--host", "--machine", "--service-type", "--on-active", "--on-boot", "--on-startup",
		"--on-unit-active", "--on-unit-inactive", "--on-calendar", "--on-clock-change", "--on-timezone-change", "--timer-property",
		"--path-property", "--socket-property", "--background"}}

// systemdRun: systemd-run [options] COMMAND… runs the command as a transient
// unit: as that command, scheduled for later with a timer option (at least
// config_mutation), on another machine with -H/--host or -M/--machine.
func systemdRun(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	opts, rest, unknown := systemdRunOpts.scan(args)
	n := unknownOption(f, name, unknown)
	for _, o := range opts {
		if strings.HasPrefix(o.Name, "--on-") || o.Name == "--timer-property" || o.Name == "--path-property" || o.Name == "--socket-property" {
			n = n.Child("")
			n.AtLeast(ruleset.ConfigMutation, "systemd-run "+o.Name+" installs a timer, path or socket unit that runs the command later")
			break
		}
	}
	if o, ok := shellword.OptionValue(opts, "-H", "--host", "-M", "--machine"); ok {
		via := "systemd-run " + o.Name + " " + o.Value
		c.Add(n, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly,
			Reason: name + " only carries the command; what it runs is classified on its own (via " + via + ")"})
		if rest < len(args) {
			c.Command(args[rest:], text, n.WithVia(via), in)
		}
		return
	}
	if rest >= len(args) && shellword.HasOption(opts, "-S", "--shell") {
		shellStdin(c, name, text, n.Child(name), in)
		return
	}
	inner(c, name, args[rest:], text, n, in, "systemd-run without a command fails")
}

// kubectlExec: kubectl [global options] exec [options] POD [-c CONTAINER]
// -- COMMAND… (kubectl exec reference; without `--` the first word after the
// pod is the command, the deprecated form).
func kubectlExec(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	g := c.Rules().Grammars[name]
	idx := -1
	for i, a := range args {
		if a.Dyn {
			return false
		}
		if strings.HasPrefix(a.Val, "-") || isOptionValue(args, i, g) {
			continue
		}
		if a.Val == "exec" {
			idx = i
		}
		break
	}
	if idx < 0 {
		return false
	}
	var pod string
	var cmd []shellword.Word
	rest := args[idx+1:]
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		switch {
		case w.Val == "--" && !w.Dyn:
			cmd = rest[i+1:]
			i = len(rest)
		case strings.HasPrefix(w.Val, "-"):
			if !strings.Contains(w.Val, "=") && kubectlExecValues[w.Val] && i+1 < len(rest) {
				i++
			}
		case pod == "":
			pod = w.Val
		default:
			cmd = rest[i:]
			i = len(rest)
		}
	}
	if pod == "" {
		return false
	}
	transport(c, name, "kubectl exec "+pod, cmd, text, f, in)
	return true
}

// kubectlExecValues are kubectl's options that take the next word as their
// value, global and of exec.
var kubectlExecValues = map[string]bool{"-c": true, "--container": true, "-f": true, "--filename": true, "-n": true,
	"--namespace": true, "--context": true, "--kubeconfig": true, "--cluster": true, "--user": true, "-s": true, "--server": true,
	"--pod-running-timeout": true, "--as": true, "--as-group": true, "--token": true, "--request-timeout": true}

// lxdExec: lxc exec [REMOTE:]INSTANCE [options] -- COMMAND… (LXD's and
// Incus's exec).
func lxdExec(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	if len(args) < 2 || args[0].Dyn || args[0].Val != "exec" {
		return false
	}
	inst := args[1].Val
	cmd := args[2:]
	for i := 0; i < len(cmd); i++ {
		w := cmd[i]
		if w.Val == "--" && !w.Dyn {
			cmd = cmd[i+1:]
			break
		}
		if !strings.HasPrefix(w.Val, "-") {
			cmd = cmd[i:]
			break
		}
		switch w.Val {
		case "--env", "--mode", "--cwd", "--user", "--group", "--project":
			i++
		}
		if i >= len(cmd)-1 {
			cmd = nil
		}
	}
	transport(c, name, name+" exec "+inst, cmd, text, f, in)
	return true
}

// pveshExecPath is the guest-agent exec endpoint of the Proxmox API
// (/nodes/{node}/qemu/{vmid}/agent/exec): whatever verb pvesh is given, a call
// to it runs its `command` in the guest. exec-status only reads a result.
var pveshExecPath = regexp.MustCompile(`^/*nodes/+[^/]+/+qemu/+([^/]+)/+agent/+exec/*$`)

// pveshExec unwraps pvesh VERB /nodes/N/qemu/ID/agent/exec --command …: the
// command is an array (one --command per element) or, from older releases, a
// string the agent splits into words.
func pveshExec(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	if len(args) < 2 || args[0].Dyn || args[0].Val == "usage" || args[0].Val == "help" {
		return false
	}
	m := pveshExecPath.FindStringSubmatch(args[1].Val)
	if m == nil || args[1].Dyn {
		return false
	}
	var argv []shellword.Word
	for i := 2; i < len(args); i++ {
		v := args[i].Val
		if v == "--command" || v == "-command" {
			if i+1 < len(args) {
				i++
				argv = append(argv, args[i])
			}
			continue
		}
		if after, ok := strings.CutPrefix(v, "--command="); ok {
			argv = append(argv, shellword.Word{Val: after, Dyn: args[i].Dyn})
		}
	}
	via := "pvesh agent exec " + m[1]
	if len(argv) == 1 && strings.ContainsAny(argv[0].Val, " \t") {
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly,
			Reason: name + " only carries the command; what it runs is classified on its own (via " + via + ")"})
		c.NestedCode(argv[0], f.WithVia(via), walk.Stdin{}, "")
		return true
	}
	if len(argv) == 0 {
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
			Reason: name + " calls the guest agent's exec endpoint with no command the classifier can read"})
		return true
	}
	transport(c, name, via, argv, text, f, walk.Stdin{})
	return true
}

// interpreters are the programs whose -c/-e/-r code the classifier reads
// for the shell commands it starts.
var interpreters = []string{"python", "python2", "python3", "perl", "ruby", "node", "nodejs", "php", "lua", "luajit"}

// interpreterCodeFlags are the options that hand an interpreter its code.
var interpreterCodeFlags = map[string]bool{"-c": true, "-e": true, "-E": true, "-r": true, "--eval": true, "-p": true, "--print": true}

// interpreter: python3 -c CODE, perl -e CODE, node -e CODE … The interpreter
// itself is classified by the rules (unknown code is config_mutation; visible
// deletions destructive); the shell commands its code starts — os.system,
// subprocess, system, exec, backticks, child_process — are classified as
// the commands they are, so wrapping a destructive command in an
// interpreter never hides it.
func interpreter(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	var code *shellword.Word
	for i := 0; i < len(args) && code == nil; i++ {
		a := args[i]
		if a.Dyn || !strings.HasPrefix(a.Val, "-") {
			break
		}
		switch {
		case interpreterCodeFlags[a.Val] && i+1 < len(args):
			code = &args[i+1]
		case len(a.Val) > 2 && a.Val[1] != '-' && interpreterCodeFlags[a.Val[:2]]:
			code = &shellword.Word{Val: a.Val[2:], Dyn: a.Dyn}
		case len(a.Val) > 2 && a.Val[1] != '-' && strings.ContainsAny(a.Val[len(a.Val)-1:], "ce") && i+1 < len(args):
			code = &args[i+1] // a cluster such as perl -ne, python3 -Ic
		}
	}
	if code == nil {
		return false
	}
	mark := c.Mark()
	c.ApplyRules(name, name, args, text, f, true, in)
	if segs := c.Since(mark); len(segs) > 0 && segs[0].Class == ruleset.ConfigMutation && segs[0].Rule == "" {
		segs[0].Why = "wrapper: " + name + " runs code the classifier cannot read, so it needs an operator"
	}
	n := f.Child(name + " " + "code")
	n.AtLeast(ruleset.ConfigMutation, name+" runs code the classifier cannot read")
	for _, cmd := range shellCalls(code.Val) {
		if cmd.code {
			c.NestedCode(shellword.Word{Val: cmd.argv[0], Dyn: code.Dyn}, n, walk.Stdin{}, "")
			continue
		}
		argv := make([]shellword.Word, len(cmd.argv))
		for i, a := range cmd.argv {
			argv[i] = shellword.Word{Val: a, Dyn: code.Dyn}
		}
		c.Command(argv, text, n, walk.Stdin{})
	}
	return true
}

// shellCall is one command an interpreter's code starts: a string a shell
// runs (code), or an argument vector.
type shellCall struct {
	argv []string
	code bool
}

// callRE finds the calls that start a process in Python, Perl, Ruby, PHP,
// Node and Lua, up to their opening parenthesis; backtickRE finds Perl's,
// Ruby's and PHP's backticks and qx/%x quoting.
var (
	callRE     = regexp.MustCompile(`\b(?:os\.system|os\.popen|os\.exec[lv]p?e?|os\.spawn[lv]p?e?|subprocess\.(?:run|call|check_call|check_output|Popen|getoutput|getstatusoutput)|commands\.getoutput|pty\.spawn|system|exec|execSync|execFileSync|execFile|spawn|spawnSync|shell_exec|passthru|popen|proc_open|io\.popen|os\.execute|IO\.popen|Open3\.\w+|Process\.spawn|Kernel\.(?:system|exec|spawn))\b\s*\(?\s*`)
	backtickRE = regexp.MustCompile("`([^`]*)`|\\bqx\\s*[({\\[/]([^)}\\]/]*)|%x\\s*[({\\[]([^)}\\]]*)")
)

// shellCalls extracts the literal commands in code: the string or list of
// strings each process-starting call is given.
func shellCalls(code string) []shellCall {
	var out []shellCall
	for _, loc := range callRE.FindAllStringIndex(code, walk.MaxArgScans) {
		strs := leadingStrings(code[loc[1]:])
		switch {
		case len(strs) == 0:
		case len(strs) == 1 && !strings.HasPrefix(strings.TrimSpace(code[loc[1]:]), "["):
			out = append(out, shellCall{argv: strs, code: true})
		default:
			out = append(out, shellCall{argv: strs})
		}
	}
	for _, m := range backtickRE.FindAllStringSubmatch(code, walk.MaxArgScans) {
		for _, g := range m[1:] {
			if strings.TrimSpace(g) != "" {
				out = append(out, shellCall{argv: []string{g}, code: true})
			}
		}
	}
	return out
}

// leadingStrings reads the string literals at the start of s — "a", 'b',
// ["c", "d"] — separated by commas, and stops at anything else.
func leadingStrings(s string) []string {
	var out []string
	i := 0
	for i < len(s) {
		switch ch := s[i]; ch {
		case ' ', '\t', '\n', ',', '[', '(':
			i++
		case '"', '\'':
			j := i + 1
			var b strings.Builder
			for j < len(s) && s[j] != ch {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					if s[j] == 'u' && ch == '"' && j+4 < len(s) {
						if n, err := strconv.ParseUint(s[j+1:j+5], 16, 32); err == nil {
							b.WriteRune(rune(n))
							j += 5
							continue
						}
					}
					if e, ok := stringEscapes[s[j]]; ok && ch == '"' {
						b.WriteByte(e)
						j++
						continue
					}
				}
				b.WriteByte(s[j])
				j++
			}
			if j >= len(s) {
				return out
			}
			out = append(out, b.String())
			i = j + 1
		default:
			return out
		}
	}
	return out
}

// stringEscapes are the escapes a double-quoted string literal shares in the
// interpreters' languages.
var stringEscapes = map[byte]byte{'n': '\n', 't': '\t', 'r': '\r', '0': 0}

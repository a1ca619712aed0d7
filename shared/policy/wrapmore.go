package policy

import (
	"regexp"
	"strconv"
	"strings"
)

// The unwrap functions of wrapperTable that need more than an option spec.

// timeCmd: time [-p] [-f FMT] [-o FILE] [-a] [-v] [-q] command… (time(1),
// GNU time); -o writes its report to a file.
func (c *classifier) timeCmd(name string, args []word, text string, f *frame, in stdin) {
	opts, rest, unknown := timeOpts.scan(args)
	n := unknownOption(f, name, unknown)
	if hasOption(opts, "-o", "--output") {
		n = n.child("")
		n.atLeast(ConfigMutation, "time -o writes its report to a file")
	}
	c.inner(name, args[rest:], text, n, in, "")
}

var timeOpts = optSpec{flags: "apvqV", values: "fo", long: []string{"--append", "--portability", "--verbose", "--quiet"},
	longValues: []string{"--format", "--output"}}

// watch [options] command: without -x the command is joined and run by sh -c
// (watch(1), procps-ng).
func (c *classifier) watch(name string, args []word, text string, f *frame, _ stdin) {
	opts, rest, unknown := watchOpts.scan(args)
	f = unknownOption(f, name, unknown)
	switch {
	case rest >= len(args):
		c.add(f, Segment{Command: text, Program: name, Class: ReadOnly, Reason: "watch without a command runs nothing"})
	case hasOption(opts, "-x", "--exec"):
		c.inner(name, args[rest:], text, f, stdin{}, "")
	default:
		c.nestedCode(joinWords(args[rest:]), f, stdin{}, "watch")
	}
}

var watchOpts = optSpec{flags: "bcCefgprtwx", values: "nqs", optional: "d",
	long: []string{"--beep", "--color", "--no-color", "--errexit", "--chgexit", "--precise", "--no-rerun", "--no-title", "--no-wrap",
		"--exec", "--differences", "--no-linewrap"}, longValues: []string{"--interval", "--equexit", "--shotsdir"}}

// sg GROUP [-c] COMMAND (sg(1)): the command is a string run by /bin/sh.
func (c *classifier) sg(name string, args []word, text string, f *frame, in stdin) {
	rest := args
	if len(rest) > 0 && rest[0].val == "-" {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		c.shellStdin(name, text, f.child(name), in)
		return
	}
	rest = rest[1:] // the group
	if len(rest) > 0 && rest[0].val == "-c" && !rest[0].dyn {
		rest = rest[1:]
	}
	if len(rest) == 0 {
		c.shellStdin(name, text, f.child(name), in)
		return
	}
	c.nestedCode(joinWords(rest), f, in, name+" -c")
}

// source FILE / . FILE runs a script in this shell.
func (c *classifier) source(name string, args []word, text string, f *frame, in stdin) {
	if len(args) == 0 {
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
			Reason: name + " without a file fails or runs unknown code"})
		return
	}
	c.script(name, args[0], text, f, in)
}

// lxcAttach: lxc-attach -n NAME [options] [-- COMMAND…] (lxc-attach(1));
// without a command it starts a shell in the container.
func (c *classifier) lxcAttach(name string, args []word, text string, f *frame, in stdin) {
	for i, a := range args {
		if a.val == "--" && !a.dyn {
			c.transport(name, name, args[i+1:], text, f, in)
			return
		}
	}
	_, rest := scanOpts(args, "nfPasvugLlo", []string{"--name", "--rcfile", "--lxcpath", "--arch",
		"--namespaces", "--set-var", "--keep-var", "--uid", "--gid", "--pty-log",
		"--logfile", "--logpriority", "--context"})
	if rest < len(args) {
		c.transport(name, name, args[rest:], text, f, in)
		return
	}
	c.shellStdin(name, text, f.withVia(name), in)
}

// at / batch schedule the commands on their standard input (at(1)).
func (c *classifier) at(name string, args []word, text string, f *frame, in stdin) {
	opts, _ := scanOpts(args, "qfMmt", nil)
	switch {
	case hasOption(opts, "-l", "-c"):
		c.add(f, Segment{Command: text, Program: name, Class: ReadOnly, Reason: name + " -l/-c only lists jobs"})
	case hasOption(opts, "-f"):
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
			Reason: name + " schedules a script file whose contents are not known"})
	default:
		n := f.child("")
		n.atLeast(ConfigMutation, name+" schedules a job")
		c.shellStdin(name, text, n, in)
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
func (c *classifier) systemdRun(name string, args []word, text string, f *frame, in stdin) {
	opts, rest, unknown := systemdRunOpts.scan(args)
	n := unknownOption(f, name, unknown)
	for _, o := range opts {
		if strings.HasPrefix(o.name, "--on-") || o.name == "--timer-property" || o.name == "--path-property" || o.name == "--socket-property" {
			n = n.child("")
			n.atLeast(ConfigMutation, "systemd-run "+o.name+" installs a timer, path or socket unit that runs the command later")
			break
		}
	}
	if o, ok := optionValue(opts, "-H", "--host", "-M", "--machine"); ok {
		via := "systemd-run " + o.name + " " + o.value
		c.add(n, Segment{Command: text, Program: name, Class: ReadOnly,
			Reason: name + " only carries the command; what it runs is classified on its own (via " + via + ")"})
		if rest < len(args) {
			c.command(args[rest:], text, n.withVia(via), in)
		}
		return
	}
	if rest >= len(args) && hasOption(opts, "-S", "--shell") {
		c.shellStdin(name, text, n.child(name), in)
		return
	}
	c.inner(name, args[rest:], text, n, in, "systemd-run without a command fails")
}

// kubectlExec: kubectl [global options] exec [options] POD [-c CONTAINER]
// -- COMMAND… (kubectl exec reference; without `--` the first word after the
// pod is the command, the deprecated form).
func (c *classifier) kubectlExec(name string, args []word, text string, f *frame, in stdin) bool {
	g := c.p.grammars[name]
	idx := -1
	for i, a := range args {
		if a.dyn {
			return false
		}
		if strings.HasPrefix(a.val, "-") || isOptionValue(args, i, g) {
			continue
		}
		if a.val == "exec" {
			idx = i
		}
		break
	}
	if idx < 0 {
		return false
	}
	var pod string
	var cmd []word
	rest := args[idx+1:]
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		switch {
		case w.val == "--" && !w.dyn:
			cmd = rest[i+1:]
			i = len(rest)
		case strings.HasPrefix(w.val, "-"):
			if !strings.Contains(w.val, "=") && kubectlExecValues[w.val] && i+1 < len(rest) {
				i++
			}
		case pod == "":
			pod = w.val
		default:
			cmd = rest[i:]
			i = len(rest)
		}
	}
	if pod == "" {
		return false
	}
	c.transport(name, "kubectl exec "+pod, cmd, text, f, in)
	return true
}

// kubectlExecValues are kubectl's options that take the next word as their
// value, global and of exec.
var kubectlExecValues = map[string]bool{"-c": true, "--container": true, "-f": true, "--filename": true, "-n": true,
	"--namespace": true, "--context": true, "--kubeconfig": true, "--cluster": true, "--user": true, "-s": true, "--server": true,
	"--pod-running-timeout": true, "--as": true, "--as-group": true, "--token": true, "--request-timeout": true}

// lxdExec: lxc exec [REMOTE:]INSTANCE [options] -- COMMAND… (LXD's and
// Incus's exec).
func (c *classifier) lxdExec(name string, args []word, text string, f *frame, in stdin) bool {
	if len(args) < 2 || args[0].dyn || args[0].val != "exec" {
		return false
	}
	inst := args[1].val
	cmd := args[2:]
	for i := 0; i < len(cmd); i++ {
		w := cmd[i]
		if w.val == "--" && !w.dyn {
			cmd = cmd[i+1:]
			break
		}
		if !strings.HasPrefix(w.val, "-") {
			cmd = cmd[i:]
			break
		}
		switch w.val {
		case "--env", "--mode", "--cwd", "--user", "--group", "--project":
			i++
		}
		if i >= len(cmd)-1 {
			cmd = nil
		}
	}
	c.transport(name, name+" exec "+inst, cmd, text, f, in)
	return true
}

// pveshExecPath is the guest-agent exec endpoint of the Proxmox API
// (/nodes/{node}/qemu/{vmid}/agent/exec): whatever verb pvesh is given, a call
// to it runs its `command` in the guest. exec-status only reads a result.
var pveshExecPath = regexp.MustCompile(`^/*nodes/+[^/]+/+qemu/+([^/]+)/+agent/+exec/*$`)

// pveshExec unwraps pvesh VERB /nodes/N/qemu/ID/agent/exec --command …: the
// command is an array (one --command per element) or, from older releases, a
// string the agent splits into words.
func (c *classifier) pveshExec(name string, args []word, text string, f *frame, in stdin) bool {
	if len(args) < 2 || args[0].dyn || args[0].val == "usage" || args[0].val == "help" {
		return false
	}
	m := pveshExecPath.FindStringSubmatch(args[1].val)
	if m == nil || args[1].dyn {
		return false
	}
	var argv []word
	for i := 2; i < len(args); i++ {
		v := args[i].val
		if v == "--command" || v == "-command" {
			if i+1 < len(args) {
				i++
				argv = append(argv, args[i])
			}
			continue
		}
		if after, ok := strings.CutPrefix(v, "--command="); ok {
			argv = append(argv, word{val: after, dyn: args[i].dyn})
		}
	}
	via := "pvesh agent exec " + m[1]
	if len(argv) == 1 && strings.ContainsAny(argv[0].val, " \t") {
		c.add(f, Segment{Command: text, Program: name, Class: ReadOnly,
			Reason: name + " only carries the command; what it runs is classified on its own (via " + via + ")"})
		c.nestedCode(argv[0], f.withVia(via), stdin{}, "")
		return true
	}
	if len(argv) == 0 {
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
			Reason: name + " calls the guest agent's exec endpoint with no command the classifier can read"})
		return true
	}
	c.transport(name, via, argv, text, f, stdin{})
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
func (c *classifier) interpreter(name string, args []word, text string, f *frame, in stdin) bool {
	var code *word
	for i := 0; i < len(args) && code == nil; i++ {
		a := args[i]
		if a.dyn || !strings.HasPrefix(a.val, "-") {
			break
		}
		switch {
		case interpreterCodeFlags[a.val] && i+1 < len(args):
			code = &args[i+1]
		case len(a.val) > 2 && a.val[1] != '-' && interpreterCodeFlags[a.val[:2]]:
			code = &word{val: a.val[2:], dyn: a.dyn}
		case len(a.val) > 2 && a.val[1] != '-' && strings.ContainsAny(a.val[len(a.val)-1:], "ce") && i+1 < len(args):
			code = &args[i+1] // a cluster such as perl -ne, python3 -Ic
		}
	}
	if code == nil {
		return false
	}
	mark := len(c.segs)
	c.rules(name, name, args, text, f, true, in)
	if mark < len(c.segs) && c.segs[mark].Class == ConfigMutation && c.segs[mark].Rule == "" {
		c.segs[mark].Why = "wrapper: " + name + " runs code the classifier cannot read, so it needs an operator"
	}
	n := f.child(name + " " + "code")
	n.atLeast(ConfigMutation, name+" runs code the classifier cannot read")
	for _, cmd := range shellCalls(code.val) {
		if cmd.code {
			c.nestedCode(word{val: cmd.argv[0], dyn: code.dyn}, n, stdin{}, "")
			continue
		}
		argv := make([]word, len(cmd.argv))
		for i, a := range cmd.argv {
			argv[i] = word{val: a, dyn: code.dyn}
		}
		c.command(argv, text, n, stdin{})
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
	for _, loc := range callRE.FindAllStringIndex(code, maxArgScans) {
		strs := leadingStrings(code[loc[1]:])
		switch {
		case len(strs) == 0:
		case len(strs) == 1 && !strings.HasPrefix(strings.TrimSpace(code[loc[1]:]), "["):
			out = append(out, shellCall{argv: strs, code: true})
		default:
			out = append(out, shellCall{argv: strs})
		}
	}
	for _, m := range backtickRE.FindAllStringSubmatch(code, maxArgScans) {
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

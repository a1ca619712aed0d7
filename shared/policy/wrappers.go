package policy

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// isShell reports whether name is a shell that runs code given with -c, a
// script file or its stdin. Code for any of them is parsed as bash, which
// accepts the others' code or fails to parse it (and then fails closed).
func isShell(name string) bool {
	switch name {
	case "sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "rbash", "fish":
		return true
	}
	return false
}

// inner classifies the command a local wrapper runs. With no command left,
// the wrapper itself runs nothing of note: idle explains why.
func (c *classifier) inner(wrapper string, argv []word, text string, f *frame, in stdin, idle string) {
	if len(argv) == 0 {
		if idle == "" {
			idle = wrapper + " without a command runs nothing"
		}
		c.add(f, Segment{Command: text, Program: wrapper, Class: ReadOnly, Reason: idle})
		return
	}
	c.command(argv, text, f.child(wrapper), in)
}

func (c *classifier) sudo(name string, args []word, text string, f *frame, in stdin) {
	spec := &sudoOpts
	if name == "doas" {
		spec = &doasOpts
	}
	opts, rest, unknown := spec.scan(args)
	if hasOption(opts, "-e", "--edit") {
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation, Reason: name + " -e edits files"})
		return
	}
	f = unknownOption(f, name, unknown)
	// sudo accepts VAR=value before the command.
	for rest < len(args) && isAssignment(args[rest]) {
		c.assignedWord(args[rest], text, f)
		rest++
	}
	if rest >= len(args) && hasOption(opts, "-i", "-s", "--login", "--shell") {
		c.shellStdin(name, text, f.child(name), in)
		return
	}
	c.inner(name, args[rest:], text, f, in, name+" without a command only lists or validates credentials")
}

// doasOpts are doas's options (doas(1)): -s runs a shell.
var doasOpts = optSpec{flags: "Lns", values: "Cu"}

// assignedWord classifies a NAME=value argument of env or sudo like a shell
// assignment.
func (c *classifier) assignedWord(w word, text string, f *frame) {
	name, val, _ := strings.Cut(w.val, "=")
	c.assignment(name, word{val: val, dyn: w.dyn}, text, f)
}

// envOpts are env's options (env(1), GNU coreutils; -P is BSD's).
var envOpts = optSpec{flags: "0iv", values: "uCSP",
	long:       []string{"--ignore-environment", "--null", "--debug", "--list-signal-handling", "--block-signal", "--default-signal", "--ignore-signal"},
	longValues: []string{"--unset", "--chdir", "--split-string"}}

func (c *classifier) env(name string, args []word, text string, f *frame, in stdin) {
	opts, rest, unknown := envOpts.scan(args)
	f = unknownOption(f, name, unknown)
	for rest < len(args) && isAssignment(args[rest]) {
		c.assignedWord(args[rest], text, f)
		rest++
	}
	if o, ok := optionValue(opts, "-S", "--split-string"); ok {
		// env -S splits its value into words and runs them: treat it as code.
		code := word{val: o.value, dyn: o.valueDyn}
		if rest < len(args) {
			tail := joinWords(args[rest:])
			code.val += " " + tail.val
			code.dyn = code.dyn || tail.dyn
		}
		c.nestedCode(code, f, in, "env -S")
		return
	}
	c.inner("env", args[rest:], text, f, in, "env without a command prints the environment")
}

// xargsOpts scans xargs's options. -a -d -E -I -L -n -P -s take a value
// (attached or the next word); -e, -i and -l take one only attached (GNU
// getopt "e::i::l::"), so in `xargs -l rm -rf /` the command is rm. Long
// options take a value after "=", and the required ones also the next word.
func xargsOpts(args []word) (repl string, rest int) {
	for rest = 0; rest < len(args); rest++ {
		w := args[rest]
		// As in scanOpts, a word only known at run time is an option when
		// its literal text starts with "-" (find -exec xargs -I{} …).
		if len(w.val) < 2 || w.val[0] != '-' {
			return repl, rest
		}
		if w.val == "--" {
			return repl, rest + 1
		}
		if strings.HasPrefix(w.val, "--") {
			name, val, has := strings.Cut(w.val, "=")
			switch {
			case optionMatches(name, "--replace"):
				repl = "{}"
				if has {
					repl = val
				}
			case !has && (optionMatches(name, "--arg-file") || optionMatches(name, "--delimiter") ||
				optionMatches(name, "--max-args") || optionMatches(name, "--max-procs") ||
				optionMatches(name, "--max-chars") || optionMatches(name, "--process-slot-var")):
				rest++
			}
			continue
		}
		for j := 1; j < len(w.val); j++ {
			ch := w.val[j]
			if strings.IndexByte("adEILnPs", ch) >= 0 {
				val := w.val[j+1:]
				if val == "" && rest+1 < len(args) {
					rest++
					val = args[rest].val
				}
				if ch == 'I' {
					repl = val
				}
				break
			}
			if strings.IndexByte("eil", ch) >= 0 {
				if ch == 'i' {
					repl = "{}"
					if j+1 < len(w.val) {
						repl = w.val[j+1:]
					}
				}
				break
			}
		}
	}
	return repl, rest
}

func (c *classifier) xargs(args []word, text string, f *frame, in stdin) {
	repl, rest := xargsOpts(args)
	if rest >= len(args) {
		c.add(f, Segment{Command: text, Program: "xargs", Class: ReadOnly, Reason: "xargs without a command echoes its input"})
		return
	}
	inner := make([]word, 0, len(args)-rest+1)
	for _, w := range args[rest:] {
		if repl != "" && strings.Contains(w.val, repl) {
			w.dyn = true
		}
		inner = append(inner, w)
	}
	if repl == "" {
		// The items read from stdin become further arguments.
		inner = append(inner, word{val: "{input}", dyn: true})
	}
	// With -a the command inherits xargs's standard input; otherwise it
	// reads /dev/null. Handing it on either way can only be more cautious.
	c.command(inner, text, f.child("xargs"), in)
}

func (c *classifier) flock(args []word, text string, f *frame, in stdin) {
	// flock [options] FILE COMMAND… | flock [options] FILE -c CODE | flock [options] FD
	lockSeen := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w.dyn:
			c.command(args[i:], text, f.child("flock"), in)
			return
		case w.val == "-c" || w.val == "--command":
			if i+1 < len(args) {
				c.nestedCode(args[i+1], f, in, "flock -c")
			}
			return
		case strings.HasPrefix(w.val, "--command="):
			c.nestedCode(word{val: strings.TrimPrefix(w.val, "--command=")}, f, in, "flock -c")
			return
		case w.val == "-w" || w.val == "--wait" || w.val == "--timeout" || w.val == "-E" || w.val == "--conflict-exit-code":
			i++
		case w.val == "--":
			if lockSeen {
				c.command(args[i+1:], text, f.child("flock"), in)
				return
			}
		case strings.HasPrefix(w.val, "-") && len(w.val) > 1:
		case !lockSeen:
			lockSeen = true
		default:
			c.command(args[i:], text, f.child("flock"), in)
			return
		}
	}
	c.add(f, Segment{Command: text, Program: "flock", Class: ReadOnly, Reason: "flock without a command only takes a lock"})
}

func (c *classifier) su(name string, args []word, text string, f *frame, in stdin) {
	var code *word
	userMode := false // runuser -u USER [--] COMMAND…
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w.dyn:
		case w.val == "--":
			if userMode {
				c.inner(name, args[i+1:], text, f, in, "")
				return
			}
			i = len(args) // the rest are arguments to the shell
		case strings.HasPrefix(w.val, "--"):
			opt, v, hasV := strings.Cut(w.val, "=")
			switch {
			case optionMatches(opt, "--command") || optionMatches(opt, "--session-command"):
				if !hasV && i+1 < len(args) {
					i++
					v, hasV = args[i].val, true
					if args[i].dyn {
						code = &word{val: v, dyn: true}
						continue
					}
				}
				if hasV {
					code = &word{val: v}
				}
			case optionMatches(opt, "--shell") || optionMatches(opt, "--group") ||
				optionMatches(opt, "--supp-group") || optionMatches(opt, "--whitelist-environment"):
				if !hasV {
					i++
				}
			case name == "runuser" && optionMatches(opt, "--user"):
				if !hasV {
					i++
				}
				userMode = true
			}
		case strings.HasPrefix(w.val, "-") && len(w.val) > 1:
			// A cluster such as -lc CODE, -c'CODE' or -s /bin/sh: a
			// value option takes the rest of the cluster or the next word.
		cluster:
			for j := 1; j < len(w.val); j++ {
				switch ch := w.val[j]; {
				case ch == 'c' || ch == 's' || ch == 'g' || ch == 'G' || ch == 'w' || (name == "runuser" && ch == 'u'):
					var v word
					if j+1 < len(w.val) {
						v = word{val: w.val[j+1:]}
					} else if i+1 < len(args) {
						i++
						v = args[i]
					}
					switch ch {
					case 'c':
						cv := v
						code = &cv
					case 'u':
						userMode = true
					}
					break cluster
				}
			}
		default:
			if userMode {
				c.inner(name, args[i:], text, f, in, "")
				return
			}
			// the user name, or arguments to the shell
		}
	}
	if code != nil {
		c.nestedCode(*code, f, in, name+" -c")
		return
	}
	c.shellStdin(name, text, f.child(name), in)
}

func (c *classifier) trap(args []word, text string, f *frame) {
	opts, rest := scanOpts(args, "", nil)
	rem := args[rest:]
	if hasOption(opts, "-l", "-p", "-P") || len(rem) < 2 || (!rem[0].dyn && (rem[0].val == "-" || rem[0].val == "")) {
		c.add(f, Segment{Command: text, Program: "trap", Class: ReadOnly, Reason: "trap only lists or resets signal handlers"})
		return
	}
	c.evalCode(rem[0], f, stdin{}, "trap")
}

func (c *classifier) alias(args []word, text string, f *frame) {
	defined := false
	for _, a := range args {
		if _, v, ok := strings.Cut(a.val, "="); ok {
			defined = true
			c.evalCode(word{val: v, dyn: a.dyn}, f, stdin{}, "alias")
		}
	}
	if !defined {
		c.add(f, Segment{Command: text, Program: "alias", Class: ReadOnly, Reason: "alias without a definition only lists aliases"})
	}
}

// shell classifies sh/bash/… : code given with -c, a script file, or stdin.
func (c *classifier) shell(name string, args []word, text string, f *frame, in stdin) {
	cmdMode, stdinMode := false, false
	i := 0
options:
	for ; i < len(args); i++ {
		w := args[i]
		switch {
		case w.dyn && cmdMode:
			break options // the code itself
		case w.proc != nil:
			break options // the script is a command's output: bash <(curl …)
		case w.dyn:
			c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
				Reason: name + " options or script only known at run time (unknown code needs approval)"})
			return
		case w.val == "--" || w.val == "-":
			i++
			break options
		case w.val == "--rcfile" || w.val == "--init-file":
			i++
		case strings.HasPrefix(w.val, "--"):
		case len(w.val) > 1 && (w.val[0] == '-' || w.val[0] == '+'):
			for _, ch := range w.val[1:] {
				switch ch {
				case 'c':
					cmdMode = true
				case 's':
					stdinMode = true
				case 'o', 'O':
					i++ // the option name
				}
			}
		default:
			break options
		}
	}
	switch {
	case cmdMode && i < len(args):
		c.nestedCode(args[i], f, in, name+" -c")
	case cmdMode:
		c.add(f, Segment{Command: text, Program: name, Class: ReadOnly, Reason: name + " -c without code runs nothing"})
	case stdinMode || i >= len(args):
		c.shellStdin(name, text, f.child(""), in)
	default:
		c.script(name, args[i], text, f, in)
	}
}

// script classifies a shell (or source/.) running a script file: the output
// of a process substitution (bash <(curl …)) or standard input under another
// name (bash /dev/stdin <<< …) is classified like code on stdin; any other
// file is unknown code.
func (c *classifier) script(name string, file word, text string, f *frame, in stdin) {
	switch {
	case file.proc != nil:
		c.shellStdin(name, text, f.child(""), c.procOutput(file.proc, f))
	case !file.dyn && (file.val == "/dev/stdin" || file.val == "/dev/fd/0" || file.val == "/proc/self/fd/0"):
		c.shellStdin(name, text, f.child(""), in)
	default:
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
			Reason: name + " runs the script file " + file.val + ", whose contents are not known (unknown code needs approval)"})
	}
}

// procOutput describes what a process substitution <(…) produces.
func (c *classifier) procOutput(ps *syntax.ProcSubst, f *frame) stdin {
	if len(ps.Stmts) == 1 {
		return c.pipeSource(ps.Stmts[0], f, stdin{})
	}
	return stdin{kind: stdinOther, producer: "`" + nodeText(f.src, ps) + "`"}
}

// shellStdin classifies a program that runs the code on its stdin.
func (c *classifier) shellStdin(name, text string, f *frame, in stdin) {
	switch in.kind {
	case stdinText:
		c.nestedCode(word{val: in.text, dyn: in.dyn}, f, stdin{}, name+" reading "+in.producer)
	case stdinFetch:
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
			Reason: "fetch-to-exec: " + name + " runs code downloaded by " + in.producer + " (unknown code needs approval)"})
	case stdinOther:
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
			Reason: name + " runs code read from " + in.producer + " (unknown code needs approval)"})
		c.destructiveHint(in.hint, f, name+" reading "+in.producer)
	default:
		c.add(f, Segment{Command: text, Program: name, Class: ConfigMutation,
			Reason: name + " runs commands read from its standard input, which are not known (unknown code needs approval)"})
	}
}

// transport records the transport itself (so the gate sees pct on the target)
// and classifies the argv it runs elsewhere.
func (c *classifier) transport(program, via string, argv []word, text string, f *frame, in stdin) {
	c.add(f, Segment{Command: text, Program: program, Class: ReadOnly,
		Reason: program + " only carries the command; what it runs is classified on its own (via " + via + ")"})
	if len(argv) == 0 {
		return
	}
	c.command(argv, text, f.withVia(via), in)
}

// sshValue lists ssh's options that take a value.
const sshValue = "BbcDEeFIiJLlmOoPpQRSWw"

// sshSafeOptions are the -o options that change nothing on the local machine
// and run nothing (lower case). Any other -o is at least config_mutation:
// ProxyCommand, LocalCommand and KnownHostsCommand run local commands,
// PKCS11Provider and SecurityKeyProvider load libraries, UserKnownHostsFile,
// ControlPath and UpdateHostKeys write files, forwardings open tunnels.
var sshSafeOptions = map[string]bool{
	"port": true, "user": true, "hostname": true, "connecttimeout": true, "connectionattempts": true,
	"batchmode": true, "stricthostkeychecking": true, "serveraliveinterval": true, "serveralivecountmax": true,
	"identityfile": true, "identitiesonly": true, "loglevel": true, "compression": true, "hostkeyalias": true,
	"addressfamily": true, "passwordauthentication": true, "pubkeyauthentication": true,
	"preferredauthentications": true, "kbdinteractiveauthentication": true, "challengeresponseauthentication": true,
	"gssapiauthentication": true, "proxyjump": true, "requesttty": true, "numberofpasswordprompts": true,
	"checkhostip": true, "ciphers": true, "macs": true, "kexalgorithms": true, "hostkeyalgorithms": true,
	"pubkeyacceptedkeytypes": true, "pubkeyacceptedalgorithms": true, "casignaturealgorithms": true,
	"tcpkeepalive": true, "ipqos": true, "escapechar": true, "bindaddress": true, "bindinterface": true,
	"rekeylimit": true, "verifyhostkeydns": true, "fingerprinthash": true, "logverbose": true,
	"requiredrsasize": true, "hashknownhosts": true, "visualhostkey": true, "stdinnull": true,
}

// sshCommandOptions are the -o options whose value is a command.
var sshCommandOptions = map[string]bool{"proxycommand": true, "localcommand": true, "knownhostscommand": true}

// splitSSHOption splits an -o value ("Key=Value", "Key Value") into its
// lower-case key and its value.
func splitSSHOption(v string) (key, val string) {
	v = strings.TrimLeft(v, " \t")
	i := strings.IndexAny(v, "= \t")
	if i < 0 {
		return strings.ToLower(v), ""
	}
	key, val = strings.ToLower(v[:i]), strings.TrimLeft(v[i:], " \t")
	val = strings.TrimPrefix(val, "=")
	return key, strings.TrimLeft(val, " \t")
}

func (c *classifier) ssh(args []word, text string, f *frame, in stdin) {
	opts, rest := scanOpts(args, sshValue, nil)
	var remote []word
	if rest < len(args) {
		// OpenSSH also takes options after the destination (ssh atlas -p 22
		// ls), and they act like the ones before it.
		more, n := scanOpts(args[rest+1:], sshValue, nil)
		opts = append(opts, more...)
		remote = args[rest+1+n:]
	}
	local := f.child("")
	var remoteCommand *word
	for _, o := range opts {
		switch o.name {
		case "-o":
			key, val := splitSSHOption(o.value)
			switch {
			case o.valueDyn:
				local.atLeast(ConfigMutation, "an ssh -o option is only known at run time")
			case sshCommandOptions[key]:
				c.nestedCode(word{val: val}, f, stdin{}, "ssh -o "+key)
			case key == "remotecommand":
				remoteCommand = &word{val: val}
			case !sshSafeOptions[key]:
				local.atLeast(ConfigMutation, "ssh -o "+key+" changes what ssh does on this machine")
			}
		case "-L", "-R", "-D", "-W", "-O", "-N", "-w", "-M":
			local.atLeast(ConfigMutation, "ssh "+o.name+" opens a tunnel or controls a connection")
		case "-F":
			local.atLeast(ConfigMutation, "ssh -F reads a configuration file, whose ProxyCommand or LocalCommand would run here")
		case "-E":
			local.atLeast(ConfigMutation, "ssh -E appends its log to a file")
		case "-I":
			local.atLeast(ConfigMutation, "ssh -I loads a PKCS#11 library")
		}
	}
	if rest >= len(args) {
		c.add(local, Segment{Command: text, Program: "ssh", Class: ReadOnly, Reason: "ssh without a destination connects nowhere"})
		return
	}
	dest := args[rest].val
	via := "ssh " + dest
	c.add(local, Segment{Command: text, Program: "ssh", Class: ReadOnly,
		Reason: "ssh only carries the command; what it runs is classified on its own (via " + via + ")"})
	if hasOption(opts, "-N", "-W", "-O") {
		return
	}
	c.sshExfil(dest, opts, remote, text, local, in)
	if len(remote) == 0 {
		if remoteCommand != nil {
			c.nestedCode(*remoteCommand, f.withVia(via), in, "ssh -o RemoteCommand")
			return
		}
		c.shellStdin("the remote shell", text, f.withVia(via), in)
		return
	}
	// ssh joins its arguments with spaces and the remote shell parses them.
	c.nestedCode(joinWords(remote), f.withVia(via), in, "")
	if remoteCommand != nil && !slices.ContainsFunc(remote, func(w word) bool { return !w.dyn }) {
		// Arguments only known at run time may be none (xargs with no
		// input), and then RemoteCommand runs.
		c.nestedCode(*remoteCommand, f.withVia(via), in, "ssh -o RemoteCommand")
	}
}

func (c *classifier) pct(args []word, text string, f *frame, in stdin) bool {
	_, rest := scanOpts(args, "", nil)
	if rest >= len(args) || args[rest].dyn {
		return false
	}
	switch args[rest].val {
	case "exec":
		if rest+1 >= len(args) {
			return false
		}
		id := args[rest+1].val
		cmd := args[rest+2:]
		for i := 0; i < len(cmd); i++ {
			if cmd[i].val == "--" && !cmd[i].dyn {
				cmd = cmd[i+1:]
				break
			}
			if cmd[i].val == "--keep-env" && i+1 < len(cmd) {
				i++
				continue
			}
			if !strings.HasPrefix(cmd[i].val, "-") {
				cmd = cmd[i:]
				break
			}
		}
		c.transport("pct", "pct exec "+id, cmd, text, f, in)
		return true
	case "enter":
		id := ""
		if rest+1 < len(args) {
			id = args[rest+1].val
		}
		c.add(f, Segment{Command: text, Program: "pct", Class: ReadOnly,
			Reason: "pct only carries the command; what it runs is classified on its own (via pct enter " + id + ")"})
		c.shellStdin("pct enter", text, f.withVia("pct enter "+id), in)
		return true
	}
	return false
}

func (c *classifier) qm(args []word, text string, f *frame, in stdin) bool {
	_, rest := scanOpts(args, "", nil)
	if rest+2 >= len(args) || args[rest].val != "guest" || args[rest+1].val != "exec" || args[rest].dyn || args[rest+1].dyn {
		return false
	}
	id := args[rest+2].val
	cmd := args[rest+3:]
	for i := 0; i < len(cmd); i++ {
		v := cmd[i].val
		if v == "--" && !cmd[i].dyn {
			cmd = cmd[i+1:]
			break
		}
		if (v == "--timeout" || v == "--pass-stdin" || v == "--synchronous") && i+1 < len(cmd) {
			i++
			continue
		}
		if !strings.HasPrefix(v, "-") || cmd[i].dyn {
			cmd = cmd[i:]
			break
		}
	}
	c.transport("qm", "qm guest exec "+id, cmd, text, f, in)
	return true
}

// dockerExec unwraps docker exec, docker container exec and docker compose
// exec; any other docker command goes to the rules.
func (c *classifier) dockerExec(name string, args []word, text string, f *frame, in stdin) bool {
	// Find the position of "exec" among the leading positional words.
	idx := -1
	for i, a := range args {
		if a.dyn {
			return false
		}
		if a.val == "exec" {
			idx = i
			break
		}
		if !strings.HasPrefix(a.val, "-") && a.val != "container" && a.val != "compose" && !isOptionValue(args, i, c.p.grammars[name]) {
			return false
		}
	}
	if idx < 0 {
		return false
	}
	compose := name == "docker-compose"
	for _, a := range args[:idx] {
		if a.val == "compose" {
			compose = true
		}
	}
	short, long := "euw", []string{"--env", "--env-file", "--user", "--workdir", "--detach-keys", "--index"}
	_, rest := scanOpts(args[idx+1:], short, long)
	rest += idx + 1
	if rest >= len(args) {
		return false
	}
	target := args[rest].val
	kind := "docker exec "
	if compose {
		kind = "docker compose exec "
	}
	c.transport(name, kind+target, args[rest+1:], text, f, in)
	return true
}

// isOptionValue reports whether args[i] is the value of the option before it,
// by the program's grammar.
func isOptionValue(args []word, i int, g *grammar) bool {
	if i == 0 || g == nil {
		return false
	}
	prev := args[i-1].val
	if strings.Contains(prev, "=") || !strings.HasPrefix(prev, "-") {
		return false
	}
	for _, lv := range g.levels {
		if lv[prev] {
			return true
		}
	}
	return false
}

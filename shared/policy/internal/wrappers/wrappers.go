package wrappers

import (
	"slices"
	"strings"

	"github.com/oikos-hq/oikos/shared/policy/internal/exfil"
	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"mvdan.cc/sh/v3/syntax"
)

// inner classifies the command a local wrapper runs. With no command left,
// the wrapper itself runs nothing of note: idle explains why.
func inner(c walk.Classifier, wrapper string, argv []shellword.Word, text string, f *walk.Frame, in walk.Stdin, idle string) {
	if len(argv) == 0 {
		if idle == "" {
			idle = wrapper + " without a command runs nothing"
		}
		c.Add(f, walk.Segment{Command: text, Program: wrapper, Class: ruleset.ReadOnly, Reason: idle})
		return
	}
	c.Command(argv, text, f.Child(wrapper), in)
}

func sudo(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	spec := &sudoOpts
	if name == "doas" {
		spec = &doasOpts
	}
	opts, rest, unknown := spec.scan(args)
	if shellword.HasOption(opts, "-e", "--edit") {
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation, Reason: name + " -e edits files"})
		return
	}
	f = unknownOption(f, name, unknown)
	// sudo accepts VAR=value before the command.
	for rest < len(args) && shellword.IsAssignment(args[rest]) {
		assignedWord(c, args[rest], text, f)
		rest++
	}
	if rest >= len(args) && shellword.HasOption(opts, "-i", "-s", "--login", "--shell") {
		shellStdin(c, name, text, f.Child(name), in)
		return
	}
	inner(c, name, args[rest:], text, f, in, name+" without a command only lists or validates credentials")
}

// doasOpts are doas's options (doas(1)): -s runs a shell.
var doasOpts = optSpec{flags: "Lns", values: "Cu"}

// assignedWord classifies a NAME=value argument of env or sudo like a shell
// assignment.
func assignedWord(c walk.Classifier, w shellword.Word, text string, f *walk.Frame) {
	name, val, _ := strings.Cut(w.Val, "=")
	c.Assignment(name, shellword.Word{Val: val, Dyn: w.Dyn}, text, f)
}

// envOpts are env's options (env(1), GNU coreutils; -P is BSD's).
var envOpts = optSpec{flags: "0iv", values: "uCSP",
	long:       []string{"--ignore-environment", "--null", "--debug", "--list-signal-handling", "--block-signal", "--default-signal", "--ignore-signal"},
	longValues: []string{"--unset", "--chdir", "--split-string"}}

func env(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	opts, rest, unknown := envOpts.scan(args)
	f = unknownOption(f, name, unknown)
	for rest < len(args) && shellword.IsAssignment(args[rest]) {
		assignedWord(c, args[rest], text, f)
		rest++
	}
	if o, ok := shellword.OptionValue(opts, "-S", "--split-string"); ok {
		// env -S splits its value into words and runs them: treat it as code.
		code := shellword.Word{Val: o.Value, Dyn: o.ValueDyn}
		if rest < len(args) {
			tail := shellword.JoinWords(args[rest:])
			code.Val += " " + tail.Val
			code.Dyn = code.Dyn || tail.Dyn
		}
		c.NestedCode(code, f, in, "env -S")
		return
	}
	inner(c, "env", args[rest:], text, f, in, "env without a command prints the environment")
}

// xargsOpts scans xargs's options. -a -d -E -I -L -n -P -s take a value
// (attached or the next word); -e, -i and -l take one only attached (GNU
// getopt "e::i::l::"), so in `xargs -l rm -rf /` the command is rm. Long
// options take a value after "=", and the required ones also the next word.
func xargsOpts(args []shellword.Word) (repl string, rest int) {
	rest = shellword.EachOption(args, func(i *int, _ shellword.Word, name, val string, has bool) {
		switch {
		case shellword.OptionMatches(name, "--replace"):
			repl = "{}"
			if has {
				repl = val
			}
		case !has && (shellword.OptionMatches(name, "--arg-file") || shellword.OptionMatches(name, "--delimiter") ||
			shellword.OptionMatches(name, "--max-args") || shellword.OptionMatches(name, "--max-procs") ||
			shellword.OptionMatches(name, "--max-chars") || shellword.OptionMatches(name, "--process-slot-var")):
			*i++
		}
	}, func(i *int, w shellword.Word) {
		for j := 1; j < len(w.Val); j++ {
			ch := w.Val[j]
			if strings.IndexByte("adEILnPs", ch) >= 0 {
				val := w.Val[j+1:]
				if val == "" && *i+1 < len(args) {
					*i++
					val = args[*i].Val
				}
				if ch == 'I' {
					repl = val
				}
				return
			}
			if strings.IndexByte("eil", ch) >= 0 {
				if ch == 'i' {
					repl = "{}"
					if j+1 < len(w.Val) {
						repl = w.Val[j+1:]
					}
				}
				return
			}
		}
	})
	return repl, rest
}

func xargs(c walk.Classifier, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	repl, rest := xargsOpts(args)
	if rest >= len(args) {
		c.Add(f, walk.Segment{Command: text, Program: "xargs", Class: ruleset.ReadOnly, Reason: "xargs without a command echoes its input"})
		return
	}
	inner := make([]shellword.Word, 0, len(args)-rest+1)
	for _, w := range args[rest:] {
		if repl != "" && strings.Contains(w.Val, repl) {
			w.Dyn = true
		}
		inner = append(inner, w)
	}
	if repl == "" {
		// The items read from stdin become further arguments.
		inner = append(inner, shellword.Word{Val: "{input}", Dyn: true})
	}
	// With -a the command inherits xargs's standard input; otherwise it
	// reads /dev/null. Handing it on either way can only be more cautious.
	c.Command(inner, text, f.Child("xargs"), in)
}

func flock(c walk.Classifier, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	// flock [options] FILE COMMAND… | flock [options] FILE -c CODE | flock [options] FD
	lockSeen := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w.Dyn:
			c.Command(args[i:], text, f.Child("flock"), in)
			return
		case w.Val == "-c" || w.Val == "--command":
			if i+1 < len(args) {
				c.NestedCode(args[i+1], f, in, "flock -c")
			}
			return
		case strings.HasPrefix(w.Val, "--command="):
			c.NestedCode(shellword.Word{Val: strings.TrimPrefix(w.Val, "--command=")}, f, in, "flock -c")
			return
		case w.Val == "-w" || w.Val == "--wait" || w.Val == "--timeout" || w.Val == "-E" || w.Val == "--conflict-exit-code":
			i++
		case w.Val == "--":
			if lockSeen {
				c.Command(args[i+1:], text, f.Child("flock"), in)
				return
			}
		case strings.HasPrefix(w.Val, "-") && len(w.Val) > 1:
		case !lockSeen:
			lockSeen = true
		default:
			c.Command(args[i:], text, f.Child("flock"), in)
			return
		}
	}
	c.Add(f, walk.Segment{Command: text, Program: "flock", Class: ruleset.ReadOnly, Reason: "flock without a command only takes a lock"})
}

func su(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	var code *shellword.Word
	userMode := false // runuser -u USER [--] COMMAND…
	for i := 0; i < len(args); i++ {
		w := args[i]
		switch {
		case w.Dyn:
		case w.Val == "--":
			if userMode {
				inner(c, name, args[i+1:], text, f, in, "")
				return
			}
			i = len(args) // the rest are arguments to the shell
		case strings.HasPrefix(w.Val, "--"):
			opt, v, hasV := strings.Cut(w.Val, "=")
			switch {
			case shellword.OptionMatches(opt, "--command") || shellword.OptionMatches(opt, "--session-command"):
				if !hasV && i+1 < len(args) {
					i++
					v, hasV = args[i].Val, true
					if args[i].Dyn {
						code = &shellword.Word{Val: v, Dyn: true}
						continue
					}
				}
				if hasV {
					code = &shellword.Word{Val: v}
				}
			case shellword.OptionMatches(opt, "--shell") || shellword.OptionMatches(opt, "--group") ||
				shellword.OptionMatches(opt, "--supp-group") || shellword.OptionMatches(opt, "--whitelist-environment"):
				if !hasV {
					i++
				}
			case name == "runuser" && shellword.OptionMatches(opt, "--user"):
				if !hasV {
					i++
				}
				userMode = true
			}
		case strings.HasPrefix(w.Val, "-") && len(w.Val) > 1:
			// A cluster such as -lc CODE, -c'CODE' or -s /bin/sh: a
			// value option takes the rest of the cluster or the next word.
		cluster:
			for j := 1; j < len(w.Val); j++ {
				switch ch := w.Val[j]; {
				case ch == 'c' || ch == 's' || ch == 'g' || ch == 'G' || ch == 'w' || (name == "runuser" && ch == 'u'):
					var v shellword.Word
					if j+1 < len(w.Val) {
						v = shellword.Word{Val: w.Val[j+1:]}
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
				inner(c, name, args[i:], text, f, in, "")
				return
			}
			// the user name, or arguments to the shell
		}
	}
	if code != nil {
		c.NestedCode(*code, f, in, name+" -c")
		return
	}
	shellStdin(c, name, text, f.Child(name), in)
}

func trap(c walk.Classifier, args []shellword.Word, text string, f *walk.Frame) {
	opts, rest := shellword.ScanOpts(args, "", nil)
	rem := args[rest:]
	if shellword.HasOption(opts, "-l", "-p", "-P") || len(rem) < 2 || (!rem[0].Dyn && (rem[0].Val == "-" || rem[0].Val == "")) {
		c.Add(f, walk.Segment{Command: text, Program: "trap", Class: ruleset.ReadOnly, Reason: "trap only lists or resets signal handlers"})
		return
	}
	c.EvalCode(rem[0], f, walk.Stdin{}, "trap")
}

func alias(c walk.Classifier, args []shellword.Word, text string, f *walk.Frame) {
	defined := false
	for _, a := range args {
		if _, v, ok := strings.Cut(a.Val, "="); ok {
			defined = true
			c.EvalCode(shellword.Word{Val: v, Dyn: a.Dyn}, f, walk.Stdin{}, "alias")
		}
	}
	if !defined {
		c.Add(f, walk.Segment{Command: text, Program: "alias", Class: ruleset.ReadOnly, Reason: "alias without a definition only lists aliases"})
	}
}

// shell classifies sh/bash/… : code given with -c, a script file, or stdin.
func shell(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	cmdMode, stdinMode := false, false
	i := 0
options:
	for ; i < len(args); i++ {
		w := args[i]
		switch {
		case w.Dyn && cmdMode:
			break options // the code itself
		case w.Proc != nil:
			break options // the script is a command's output: bash <(curl …)
		case w.Dyn:
			c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
				Reason: name + " options or script only known at run time (unknown code needs approval)"})
			return
		case w.Val == "--" || w.Val == "-":
			i++
			break options
		case w.Val == "--rcfile" || w.Val == "--init-file":
			i++
		case strings.HasPrefix(w.Val, "--"):
		case len(w.Val) > 1 && (w.Val[0] == '-' || w.Val[0] == '+'):
			for _, ch := range w.Val[1:] {
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
		c.NestedCode(args[i], f, in, name+" -c")
	case cmdMode:
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly, Reason: name + " -c without code runs nothing"})
	case stdinMode || i >= len(args):
		shellStdin(c, name, text, f.Child(""), in)
	default:
		script(c, name, args[i], text, f, in)
	}
}

// script classifies a shell (or source/.) running a script file: the output
// of a process substitution (bash <(curl …)) or standard input under another
// name (bash /dev/stdin <<< …) is classified like code on stdin; any other
// file is unknown code.
func script(c walk.Classifier, name string, file shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	switch {
	case file.Proc != nil:
		shellStdin(c, name, text, f.Child(""), procOutput(c, file.Proc, f))
	case !file.Dyn && (file.Val == "/dev/stdin" || file.Val == "/dev/fd/0" || file.Val == "/proc/self/fd/0"):
		shellStdin(c, name, text, f.Child(""), in)
	default:
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
			Reason: name + " runs the script file " + file.Val + ", whose contents are not known (unknown code needs approval)"})
	}
}

// procOutput describes what a process substitution <(…) produces.
func procOutput(c walk.Classifier, ps *syntax.ProcSubst, f *walk.Frame) walk.Stdin {
	if len(ps.Stmts) == 1 {
		return c.PipeSource(ps.Stmts[0], f, walk.Stdin{})
	}
	return walk.Stdin{Kind: walk.StdinOther, Producer: "`" + shellword.NodeText(f.Src, ps) + "`"}
}

// shellStdin classifies a program that runs the code on its stdin.
func shellStdin(c walk.Classifier, name, text string, f *walk.Frame, in walk.Stdin) {
	switch in.Kind {
	case walk.StdinText:
		c.NestedCode(shellword.Word{Val: in.Text, Dyn: in.Dyn}, f, walk.Stdin{}, name+" reading "+in.Producer)
	case walk.StdinFetch:
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
			Reason: "fetch-to-exec: " + name + " runs code downloaded by " + in.Producer + " (unknown code needs approval)"})
	case walk.StdinOther:
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
			Reason: name + " runs code read from " + in.Producer + " (unknown code needs approval)"})
		c.DestructiveHint(in.Hint, f, name+" reading "+in.Producer)
	default:
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation,
			Reason: name + " runs commands read from its standard input, which are not known (unknown code needs approval)"})
	}
}

// transport records the transport itself (so the gate sees pct on the target)
// and classifies the argv it runs elsewhere.
func transport(c walk.Classifier, program, via string, argv []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	c.Add(f, walk.Segment{Command: text, Program: program, Class: ruleset.ReadOnly,
		Reason: program + " only carries the command; what it runs is classified on its own (via " + via + ")"})
	if len(argv) == 0 {
		return
	}
	c.Command(argv, text, f.WithVia(via), in)
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

func ssh(c walk.Classifier, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	opts, rest := shellword.ScanOpts(args, sshValue, nil)
	var remote []shellword.Word
	if rest < len(args) {
		// OpenSSH also takes options after the destination (ssh atlas -p 22
		// ls), and they act like the ones before it.
		more, n := shellword.ScanOpts(args[rest+1:], sshValue, nil)
		opts = append(opts, more...)
		remote = args[rest+1+n:]
	}
	local := f.Child("")
	var remoteCommand *shellword.Word
	for _, o := range opts {
		switch o.Name {
		case "-o":
			key, val := splitSSHOption(o.Value)
			switch {
			case o.ValueDyn:
				local.AtLeast(ruleset.ConfigMutation, "an ssh -o option is only known at run time")
			case sshCommandOptions[key]:
				c.NestedCode(shellword.Word{Val: val}, f, walk.Stdin{}, "ssh -o "+key)
			case key == "remotecommand":
				remoteCommand = &shellword.Word{Val: val}
			case !sshSafeOptions[key]:
				local.AtLeast(ruleset.ConfigMutation, "ssh -o "+key+" changes what ssh does on this machine")
			}
		case "-L", "-R", "-D", "-W", "-O", "-N", "-w", "-M":
			local.AtLeast(ruleset.ConfigMutation, "ssh "+o.Name+" opens a tunnel or controls a connection")
		case "-F":
			local.AtLeast(ruleset.ConfigMutation, "ssh -F reads a configuration file, whose ProxyCommand or LocalCommand would run here")
		case "-E":
			local.AtLeast(ruleset.ConfigMutation, "ssh -E appends its log to a file")
		case "-I":
			local.AtLeast(ruleset.ConfigMutation, "ssh -I loads a PKCS#11 library")
		}
	}
	if rest >= len(args) {
		c.Add(local, walk.Segment{Command: text, Program: "ssh", Class: ruleset.ReadOnly, Reason: "ssh without a destination connects nowhere"})
		return
	}
	dest := args[rest].Val
	via := "ssh " + dest
	c.Add(local, walk.Segment{Command: text, Program: "ssh", Class: ruleset.ReadOnly,
		Reason: "ssh only carries the command; what it runs is classified on its own (via " + via + ")"})
	if shellword.HasOption(opts, "-N", "-W", "-O") {
		return
	}
	exfil.SSH(c, dest, opts, remote, text, local, in)
	if len(remote) == 0 {
		if remoteCommand != nil {
			c.NestedCode(*remoteCommand, f.WithVia(via), in, "ssh -o RemoteCommand")
			return
		}
		shellStdin(c, "the remote shell", text, f.WithVia(via), in)
		return
	}
	// ssh joins its arguments with spaces and the remote shell parses them.
	c.NestedCode(shellword.JoinWords(remote), f.WithVia(via), in, "")
	if remoteCommand != nil && !slices.ContainsFunc(remote, func(w shellword.Word) bool { return !w.Dyn }) {
		// Arguments only known at run time may be none (xargs with no
		// input), and then RemoteCommand runs.
		c.NestedCode(*remoteCommand, f.WithVia(via), in, "ssh -o RemoteCommand")
	}
}

func pct(c walk.Classifier, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	_, rest := shellword.ScanOpts(args, "", nil)
	if rest >= len(args) || args[rest].Dyn {
		return false
	}
	switch args[rest].Val {
	case "exec":
		if rest+1 >= len(args) {
			return false
		}
		id := args[rest+1].Val
		cmd := args[rest+2:]
		for i := 0; i < len(cmd); i++ {
			if cmd[i].Val == "--" && !cmd[i].Dyn {
				cmd = cmd[i+1:]
				break
			}
			if cmd[i].Val == "--keep-env" && i+1 < len(cmd) {
				i++
				continue
			}
			if !strings.HasPrefix(cmd[i].Val, "-") {
				cmd = cmd[i:]
				break
			}
		}
		transport(c, "pct", "pct exec "+id, cmd, text, f, in)
		return true
	case "enter":
		id := ""
		if rest+1 < len(args) {
			id = args[rest+1].Val
		}
		c.Add(f, walk.Segment{Command: text, Program: "pct", Class: ruleset.ReadOnly,
			Reason: "pct only carries the command; what it runs is classified on its own (via pct enter " + id + ")"})
		shellStdin(c, "pct enter", text, f.WithVia("pct enter "+id), in)
		return true
	}
	return false
}

func qm(c walk.Classifier, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	_, rest := shellword.ScanOpts(args, "", nil)
	if rest+2 >= len(args) || args[rest].Val != "guest" || args[rest+1].Val != "exec" || args[rest].Dyn || args[rest+1].Dyn {
		return false
	}
	id := args[rest+2].Val
	cmd := args[rest+3:]
	for i := 0; i < len(cmd); i++ {
		v := cmd[i].Val
		if v == "--" && !cmd[i].Dyn {
			cmd = cmd[i+1:]
			break
		}
		if (v == "--timeout" || v == "--pass-stdin" || v == "--synchronous") && i+1 < len(cmd) {
			i++
			continue
		}
		if !strings.HasPrefix(v, "-") || cmd[i].Dyn {
			cmd = cmd[i:]
			break
		}
	}
	transport(c, "qm", "qm guest exec "+id, cmd, text, f, in)
	return true
}

// dockerExec unwraps docker exec, docker container exec and docker compose
// exec; any other docker command goes to the rules.
func dockerExec(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	// Find the position of "exec" among the leading positional words.
	idx := -1
	for i, a := range args {
		if a.Dyn {
			return false
		}
		if a.Val == "exec" {
			idx = i
			break
		}
		if !strings.HasPrefix(a.Val, "-") && a.Val != "container" && a.Val != "compose" && !isOptionValue(args, i, c.Rules().Grammars[name]) {
			return false
		}
	}
	if idx < 0 {
		return false
	}
	compose := name == "docker-compose"
	for _, a := range args[:idx] {
		if a.Val == "compose" {
			compose = true
		}
	}
	short, long := "euw", []string{"--env", "--env-file", "--user", "--workdir", "--detach-keys", "--index"}
	_, rest := shellword.ScanOpts(args[idx+1:], short, long)
	rest += idx + 1
	if rest >= len(args) {
		return false
	}
	target := args[rest].Val
	kind := "docker exec "
	if compose {
		kind = "docker compose exec "
	}
	transport(c, name, kind+target, args[rest+1:], text, f, in)
	return true
}

// isOptionValue reports whether args[i] is the value of the option before it,
// by the program's grammar.
func isOptionValue(args []shellword.Word, i int, g *shellword.Grammar) bool {
	if i == 0 || g == nil {
		return false
	}
	prev := args[i-1].Val
	if strings.Contains(prev, "=") || !strings.HasPrefix(prev, "-") {
		return false
	}
	for _, lv := range g.Levels {
		if lv[prev] {
			return true
		}
	}
	return false
}

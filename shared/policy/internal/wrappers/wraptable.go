package wrappers

import (
	"github.com/oikos-hq/oikos/shared/policy/internal/ruleset"
	"github.com/oikos-hq/oikos/shared/policy/internal/shellword"
	"github.com/oikos-hq/oikos/shared/policy/internal/walk"
	"slices"
	"strings"
)

// A wrapper is a program that runs another command: on this machine (sudo,
// env, timeout, nice, xargs, find -exec, bash -c, python3 -c …) or elsewhere
// (ssh, pct exec, qm guest exec, pvesh's guest-agent exec endpoint, docker,
// podman and kubectl exec, lxc exec, systemd-run -H). The principle: a
// wrapped command is classified as the command it runs, and never lower;
// when the inner command cannot be read (a variable, code the classifier
// cannot parse) the whole is at least config_mutation, the step above what
// runs unattended. An option a wrapper's manual does not list has an effect
// the classifier does not know, so it makes the command at least
// config_mutation too.
//
// wrapperTable is the one table of wrappers: each entry says how the wrapper
// finds its inner command (its unwrap function) and which manual that is
// taken from. An unwrap function reports false when the program is not a
// wrapper in the form it was given (pct list, docker ps, python3 script.py):
// the rules then classify it as a plain program.
var wrapperTable map[string]wrapperEntry

type wrapperEntry struct {
	unwrap func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool
	// source names where the entry's reading of the command line comes from.
	source string
}

// unwrapFunc adapts a wrapper method that always unwraps.
func always(fn func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin)) func(walk.Classifier, string, []shellword.Word, string, *walk.Frame, walk.Stdin) bool {
	return func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
		fn(c, name, args, text, f, in)
		return true
	}
}

// prefix builds the entry of a wrapper written `wrapper [options] [skip
// words] command…`, whose options its manual lists in spec.
func prefix(spec optSpec, source string) wrapperEntry {
	return wrapperEntry{source: source, unwrap: func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
		prefixWrapper(c, name, spec, args, text, f, in)
		return true
	}}
}

func init() {
	shells := wrapperEntry{source: "bash(1) -c, dash(1)", unwrap: always(shell)}
	interp := wrapperEntry{source: "python(1) -c, perl(1) -e, ruby(1) -e, node(1) -e, php(1) -r", unwrap: interpreter}
	docker := wrapperEntry{source: "docker-exec(1), podman-exec(1), nerdctl exec", unwrap: dockerExec}
	wrapperTable = map[string]wrapperEntry{
		"sudo":    {source: "sudo(8)", unwrap: always(sudo)},
		"doas":    {source: "doas(1)", unwrap: always(sudo)},
		"pkexec":  prefix(optSpec{long: []string{"--disable-internal-agent", "--keep-cwd"}, longValues: []string{"--user"}}, "pkexec(1)"),
		"env":     {source: "env(1)", unwrap: always(env)},
		"nice":    prefix(optSpec{values: "n", longValues: []string{"--adjustment"}, numeric: true}, "nice(1)"),
		"nohup":   prefix(optSpec{}, "nohup(1)"),
		"builtin": prefix(optSpec{}, "bash(1) builtin"),
		"setsid":  prefix(optSpec{flags: "cfw", long: []string{"--ctty", "--fork", "--wait"}}, "setsid(1)"),
		"stdbuf":  prefix(optSpec{values: "ioe", longValues: []string{"--input", "--output", "--error"}}, "stdbuf(1)"),
		"timeout": prefix(optSpec{flags: "fpv", values: "ks", long: []string{"--foreground", "--preserve-status", "--verbose"},
			longValues: []string{"--kill-after", "--signal"}, skip: 1}, "timeout(1)"),
		"chroot": prefix(optSpec{long: []string{"--skip-chdir"}, longValues: []string{"--userspec", "--groups"}, skip: 1, shellWithout: true}, "chroot(8)"),
		"nsenter": prefix(optSpec{flags: "aFZecN", values: "tSGW", optional: "muinpCUTrw",
			long: []string{"--all", "--preserve-credentials", "--keep-caps", "--no-fork", "--follow-context", "--env", "--join-cgroup", "--user-parent",
				"--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup", "--user", "--time", "--root", "--wd"},
			longValues: []string{"--target", "--setuid", "--setgid", "--wdns"}, shellWithout: true}, "nsenter(1)"),
		"unshare": prefix(optSpec{flags: "muinpUCTfrc", values: "RwSGl", optional: "muinpUCT",
			long: []string{"--mount", "--uts", "--ipc", "--net", "--pid", "--user", "--cgroup", "--time", "--fork", "--map-root-user",
				"--map-current-user", "--map-auto", "--keep-caps", "--kill-child", "--mount-proc", "--monotonic", "--boottime", "--mount-binfmt"},
			longValues: []string{"--propagation", "--setgroups", "--map-user", "--map-group", "--map-users", "--map-groups", "--root", "--wd",
				"--setuid", "--setgid", "--load-interp"}, shellWithout: true}, "unshare(1)"),
		"setpriv": prefix(optSpec{flags: "d", long: []string{"--dump", "--clear-groups", "--keep-groups", "--init-groups", "--no-new-privs", "--reset-env"},
			longValues: []string{"--reuid", "--regid", "--ruid", "--rgid", "--euid", "--egid", "--groups", "--inh-caps", "--ambient-caps",
				"--bounding-set", "--securebits", "--pdeathsig", "--selinux-label", "--apparmor-profile", "--landlock-access", "--landlock-rule"},
			idle: "setpriv without a command only prints its state"}, "setpriv(1)"),
		"taskset": prefix(optSpec{flags: "ac", long: []string{"--all-tasks", "--cpu-list"}, mutating: []string{"-p", "--pid"},
			mutatingWhy: "changes the CPU affinity of a running process", skip: 1}, "taskset(1)"),
		"chrt": prefix(optSpec{flags: "bdfioeRav", values: "TPD", long: []string{"--batch", "--deadline", "--fifo", "--idle", "--other", "--rr",
			"--ext", "--reset-on-fork", "--all-tasks", "--verbose"}, longValues: []string{"--sched-runtime", "--sched-period", "--sched-deadline"},
			readOnly: []string{"-m", "--max"}, mutating: []string{"-p", "--pid"}, mutatingWhy: "changes the scheduling of a running process", skip: 1}, "chrt(1)"),
		"ionice": prefix(optSpec{flags: "t", values: "cn", long: []string{"--ignore"}, longValues: []string{"--class", "--classdata"},
			mutating: []string{"-p", "-P", "-u", "--pid", "--pgid", "--uid"}, mutatingWhy: "changes the I/O priority of running processes",
			idle: "ionice prints its own I/O priority"}, "ionice(1)"),
		"prlimit": prefix(optSpec{flags: "AcdefilmnqrstuvxyoV", long: []string{"--as", "--core", "--cpu", "--data", "--fsize", "--locks", "--memlock",
			"--msgqueue", "--nice", "--nofile", "--nproc", "--rss", "--rtprio", "--rttime", "--sigpending", "--stack", "--noheadings", "--raw",
			"--verbose", "--output"}, mutating: []string{"--pid"}, mutatingWhy: "changes the resource limits of a running process",
			idle: "prlimit without a command prints limits"}, "prlimit(1)"),
		"time": {source: "time(1)", unwrap: always(timeCmd)},
		"command": {source: "bash(1) command", unwrap: func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
			opts, rest := shellword.ScanOpts(args, "", nil)
			if shellword.HasOption(opts, "-v", "-V") {
				c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly, Reason: "command -v only looks a name up"})
				return true
			}
			inner(c, name, args[rest:], text, f, in, "")
			return true
		}},
		"exec": {source: "bash(1) exec", unwrap: func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
			_, rest := shellword.ScanOpts(args, "a", nil)
			inner(c, name, args[rest:], text, f, in, "exec without a command only applies its redirections")
			return true
		}},
		"systemd-run": {source: "systemd-run(1)", unwrap: always(systemdRun)},
		"xargs": {source: "xargs(1)", unwrap: always(func(c walk.Classifier, _ string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
			xargs(c, args, text, f, in)
		})},
		"flock": {source: "flock(1)", unwrap: always(func(c walk.Classifier, _ string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
			flock(c, args, text, f, in)
		})},
		"watch":   {source: "watch(1)", unwrap: always(watch)},
		"su":      {source: "su(1)", unwrap: always(su)},
		"runuser": {source: "runuser(1)", unwrap: always(su)},
		"sg":      {source: "sg(1)", unwrap: always(sg)},
		"eval": {source: "bash(1) eval", unwrap: func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
			if len(args) == 0 {
				c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly, Reason: "eval without arguments runs nothing"})
				return true
			}
			c.EvalCode(shellword.JoinWords(args), f, in, "eval")
			return true
		}},
		"trap": {source: "bash(1) trap", unwrap: always(func(c walk.Classifier, _ string, args []shellword.Word, text string, f *walk.Frame, _ walk.Stdin) {
			trap(c, args, text, f)
		})},
		"alias": {source: "bash(1) alias", unwrap: always(func(c walk.Classifier, _ string, args []shellword.Word, text string, f *walk.Frame, _ walk.Stdin) {
			alias(c, args, text, f)
		})},
		"source": {source: "bash(1) source", unwrap: always(source)},
		".":      {source: "bash(1) .", unwrap: always(source)},
		"ssh": {source: "ssh(1)", unwrap: always(func(c walk.Classifier, _ string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
			ssh(c, args, text, f, in)
		})},
		"pct": {source: "pct(1) exec, enter", unwrap: func(c walk.Classifier, _ string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
			return pct(c, args, text, f, in)
		}},
		"qm": {source: "qm(1) guest exec", unwrap: func(c walk.Classifier, _ string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
			return qm(c, args, text, f, in)
		}},
		"pvesh":          {source: "pvesh(1); api: POST /nodes/{node}/qemu/{vmid}/agent/exec", unwrap: pveshExec},
		"docker":         docker,
		"docker-compose": docker,
		"podman":         docker,
		"nerdctl":        docker,
		"kubectl":        {source: "kubectl exec (kubectl reference)", unwrap: kubectlExec},
		"lxc":            {source: "lxc exec (LXD), incus exec", unwrap: lxdExec},
		"incus":          {source: "incus exec", unwrap: lxdExec},
		"lxc-attach":     {source: "lxc-attach(1)", unwrap: always(lxcAttach)},
		"busybox": {source: "busybox(1)", unwrap: func(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
			if len(args) == 0 {
				c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly, Reason: "busybox without an applet lists its applets"})
				return true
			}
			c.Command(args, text, f.Child("busybox"), in)
			return true
		}},
		"at":    {source: "at(1)", unwrap: always(at)},
		"batch": {source: "at(1) batch", unwrap: always(at)},
	}
	for _, s := range []string{"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "rbash", "fish"} {
		wrapperTable[s] = shells
	}
	for _, s := range interpreters {
		wrapperTable[s] = interp
	}
	for n := range wrapperTable {
		Names = append(Names, n)
	}
	slices.Sort(Names)
}

// Names lists every wrapper of the table, sorted; the classifier looks
// for them inside arguments of unknown programs.
var Names []string

// IsWrapper reports whether name has an entry in the wrapper table.
func IsWrapper(name string) bool {
	_, ok := wrapperTable[name]
	return ok
}

// Unwrap unwraps a program of the wrapper table and classifies what it runs.
// It reports false when name is not a wrapper in this form.
func Unwrap(c walk.Classifier, name string, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) bool {
	e, ok := wrapperTable[name]
	if !ok {
		return false
	}
	return e.unwrap(c, name, args, text, f, in)
}

// optSpec is a wrapper's own options as its manual lists them.
type optSpec struct {
	// flags are single letters without a value; values letters that take
	// one (attached or the next word); optional letters take a value only
	// attached (nsenter -m/proc/1/ns/mnt).
	flags, values, optional string
	// long are long options without a value (an attached =value is
	// accepted); longValues take one (attached or the next word).
	long, longValues []string
	// numeric: -N is an option (nice -10).
	numeric bool
	// skip is the number of words between the options and the command
	// (timeout's duration, chroot's new root, taskset's mask).
	skip int
	// shellWithout: with no command the wrapper starts a shell that reads
	// its standard input (chroot, nsenter, unshare).
	shellWithout bool
	// readOnly options make the wrapper only print (chrt -m); mutating
	// options make it change a running process instead (taskset -p).
	readOnly, mutating []string
	mutatingWhy        string
	// idle explains a wrapper given no command.
	idle string
}

// scan reads the leading options. unknown is the first option the spec does
// not list ("" when every one is known).
func (s *optSpec) scan(args []shellword.Word) (opts []shellword.Option, rest int, unknown string) {
	rest = shellword.EachOption(args, func(i *int, w shellword.Word, name, val string, has bool) {
		o := shellword.Option{Name: name, Value: val, HasValue: has, ValueDyn: has && w.Dyn}
		switch full := longName(name, s.longValues); {
		case full != "":
			o.Name = full
			if !has && *i+1 < len(args) {
				*i++
				o.Value, o.HasValue, o.ValueDyn = args[*i].Val, true, args[*i].Dyn
			}
		default:
			if full = longName(name, s.long); full != "" {
				o.Name = full
			} else if unknown == "" && longName(name, s.mutating) == "" && longName(name, s.readOnly) == "" {
				unknown = w.Val
			}
		}
		opts = append(opts, o)
	}, func(i *int, w shellword.Word) {
		if s.numeric && w.Val[1] >= '0' && w.Val[1] <= '9' {
			opts = append(opts, shellword.Option{Name: w.Val})
			return
		}
		for j := 1; j < len(w.Val); j++ {
			ch := w.Val[j]
			o := shellword.Option{Name: shellword.ShortOpts[ch]}
			switch {
			case strings.IndexByte(s.values, ch) >= 0:
				o.HasValue = true
				o.Value, o.ValueDyn = shellword.ShortOptValue(args, i, j)
				opts = append(opts, o)
				j = len(w.Val)
				continue
			case strings.IndexByte(s.optional, ch) >= 0 && j+1 < len(w.Val) && strings.ContainsRune("/=.~", rune(w.Val[j+1])):
				o.Value, o.HasValue = strings.TrimPrefix(w.Val[j+1:], "="), true
				opts = append(opts, o)
				j = len(w.Val)
				continue
			case strings.IndexByte(s.flags, ch) >= 0 || strings.IndexByte(s.optional, ch) >= 0:
			case slices.Contains(s.mutating, o.Name) || slices.Contains(s.readOnly, o.Name):
			default:
				if unknown == "" {
					unknown = w.Val
				}
			}
			opts = append(opts, o)
		}
	})
	return opts, rest, unknown
}

// longName returns the listed long option that name is or abbreviates
// (GNU getopt takes any unambiguous prefix), "" when none.
func longName(name string, list []string) string {
	for _, l := range list {
		if l == name {
			return l
		}
	}
	for _, l := range list {
		if shellword.OptionMatches(name, l) {
			return l
		}
	}
	return ""
}

// unknownOption raises a frame for what a wrapper runs when the wrapper was
// given an option its manual does not list.
func unknownOption(f *walk.Frame, name, opt string) *walk.Frame {
	if opt == "" {
		return f
	}
	n := f.Child("")
	n.AtLeast(ruleset.ConfigMutation, name+" is given "+opt+", an option its manual does not list, so its effect is not known")
	return n
}

// prefixWrapper classifies `wrapper [options] [skip words] command…`.
func prefixWrapper(c walk.Classifier, name string, spec optSpec, args []shellword.Word, text string, f *walk.Frame, in walk.Stdin) {
	opts, rest, unknown := spec.scan(args)
	if len(spec.readOnly) > 0 && shellword.HasOption(opts, spec.readOnly...) {
		c.Add(unknownOption(f, name, unknown), walk.Segment{Command: text, Program: name, Class: ruleset.ReadOnly, Reason: name + " " + spec.readOnly[0] + " only prints"})
		return
	}
	if len(spec.mutating) > 0 && shellword.HasOption(opts, spec.mutating...) {
		c.Add(f, walk.Segment{Command: text, Program: name, Class: ruleset.ConfigMutation, Reason: name + " " + spec.mutatingWhy,
			Cause: "wrapper: " + name + " " + spec.mutatingWhy})
		return
	}
	f = unknownOption(f, name, unknown)
	rest = min(rest+spec.skip, len(args))
	if rest >= len(args) && spec.shellWithout {
		shellStdin(c, name, text, f.Child(name), in)
		return
	}
	inner(c, name, args[rest:], text, f, in, spec.idle)
}

// sudoOpts are sudo's options (sudo(8)).
var sudoOpts = optSpec{flags: "AbEeHiKklnPSsVvNB", values: "CDghpRrTtUu",
	long: []string{"--askpass", "--background", "--bell", "--preserve-env", "--edit", "--set-home", "--login", "--remove-timestamp",
		"--reset-timestamp", "--list", "--non-interactive", "--preserve-groups", "--stdin", "--shell", "--version", "--validate", "--no-update"},
	longValues: []string{"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot", "--role", "--type",
		"--command-timeout", "--other-user", "--user"}}

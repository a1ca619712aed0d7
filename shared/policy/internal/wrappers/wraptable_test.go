package wrappers_test

import (
	"encoding/json"
	"testing"

	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/internal/policytest"
	"github.com/oikos-hq/oikos/shared/policy/internal/wrappers"
	"mvdan.cc/sh/v3/syntax"
)

// principleCase is a case of a principle's table (see policytest).
type principleCase policytest.PrincipleCase

// TestWrapperPrinciple: a wrapper is classified by what it runs; an inner
// command that cannot be read makes it at least config_mutation, and so does
// an option the wrapper's manual does not list.
func TestWrapperPrinciple(t *testing.T) {
	t.Parallel()
	policytest.CheckPrinciple(t, policy.Default(), []principleCase{
		// The list.
		{"pct exec 101 -- rm -rf /srv/media", policy.Destructive, ""},
		{"pct exec 101 -- ls /srv", policy.ReadOnly, ""},
		{"qm guest exec 200 -- rm -rf /var/lib/app", policy.Destructive, ""},
		{"ssh atlas 'rm -rf /srv/old'", policy.Destructive, ""},
		{"docker exec web rm -rf /data", policy.Destructive, ""},
		{"podman exec web cat /etc/os-release", policy.ReadOnly, ""},
		{"su -c 'rm -rf /srv' root", policy.Destructive, ""},
		{"sudo $CMD", policy.ConfigMutation, ""},
		// From the tools' manuals.
		{"pvesh create /nodes/atlas/qemu/200/agent/exec --command rm --command -rf --command /srv", policy.Destructive, "pvesh(1); api agent/exec: command is an array"},
		{"pvesh create /nodes/atlas/qemu/200/agent/exec --command 'rm -rf /srv'", policy.Destructive, "api agent/exec: a string command is split into words"},
		{"pvesh set /nodes/atlas/qemu/200/agent/exec --command cat --command /etc/hostname", policy.ReadOnly, "pvesh(1): whatever verb is written"},
		{"pvesh get /nodes/atlas/qemu/200/agent/exec-status --pid 12", policy.ReadOnly, "api agent/exec-status only reads a result"},
		{"kubectl exec -n prod web-0 -c app -- rm -rf /var/lib/app", policy.Destructive, "kubectl exec: -n NS -c CONTAINER -- COMMAND"},
		{"kubectl --context lab exec -it web-0 -- cat /etc/hosts", policy.ReadOnly, "kubectl exec: global flags before exec"},
		{"nerdctl exec -u root web ls /data", policy.ReadOnly, "nerdctl exec"},
		{"nsenter --target 1 --mount --uts --ipc --net --pid -- rm -rf /srv", policy.Destructive, "nsenter(1) long options"},
		{"nsenter -t 1 -m/proc/1/ns/mnt df -h", policy.ReadOnly, "nsenter(1) -m[file]"},
		{"chroot --userspec=1000:1000 /mnt/root rm -rf /etc", policy.Destructive, "chroot(8) --userspec"},
		{"systemd-run --wait --pipe --property=PrivateTmp=yes rm -rf /srv/cache", policy.Destructive, "systemd-run(1) --property"},
		{"systemd-run -P --wait cat /etc/machine-id", policy.ReadOnly, "systemd-run(1) --pipe --wait"},
		{"systemd-run --on-calendar=daily du -sh /srv", policy.ConfigMutation, "systemd-run(1) --on-calendar installs a timer"},
		{"systemd-run -H root@hermes --wait rm -rf /srv", policy.Destructive, "systemd-run(1) -H runs on another host"},
		{"runuser -u postgres -- dropdb app", policy.Destructive, "runuser(1) -u USER -- COMMAND"},
		{"su - postgres -c 'psql -c \"select 1\"'", policy.ReadOnly, "su(1) -c"},
		{"sudo -u www-data -H ls /var/www", policy.ReadOnly, "sudo(8) -u -H"},
		{"sudo --frobnicate ls", policy.ConfigMutation, "sudo(8) lists no --frobnicate"},
		{"timeout --preserve-status -k 5 30 rm -rf /srv/x", policy.Destructive, "timeout(1) -k DURATION"},
		{"timeout --bogus 5 ls", policy.ConfigMutation, "timeout(1) lists no --bogus"},
		{"env -i PATH=/usr/bin -u HOME rm -rf /srv", policy.Destructive, "env(1) -i -u"},
		{"env --frobnicate ls", policy.ConfigMutation, "env(1) lists no --frobnicate"},
		{"nice -n 19 ionice -c3 rm -rf /srv/old", policy.Destructive, "nice(1), ionice(1)"},
		{"nice -10 df -h", policy.ReadOnly, "nice(1) -N"},
		{"taskset -p 0x1 1234", policy.ConfigMutation, "taskset(1) -p changes a running process"},
		{"taskset -c 0,1 ls /", policy.ReadOnly, "taskset(1) -c LIST"},
		{"chrt -i 0 rm -rf /srv", policy.Destructive, "chrt(1) -i PRIORITY"},
		{"setpriv --reuid=1000 --regid=1000 --clear-groups rm -rf /srv", policy.Destructive, "setpriv(1)"},
		{"unshare -m --propagation private rm -rf /srv", policy.Destructive, "unshare(1)"},
		{"find /srv -name '*.bak' -execdir rm {} +", policy.Destructive, "find(1) -execdir"},
		{"find /tmp -name x -ok rm {} ;", policy.Destructive, "find(1) -ok"},
		{"printf '%s\\0' /srv/a | xargs -0 -r rm -f", policy.Destructive, "xargs(1) -0 -r"},
		{"watch -n 5 -d 'ls /srv'", policy.ReadOnly, "watch(1) runs sh -c"},
		{"flock -w 10 /run/lock/x -c 'rm -rf /srv/x'", policy.Destructive, "flock(1) -c"},
		{"bash -lc 'rm -rf /srv/x'", policy.Destructive, "bash(1) -c in a cluster"},
		{`python3 -c 'import subprocess; subprocess.run(["rm", "-rf", "/srv"])'`, policy.Destructive, "python(1) -c; subprocess.run with an argv list"},
		{`perl -e 'system("rm", "-rf", "/srv")'`, policy.Destructive, "perl(1) -e; perlfunc system LIST"},
		{"ruby -e '`rm -rf /srv`'", policy.Destructive, "ruby(1) -e; backticks run a shell"},
		{`node -e 'require("child_process").execFileSync("rm", ["-rf", "/srv"])'`, policy.Destructive, "node(1) -e; child_process.execFileSync"},
		{`php -r 'shell_exec("rm -rf /srv");'`, policy.Destructive, "php(1) -r; shell_exec"},
		{"python3 -c 'print(1)'", policy.ConfigMutation, "python(1) -c: code the classifier cannot read"},
		{"lxc exec web -- rm -rf /srv", policy.Destructive, "lxc exec (LXD)"},
		{"incus exec web -- ls /", policy.ReadOnly, "incus exec"},
		{"sg docker -c 'rm -rf /srv'", policy.Destructive, "sg(1)"},
		{"pkexec --user root rm -rf /srv", policy.Destructive, "pkexec(1) --user"},
		{"prlimit --nofile=1024 rm -rf /srv", policy.Destructive, "prlimit(1) RESOURCE=limits COMMAND"},
		{"pct exec 101 -- $CMD", policy.ConfigMutation, "pct(1): an inner command only known at run time"},
	}, "wrapper:", 15)
}

// TestWrapperTable: every wrapper names its source, and every one is
// covered by the wrapping property below.
func TestWrapperTable(t *testing.T) {
	t.Parallel()
	for name, source := range wrappers.Sources() {
		if source == "" {
			t.Errorf("wrapper %q has no source or no unwrap function", name)
		}
		if wrapTemplates[name] == nil {
			t.Errorf("wrapper %q has no template in wrapTemplates, so the property test does not wrap with it", name)
		}
	}
}

// wrapTemplates wrap a command in each wrapper of the table: simple (for a
// command of one program), quoted (the command as one shell word) and json
// (as a string literal) are the command's forms.
var wrapTemplates = map[string]func(simple, quoted, js string) []string{
	"sudo":    func(s, q, _ string) []string { return opt(s, "sudo ", "sudo -u root -H ") },
	"doas":    func(s, q, _ string) []string { return opt(s, "doas ", "doas -u root ") },
	"pkexec":  func(s, q, _ string) []string { return opt(s, "pkexec ", "pkexec --user root ") },
	"env":     func(s, q, _ string) []string { return opt(s, "env ", "env -i PATH=/usr/bin ") },
	"nice":    func(s, q, _ string) []string { return opt(s, "nice -n 10 ", "nice -5 ") },
	"nohup":   func(s, q, _ string) []string { return opt(s, "nohup ") },
	"builtin": func(s, q, _ string) []string { return opt(s, "builtin ") },
	"setsid":  func(s, q, _ string) []string { return opt(s, "setsid -w ") },
	"stdbuf":  func(s, q, _ string) []string { return opt(s, "stdbuf -oL ") },
	"timeout": func(s, q, _ string) []string { return opt(s, "timeout 30 ", "timeout -k 5 --preserve-status 30 ") },
	"chroot":  func(s, q, _ string) []string { return opt(s, "chroot / ") },
	"nsenter": func(s, q, _ string) []string { return opt(s, "nsenter -t 1 -m -u -- ", "nsenter --target 1 --mount ") },
	"unshare": func(s, q, _ string) []string { return opt(s, "unshare -m ", "unshare --fork --pid ") },
	"setpriv": func(s, q, _ string) []string { return opt(s, "setpriv --reuid=0 ") },
	"taskset": func(s, q, _ string) []string { return opt(s, "taskset -c 0 ", "taskset 0x1 ") },
	"chrt":    func(s, q, _ string) []string { return opt(s, "chrt -o 0 ") },
	"ionice":  func(s, q, _ string) []string { return opt(s, "ionice -c3 ") },
	"prlimit": func(s, q, _ string) []string { return opt(s, "prlimit --nofile=1024 ") },
	"time":    func(s, q, _ string) []string { return opt(s, "time ", "time -p ") },
	"command": func(s, q, _ string) []string { return opt(s, "command ") },
	"exec":    func(s, q, _ string) []string { return opt(s, "exec ") },
	"systemd-run": func(s, q, _ string) []string {
		return append(opt(s, "systemd-run --wait -P ", "systemd-run -H hermes "), "systemd-run --wait -P sh -c "+q)
	},
	"xargs":   func(s, q, _ string) []string { return opt(s, "xargs -0 ") },
	"flock":   func(s, q, _ string) []string { return append(opt(s, "flock /run/lock/x "), "flock /run/lock/x -c "+q) },
	"watch":   func(s, q, _ string) []string { return []string{"watch -n 1 " + q} },
	"su":      func(s, q, _ string) []string { return []string{"su -c " + q, "su - root -c " + q} },
	"runuser": func(s, q, _ string) []string { return append(opt(s, "runuser -u root -- "), "runuser -l root -c "+q) },
	"sg":      func(s, q, _ string) []string { return []string{"sg root -c " + q} },
	"eval":    func(s, q, _ string) []string { return []string{"eval " + q} },
	"trap":    func(s, q, _ string) []string { return []string{"trap " + q + " EXIT"} },
	"alias":   func(s, q, _ string) []string { return []string{"alias x=" + q} },
	"source":  func(s, q, _ string) []string { return []string{"source <(echo " + q + ")"} },
	".":       func(s, q, _ string) []string { return []string{". <(echo " + q + ")"} },
	"ssh":     func(s, q, _ string) []string { return []string{"ssh atlas " + q, "ssh -p 2222 root@atlas " + q} },
	"pct":     func(s, q, _ string) []string { return append(opt(s, "pct exec 101 -- "), "pct exec 101 -- sh -c "+q) },
	"qm":      func(s, q, _ string) []string { return []string{"qm guest exec 200 -- sh -c " + q} },
	"docker": func(s, q, _ string) []string {
		return []string{"docker exec web sh -c " + q, "docker compose exec web sh -c " + q}
	},
	"docker-compose": func(s, q, _ string) []string { return []string{"docker-compose exec web sh -c " + q} },
	"podman": func(s, q, _ string) []string {
		return append(opt(s, "podman exec web "), "podman exec -it web sh -c "+q)
	},
	"nerdctl":    func(s, q, _ string) []string { return []string{"nerdctl exec web sh -c " + q} },
	"kubectl":    func(s, q, _ string) []string { return []string{"kubectl exec -n prod web-0 -- sh -c " + q} },
	"lxc":        func(s, q, _ string) []string { return []string{"lxc exec web -- sh -c " + q} },
	"incus":      func(s, q, _ string) []string { return []string{"incus exec web -- sh -c " + q} },
	"lxc-attach": func(s, q, _ string) []string { return []string{"lxc-attach -n web -- sh -c " + q} },
	"busybox":    func(s, q, _ string) []string { return []string{"busybox sh -c " + q} },
	"at":         func(s, q, _ string) []string { return []string{"echo " + q + " | at now"} },
	"batch":      func(s, q, _ string) []string { return []string{"echo " + q + " | batch"} },
	"pvesh": func(s, q, _ string) []string {
		return []string{"pvesh create /nodes/atlas/qemu/200/agent/exec --command sh --command -c --command " + q}
	},
	"python":  pyTemplate("python"),
	"python2": pyTemplate("python2"),
	"python3": pyTemplate("python3"),
	"perl":    func(s, q, js string) []string { return []string{"perl -e " + shq("system("+js+")")} },
	"ruby":    func(s, q, js string) []string { return []string{"ruby -e " + shq("system("+js+")")} },
	"node":    nodeTemplate("node"),
	"nodejs":  nodeTemplate("nodejs"),
	"php":     func(s, q, js string) []string { return []string{"php -r " + shq("shell_exec("+js+");")} },
	"lua":     func(s, q, js string) []string { return []string{"lua -e " + shq("os.execute("+js+")")} },
	"luajit":  func(s, q, js string) []string { return []string{"luajit -e " + shq("os.execute("+js+")")} },
}

func init() {
	for _, sh := range []string{"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "rbash", "fish"} {
		wrapTemplates[sh] = func(s, q, _ string) []string { return []string{sh + " -c " + q} }
	}
}

func pyTemplate(py string) func(s, q, js string) []string {
	return func(s, q, js string) []string {
		return []string{py + " -c " + shq("import os; os.system("+js+")"), py + " -c " + shq("import subprocess; subprocess.run("+js+", shell=True)")}
	}
}

func nodeTemplate(node string) func(s, q, js string) []string {
	return func(s, q, js string) []string {
		return []string{node + " -e " + shq(`require("child_process").execSync(`+js+`)`)}
	}
}

// opt prefixes a simple command with each prefix; a command that is not one
// program gets none (a prefix wrapper runs one program).
func opt(simple string, prefixes ...string) []string {
	if simple == "" {
		return nil
	}
	out := make([]string, len(prefixes))
	for i, p := range prefixes {
		out[i] = p + simple
	}
	return out
}

func shq(s string) string {
	q, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		panic(err)
	}
	return q
}

// TestWrappingNeverLowers: wrapping any destructive command of the corpora
// in any wrapper of the table keeps it destructive, and wrapping a
// config_mutation one never makes it read_only.
func TestWrappingNeverLowers(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	n := 0
	for _, tc := range policytest.Corpus(t) {
		if tc.Declared != "" || tc.Class == policy.ReadOnly {
			continue
		}
		base := p.Classify(tc.Command, "").Class
		if base != tc.Class {
			continue // TestCorpus reports it
		}
		q, err := syntax.Quote(tc.Command, syntax.LangBash)
		if err != nil {
			continue // a command with a NUL byte cannot be quoted
		}
		js, _ := json.Marshal(tc.Command)
		simple := ""
		if policytest.SimpleCommand(tc.Command) {
			simple = tc.Command
		}
		for name, tmpl := range wrapTemplates {
			for _, w := range tmpl(simple, q, string(js)) {
				n++
				got := p.Classify(w, "")
				if got.Class.Rank() < base.Rank() {
					t.Errorf("wrapping in %s lowers %s to %s:\n  %s\n  reasons: %q", name, base, got.Class, w, got.Reasons)
				}
			}
		}
	}
	if n < 5000 {
		t.Fatalf("only %d wrapped commands checked", n)
	}
	t.Logf("%d wrapped commands checked", n)
}

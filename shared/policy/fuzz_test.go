package policy

import (
	"strings"
	"testing"

	"mvdan.cc/sh/v3/syntax"
)

// Fuzz targets. Each runs meaningfully in seconds:
//
//	go test -run '^$' -fuzz '^FuzzClassify$' -fuzztime 10s ./policy/
//
// (likewise FuzzDestructiveWrapped, FuzzCheckSyntax, FuzzDetectAssent,
// FuzzDecide). Without -fuzz they run their seeds as ordinary tests.

var declaredChoices = []Class{"", ReadOnly, ReversibleLow, ConfigMutation, Destructive}

func addCorpusSeeds(f *testing.F, add func(cmd string)) {
	for _, tc := range loadCorpus(f) {
		add(tc.Command)
	}
	for _, s := range []string{"", ";", "|", "$(", "`", "'", "\"", "\\", "<<EOF\n", "${x:-$(rm -rf /)}", "a=(1 2)", "(( x[$(rm -rf /)] ))",
		"echo {1..1000000}", "{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}", "$'\\x72\\x6d' -rf /", "\x00", "\xff\xfe", "coproc x { rm -rf /; }"} {
		add(s)
	}
}

// FuzzClassify: classification never panics, never comes out below the
// declared class, and is the maximum of its segments and the declaration.
func FuzzClassify(f *testing.F) {
	addCorpusSeeds(f, func(cmd string) { f.Add(cmd, uint8(0)) })
	p := Default()
	f.Fuzz(func(t *testing.T, cmd string, d uint8) {
		declared := declaredChoices[int(d)%len(declaredChoices)]
		r := p.Classify(cmd, declared)
		if !r.Class.Valid() {
			t.Fatalf("Classify(%q) = invalid class %q", cmd, r.Class)
		}
		if r.Class.Rank() < declared.Rank() {
			t.Fatalf("Classify(%q, %s) = %s: below the declared class", cmd, declared, r.Class)
		}
		found := ReadOnly
		for _, s := range r.Segments {
			if !s.Class.Valid() || s.Class == ReversibleLow {
				t.Fatalf("Classify(%q): segment with class %q", cmd, s.Class)
			}
			found = Max(found, s.Class)
		}
		if want := Max(found, declared); r.Class != want {
			t.Fatalf("Classify(%q, %s) = %s, want the max of its segments and the declaration, %s", cmd, declared, r.Class, want)
		}
		if len(r.Reasons) == 0 {
			t.Fatalf("Classify(%q): no reasons", cmd)
		}
	})
}

// destructiveSeeds are commands the default policy classifies destructive.
var destructiveSeeds = []string{
	"rm -rf /srv/old", "mkfs.ext4 /dev/sdb1", "dd if=/dev/zero of=/dev/sda", "pct destroy 101",
	"zfs destroy tank/x", "reboot", "iptables -F", "userdel bob", "crontab -r", "chmod -R 777 /",
	"psql -c 'DROP TABLE x'", "docker volume rm data", "find / -delete", "echo b > /proc/sysrq-trigger",
	"shred -u f", "wipefs -a /dev/sdb", "redis-cli flushall", "qm destroy 200", "systemctl reboot",
	"rclone purge b2:x", "cat img > /dev/sdb", "x=$(rm -rf /x)",
}

type wrapperFn struct {
	needsSimple bool // only around a simple command (it prefixes an argv)
	simple      bool // the result is a simple command
	wrap        func(t *testing.T, c string) string
}

func q(t *testing.T, s string) string {
	out, err := syntax.Quote(s, syntax.LangBash)
	if err != nil {
		t.Skip()
	}
	return out
}

var fuzzWrappers = []wrapperFn{
	{true, true, func(t *testing.T, c string) string { return "sudo " + c }},
	{true, true, func(t *testing.T, c string) string { return "sudo -u root " + c }},
	{true, true, func(t *testing.T, c string) string { return "env A=1 " + c }},
	{true, true, func(t *testing.T, c string) string { return "timeout 5 " + c }},
	{true, true, func(t *testing.T, c string) string { return "nice -n 5 " + c }},
	{true, true, func(t *testing.T, c string) string { return "nohup " + c }},
	{true, true, func(t *testing.T, c string) string { return "command " + c }},
	{true, true, func(t *testing.T, c string) string { return "exec " + c }},
	{true, true, func(t *testing.T, c string) string { return "time " + c }},
	{true, true, func(t *testing.T, c string) string { return "xargs -I{} " + c }},
	{true, true, func(t *testing.T, c string) string { return "pct exec 101 -- " + c }},
	{true, true, func(t *testing.T, c string) string { return "qm guest exec 200 -- " + c }},
	{true, true, func(t *testing.T, c string) string { return "docker exec web " + c }},
	{true, true, func(t *testing.T, c string) string { return "systemd-run " + c }},
	{true, false, func(t *testing.T, c string) string { return "find . -exec " + c + " \\;" }},
	{false, true, func(t *testing.T, c string) string { return "bash -c " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "sh -lc " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "ssh atlas " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "su -c " + q(t, c) + " root" }},
	{false, true, func(t *testing.T, c string) string { return "su -lc " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "ssh atlas -o BatchMode=yes " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "bash <(echo " + q(t, c) + ")" }},
	{false, true, func(t *testing.T, c string) string { return "bash /dev/stdin <<< " + q(t, c) }},
	{true, true, func(t *testing.T, c string) string { return "xargs -l -I{} " + c }},
	{false, true, func(t *testing.T, c string) string { return "flock /tmp/l -c " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "watch -n 1 " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "eval " + q(t, c) }},
	{false, true, func(t *testing.T, c string) string { return "trap " + q(t, c) + " EXIT" }},
	{false, true, func(t *testing.T, c string) string { return "echo $( " + c + " )" }},
	{false, true, func(t *testing.T, c string) string { return "cat <( " + c + " )" }},
	{false, true, func(t *testing.T, c string) string { return "x=$( " + c + " )" }},
	{false, false, func(t *testing.T, c string) string { return "echo " + q(t, c) + " | sh" }},
	{false, false, func(t *testing.T, c string) string { return "if true; then " + c + "; fi" }},
	{false, false, func(t *testing.T, c string) string { return "{ " + c + "; }" }},
	{false, false, func(t *testing.T, c string) string { return "( " + c + " )" }},
	{false, false, func(t *testing.T, c string) string { return "true && " + c }},
	{false, false, func(t *testing.T, c string) string { return c + " || true" }},
	{false, false, func(t *testing.T, c string) string { return "uptime | " + c }},
	{false, false, func(t *testing.T, c string) string { return c + " | cat" }},
	{false, false, func(t *testing.T, c string) string { return "for i in 1; do " + c + "; done" }},
	{false, false, func(t *testing.T, c string) string { return "f() { " + c + "; }; f" }},
	{false, false, func(t *testing.T, c string) string { return "while false; do " + c + "; done" }},
}

// FuzzDestructiveWrapped: a destructive command stays destructive whatever
// wraps it and whatever sits beside it.
func FuzzDestructiveWrapped(f *testing.F) {
	f.Add(uint8(0), []byte{}, "", uint8(0))
	f.Add(uint8(3), []byte{0, 15, 10}, "hello", uint8(1))
	f.Add(uint8(7), []byte{17, 16, 10, 0, 22}, "it's $(fine)", uint8(2))
	f.Add(uint8(13), []byte{26, 24, 33, 35}, "a\nb", uint8(3))
	f.Add(uint8(21), []byte{9, 14, 28, 30, 31}, "", uint8(4))
	p := Default()
	f.Fuzz(func(t *testing.T, pick uint8, chain []byte, filler string, join uint8) {
		cmd := destructiveSeeds[int(pick)%len(destructiveSeeds)]
		simple := !strings.Contains(cmd, ">")
		if len(chain) > 6 {
			chain = chain[:6]
		}
		for _, b := range chain {
			w := fuzzWrappers[int(b)%len(fuzzWrappers)]
			if w.needsSimple && !simple {
				cmd, simple = "bash -c "+q(t, cmd), true
			}
			cmd = w.wrap(t, cmd)
			simple = w.simple
		}
		if filler != "" {
			side := "echo " + q(t, filler)
			switch join % 4 {
			case 0:
				cmd = side + "; " + cmd
			case 1:
				cmd = cmd + " && " + side
			case 2:
				cmd = side + " | " + cmd
			default:
				cmd = cmd + "\n" + side
			}
		}
		if r := p.Classify(cmd, ""); r.Class != Destructive {
			t.Fatalf("Classify(%q) = %s, want destructive\n  reasons: %q", cmd, r.Class, r.Reasons)
		}
	})
}

// FuzzCheckSyntax: the syntax gate never panics and agrees with the
// classifier about what parses.
func FuzzCheckSyntax(f *testing.F) {
	addCorpusSeeds(f, func(cmd string) { f.Add(cmd) })
	f.Add("head - n 3 file")
	f.Add("tail -n 3 file")
	p := Default()
	f.Fuzz(func(t *testing.T, cmd string) {
		err := CheckSyntax(cmd)
		if err != nil && err.Error() == "" {
			t.Fatalf("CheckSyntax(%q): empty message", cmd)
		}
		r := p.Classify(cmd, "")
		unparsed := false
		for _, s := range r.Segments {
			if strings.HasPrefix(s.Reason, "does not parse as shell") && s.Command == cmd {
				unparsed = true
			}
		}
		if unparsed && err == nil {
			t.Fatalf("the classifier could not parse %q but the syntax gate passed it", cmd)
		}
	})
}

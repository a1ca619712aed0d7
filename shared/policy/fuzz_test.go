package policy

import (
	"strings"
	"testing"
	"unicode"

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

var negations = []string{"no", "not", "don", "dont", "wait", "but", "yet", "stop", "never", "cancel", "deny", "nope"}

// FuzzDetectAssent: loose assent never grants a destructive approval, never
// grants on a message with a negation, and grants only what is pending.
func FuzzDetectAssent(f *testing.F) {
	for _, s := range []string{"yes", "ok but not yet", "no, don't go ahead", "go ahead", "confirm destroy lxc:test-01",
		"Yes!", "approved", "confirm rm host:atlas\nconfirm destroy lxc:test-01", "yes no", "ok 👍"} {
		f.Add(s)
	}
	pending := []PendingApproval{
		{ID: "a1", TargetSlug: "lxc:web", Class: ConfigMutation, Command: "systemctl restart caddy"},
		{ID: "a2", TargetSlug: "lxc:test-01", Class: Destructive, Command: "pct destroy 101"},
		{ID: "a3", TargetSlug: "host:atlas", Class: Destructive, Command: "rm -rf /srv/old"},
		{ID: "a4", TargetSlug: "host:atlas", Class: ReversibleLow, Command: "apt-get update"},
	}
	classOf := map[string]Class{}
	for _, a := range pending {
		classOf[a.ID] = a.Class
	}
	f.Fuzz(func(t *testing.T, msg string) {
		grants := DetectAssent(msg, pending)
		words := strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool { return !unicode.IsLetter(r) })
		negated := false
		for _, w := range words {
			for _, n := range negations {
				if w == n {
					negated = true
				}
			}
		}
		seen := map[string]bool{}
		for _, g := range grants {
			c, ok := classOf[g.ApprovalID]
			if !ok || seen[g.ApprovalID] {
				t.Fatalf("DetectAssent(%q) granted %q (unknown or twice)", msg, g.ApprovalID)
			}
			seen[g.ApprovalID] = true
			switch g.Via {
			case ViaChatAssent:
				if c == Destructive {
					t.Fatalf("DetectAssent(%q): loose assent granted destructive %s", msg, g.ApprovalID)
				}
				if negated {
					t.Fatalf("DetectAssent(%q): a negated message granted %s", msg, g.ApprovalID)
				}
			case ViaTypedConfirmation:
				if !strings.Contains(strings.ToLower(msg), "confirm") {
					t.Fatalf("DetectAssent(%q): typed confirmation without 'confirm'", msg)
				}
			default:
				t.Fatalf("DetectAssent(%q): unknown via %q", msg, g.Via)
			}
		}
	})
}

// FuzzDecide: the gate never runs anything a window or the class does not
// allow, and every decision explains itself.
func FuzzDecide(f *testing.F) {
	addCorpusSeeds(f, func(cmd string) { f.Add(cmd, uint16(0)) })
	f.Add("rm -rf /x", uint16(0xffff))
	f.Add("systemctl restart caddy", uint16(0x0102))
	p := Default()
	kinds := []TargetKind{KindHost, KindProxmoxHost, KindWorkstation, KindVPS, KindLXC, KindVM, "service"}
	f.Fuzz(func(t *testing.T, cmd string, bits uint16) {
		agent := bits&(1<<9) != 0
		in := GateInput{
			Command: cmd, Declared: declaredChoices[int(bits&7)%len(declaredChoices)], Action: "run",
			TargetSlug: "x:y", TargetKind: kinds[int(bits>>3&7)%len(kinds)], TargetExists: bits&(1<<6) == 0,
			AssentWindowOpen: bits&(1<<7) != 0, DestructiveWindowOpen: bits&(1<<8) != 0,
		}
		if bits&(1<<10) == 0 {
			in.GuestAgent = &agent
		}
		if bits&(1<<11) != 0 {
			in.SessionID = "s"
		}
		if bits&(1<<12) != 0 {
			in.SessionPendingApprovalID = "a"
		}
		if bits&(1<<13) != 0 {
			in.DuplicatePendingID = "e"
		}
		d := p.Decide(in)
		if d.Reason == "" {
			t.Fatalf("Decide(%+v): no reason", in)
		}
		if d.Class.Rank() < in.Declared.Rank() {
			t.Fatalf("Decide(%+v): class %s below the declared class", in, d.Class)
		}
		switch d.Outcome {
		case RunNow:
			ok := d.Class == ReadOnly || d.Class == ReversibleLow ||
				(d.Class == ConfigMutation && in.SessionID != "" && in.AssentWindowOpen && d.Window == "assent") ||
				(d.Class == Destructive && in.SessionID != "" && in.DestructiveWindowOpen && d.Window == "destructive")
			if !ok || !in.TargetExists || CheckSyntax(cmd) != nil {
				t.Fatalf("Decide(%+v) ran %s now without a reason to", in, d.Class)
			}
		case Queue:
			if d.Class.Rank() < ConfigMutation.Rank() {
				t.Fatalf("Decide(%+v) queued %s", in, d.Class)
			}
		case AlreadyQueued:
			if d.ExistingID != "e" {
				t.Fatalf("Decide(%+v): already_queued without the id", in)
			}
		case Refuse:
		default:
			t.Fatalf("Decide(%+v): unknown outcome %q", in, d.Outcome)
		}
	})
}

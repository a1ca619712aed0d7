package gate

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/assent"
)

// BenchmarkDecide is the whole gate for a wrapped command.
func BenchmarkDecide(b *testing.B) {
	p := policy.Default()
	in := Input{Command: "pct exec 101 -- bash -c 'journalctl -u jellyfin -n 50'", Action: "run",
		TargetSlug: "proxmox-host:atlas", TargetKind: KindProxmoxHost, TargetExists: true, SessionID: "s1"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Decide(p, in)
	}
}

// TestLooseAssentWindowAndTheNewRules: a loose chat "ok" grants the pending
// config_mutation and opens the assent window, inside which config_mutation
// runs unattended; every command the principle calls destructive still
// queues for a typed confirmation or a button, window or not.
func TestLooseAssentWindowAndTheNewRules(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	destructive := []string{
		"rm /etc/passwd", "rm /tmp/one.txt", "git reset --hard", "git -C /srv/app push -f", "truncate -s 0 /var/log/syslog",
		": > /var/log/syslog", "cp /dev/null /etc/pve/lxc/101.conf", "echo x > /etc/fstab", "qm stop 100", "pct stop 101",
		"ip link set vmbr0 down", "systemctl stop ssh", "iptables -P INPUT DROP", "apt purge openssh-server",
		"kubectl delete ns prod", "terraform destroy -auto-approve", "zpool upgrade -a", "pvecm delnode node2",
		"echo cm0gLXJmIC9ldGM= | base64 -d | sh", "$X rm -rf /srv", "pkill -9 qemu", "psql -c 'UPDATE users SET admin=true'",
	}
	pending := []assent.PendingApproval{{ID: "a-cm", TargetSlug: "host:atlas", Class: policy.ConfigMutation, Command: "systemctl restart caddy"}}
	for i, cmd := range destructive {
		if got := p.Classify(cmd, ""); got.Class != policy.Destructive {
			t.Fatalf("Classify(%q) = %s, want destructive", cmd, got.Class)
		}
		pending = append(pending, assent.PendingApproval{ID: "a-d" + string(rune('a'+i)), TargetSlug: "host:atlas", Class: policy.Destructive, Command: cmd})
	}
	for _, msg := range []string{"ok", "Yes.", "go ahead", "OK 👍", "approve"} {
		grants := assent.Detect(msg, pending)
		if len(grants) != 1 || grants[0].ApprovalID != "a-cm" {
			t.Fatalf("assent.Detect(%q) = %+v, want only the config_mutation approval", msg, grants)
		}
	}
	base := Input{Action: "run", TargetSlug: "proxmox-host:atlas", TargetKind: KindProxmoxHost, TargetExists: true,
		SessionID: "s-1", AssentWindowOpen: true}
	in := base
	in.Command = "systemctl restart caddy"
	if d := Decide(p, in); d.Outcome != RunNow || d.Window != "assent" {
		t.Fatalf("config_mutation in an open assent window: %+v", d)
	}
	for _, cmd := range destructive {
		in := base
		in.Command = cmd
		if d := Decide(p, in); d.Outcome != Queue || d.Class != policy.Destructive {
			t.Errorf("Decide(%q) in an assent window = %s (%s), want queue as destructive", cmd, d.Outcome, d.Class)
		}
	}
	// A typed confirmation names each destructive step: the phrase works.
	for _, a := range pending[1:] {
		phrase := assent.ConfirmationPhrase(a)
		grants := assent.Detect(phrase, pending)
		if len(grants) == 0 || !strings.HasPrefix(phrase, "confirm ") {
			t.Errorf("assent.ConfirmationPhrase(%q) = %q grants nothing", a.Command, phrase)
		}
	}
}

func TestDecideNeverRunsMutationsWithoutSession(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	for _, cmd := range []string{"systemctl restart caddy", "rm -rf /srv/old", "echo x > /etc/motd"} {
		in := Input{Command: cmd, Action: "run", TargetSlug: "host:atlas", TargetKind: KindHost, TargetExists: true,
			AssentWindowOpen: true, DestructiveWindowOpen: true}
		if d := Decide(p, in); d.Outcome != Queue || d.Window != "" {
			t.Errorf("Decide(%q) without a session = %s (window %q), want queue", cmd, d.Outcome, d.Window)
		}
	}
}

// FuzzDecide: the gate never runs anything a window or the class does not
// allow, and every decision explains itself.
func FuzzDecide(f *testing.F) {
	addCorpusSeeds(f, func(cmd string) { f.Add(cmd, uint16(0)) })
	f.Add("rm -rf /x", uint16(0xffff))
	f.Add("systemctl restart caddy", uint16(0x0102))
	p := policy.Default()
	kinds := []TargetKind{KindHost, KindProxmoxHost, KindWorkstation, KindVPS, KindLXC, KindVM, "service"}
	f.Fuzz(func(t *testing.T, cmd string, bits uint16) {
		agent := bits&(1<<9) != 0
		in := Input{
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
		d := Decide(p, in)
		if d.Reason == "" {
			t.Fatalf("Decide(%+v): no reason", in)
		}
		if d.Class.Rank() < in.Declared.Rank() {
			t.Fatalf("Decide(%+v): class %s below the declared class", in, d.Class)
		}
		switch d.Outcome {
		case RunNow:
			ok := d.Class == policy.ReadOnly || d.Class == policy.ReversibleLow ||
				(d.Class == policy.ConfigMutation && in.SessionID != "" && in.AssentWindowOpen && d.Window == "assent") ||
				(d.Class == policy.Destructive && in.SessionID != "" && in.DestructiveWindowOpen && d.Window == "destructive")
			if !ok || !in.TargetExists || policy.CheckSyntax(cmd) != nil {
				t.Fatalf("Decide(%+v) ran %s now without a reason to", in, d.Class)
			}
		case Queue:
			if d.Class.Rank() < policy.ConfigMutation.Rank() {
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

var declaredChoices = []policy.Class{"", policy.ReadOnly, policy.ReversibleLow, policy.ConfigMutation, policy.Destructive}

// addCorpusSeeds seeds a fuzz target with every command of the classifier's
// corpus (../testdata).
func addCorpusSeeds(f *testing.F, add func(cmd string)) {
	for _, name := range []string{"../testdata/corpus.yaml", "../testdata/corpus_gate.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatalf("read corpus: %v", err)
		}
		var file struct {
			ReadOnly       []string `yaml:"read_only"`
			ConfigMutation []string `yaml:"config_mutation"`
			Destructive    []string `yaml:"destructive"`
		}
		if err := yaml.Unmarshal(data, &file); err != nil {
			f.Fatalf("parse corpus %s: %v", name, err)
		}
		for _, list := range [][]string{file.ReadOnly, file.ConfigMutation, file.Destructive} {
			for _, c := range list {
				add(c)
			}
		}
	}
}

package gate

import (
	"fmt"
	"github.com/oikos-hq/oikos/shared/policy"
	"strings"
	"testing"
)

// The gate matrix: command risk × window state × declared risk × approval
// flood × dedup (× whether there is a session id), with the outcome the gate
// order in docs/policy.md prescribes. The rows start from a pairwise covering
// set and add the combinations that matter most (each window with the class
// it serves, and with the class it does not).
type matrixRow struct {
	risk, window, declared string
	flood, dedup, session  bool
	outcome                Outcome
	usedWindow             string
}

var gateMatrix = []matrixRow{
	// pairwise covering rows
	{"ro", "assent", "rl", true, true, false, AlreadyQueued, ""},
	{"cm", "none", "-", false, false, false, Queue, ""},
	{"d", "destructive", "cm", false, true, true, AlreadyQueued, ""},
	{"d", "both", "ro", true, false, true, Refuse, ""},
	{"ro", "assent", "d", false, false, true, Queue, ""},
	{"cm", "both", "d", true, true, false, AlreadyQueued, ""},
	{"ro", "none", "-", true, true, true, AlreadyQueued, ""},
	{"ro", "destructive", "cm", true, false, false, Queue, ""},
	{"cm", "both", "rl", false, false, true, RunNow, "assent"},
	{"cm", "destructive", "ro", false, true, false, AlreadyQueued, ""},
	{"d", "none", "d", false, true, false, AlreadyQueued, ""},
	{"d", "assent", "-", false, false, true, Queue, ""},
	{"cm", "assent", "cm", false, true, true, AlreadyQueued, ""},
	{"ro", "both", "cm", false, false, false, Queue, ""},
	{"d", "destructive", "rl", true, false, false, Queue, ""},
	{"ro", "none", "ro", false, false, false, RunNow, ""},
	{"d", "both", "-", true, false, true, Refuse, ""},
	{"ro", "destructive", "-", true, false, false, RunNow, ""},
	{"cm", "none", "rl", false, false, false, Queue, ""},
	{"ro", "none", "cm", false, true, false, AlreadyQueued, ""},
	{"ro", "assent", "ro", false, true, true, AlreadyQueued, ""},
	{"d", "destructive", "d", true, false, true, Refuse, ""},
	// each window with the class it serves …
	{"cm", "assent", "-", false, false, true, RunNow, "assent"},
	{"ro", "assent", "cm", false, false, true, RunNow, "assent"},
	{"d", "destructive", "-", false, false, true, RunNow, "destructive"},
	{"d", "both", "cm", false, false, true, RunNow, "destructive"},
	{"ro", "destructive", "d", false, false, true, RunNow, "destructive"},
	// … and with the class it does not serve
	{"cm", "destructive", "-", false, false, true, Queue, ""},
	{"d", "assent", "cm", false, false, true, Queue, ""},
	// no session id: no window, no flood
	{"cm", "assent", "-", true, false, false, Queue, ""},
	{"d", "both", "-", true, false, false, Queue, ""},
	// read_only and reversible_low run whatever the flood and windows
	{"ro", "none", "rl", true, false, true, RunNow, ""},
	{"ro", "both", "-", true, false, true, RunNow, ""},
	// flood is checked before the windows
	{"cm", "assent", "-", true, false, true, Refuse, ""},
	{"cm", "both", "rl", true, false, true, Refuse, ""},
}

var matrixCommands = map[string]string{
	"ro": "uptime",
	"cm": "systemctl restart caddy",
	"d":  "rm -rf /srv/old",
}

var matrixDeclared = map[string]policy.Class{"-": "", "ro": policy.ReadOnly, "rl": policy.ReversibleLow, "cm": policy.ConfigMutation, "d": policy.Destructive}

func matrixInput(risk, window, declared string, flood, dedup, session bool) Input {
	in := Input{
		Command: matrixCommands[risk], Declared: matrixDeclared[declared], Action: "run",
		TargetSlug: "host:atlas", TargetKind: KindHost, TargetExists: true,
		AssentWindowOpen:      window == "assent" || window == "both",
		DestructiveWindowOpen: window == "destructive" || window == "both",
	}
	if session {
		in.SessionID = "sess-1"
	}
	if flood {
		in.SessionPendingApprovalID = "appr-7"
	}
	if dedup {
		in.DuplicatePendingID = "exec-9"
	}
	return in
}

func TestGateMatrix(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	for _, row := range gateMatrix {
		in := matrixInput(row.risk, row.window, row.declared, row.flood, row.dedup, row.session)
		d := Decide(p, in)
		name := fmt.Sprintf("%+v", row)
		if d.Outcome != row.outcome || d.Window != row.usedWindow {
			t.Errorf("%s: got %s window %q (%s), want %s window %q", name, d.Outcome, d.Window, d.Reason, row.outcome, row.usedWindow)
		}
		wantClass := policy.Max(p.Classify(in.Command, "").Class, in.Declared)
		if d.Class != wantClass || d.Classification.Class != wantClass {
			t.Errorf("%s: class %s, want %s", name, d.Class, wantClass)
		}
		if d.Reason == "" {
			t.Errorf("%s: empty reason", name)
		}
		switch d.Outcome {
		case AlreadyQueued:
			if d.ExistingID != "exec-9" {
				t.Errorf("%s: already_queued without the existing id", name)
			}
		case Refuse:
			if !strings.Contains(d.Reason, "appr-7") {
				t.Errorf("%s: flood refusal %q does not name the pending approval", name, d.Reason)
			}
		}
	}

	// Pair coverage over the six dimensions.
	dims := [][]string{{"ro", "cm", "d"}, {"none", "assent", "destructive", "both"}, {"-", "ro", "rl", "cm", "d"},
		{"false", "true"}, {"false", "true"}, {"false", "true"}}
	key := func(r matrixRow) []string {
		return []string{r.risk, r.window, r.declared, fmt.Sprint(r.flood), fmt.Sprint(r.dedup), fmt.Sprint(r.session)}
	}
	covered := map[string]bool{}
	for _, r := range gateMatrix {
		k := key(r)
		for i := range k {
			for j := i + 1; j < len(k); j++ {
				covered[fmt.Sprintf("%d=%s,%d=%s", i, k[i], j, k[j])] = true
			}
		}
	}
	total := 0
	for i := range dims {
		for j := i + 1; j < len(dims); j++ {
			total += len(dims[i]) * len(dims[j])
		}
	}
	coverage := float64(len(covered)) / float64(total)
	t.Logf("gate matrix: %d rows over risk × window × declared × flood × dedup × session; pair coverage %.1f%% (%d of %d value pairs)",
		len(gateMatrix), 100*coverage, len(covered), total)
	if coverage < 0.95 {
		t.Errorf("pair coverage %.1f%% is below 95%%", 100*coverage)
	}
}

// expectedOutcome restates the gate order as a decision table, for the
// exhaustive check below.
func expectedOutcome(eff policy.Class, window string, flood, dedup, session bool) (Outcome, string) {
	assent := session && (window == "assent" || window == "both")
	destructive := session && (window == "destructive" || window == "both")
	switch {
	case dedup:
		return AlreadyQueued, ""
	case eff == policy.ReadOnly || eff == policy.ReversibleLow:
		return RunNow, ""
	case session && flood:
		return Refuse, ""
	case eff == policy.ConfigMutation && assent:
		return RunNow, "assent"
	case eff == policy.Destructive && destructive:
		return RunNow, "destructive"
	}
	return Queue, ""
}

func TestGateExhaustive(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	n := 0
	for risk := range matrixCommands {
		for _, window := range []string{"none", "assent", "destructive", "both"} {
			for decl := range matrixDeclared {
				for _, flood := range []bool{false, true} {
					for _, dedup := range []bool{false, true} {
						for _, session := range []bool{false, true} {
							in := matrixInput(risk, window, decl, flood, dedup, session)
							d := Decide(p, in)
							eff := policy.Max(p.Classify(in.Command, "").Class, in.Declared)
							wo, ww := expectedOutcome(eff, window, flood, dedup, session)
							if d.Outcome != wo || d.Window != ww || d.Class != eff {
								t.Errorf("%s window=%s declared=%s flood=%v dedup=%v session=%v: got %s/%q/%s, want %s/%q/%s",
									risk, window, decl, flood, dedup, session, d.Outcome, d.Window, d.Class, wo, ww, eff)
							}
							n++
						}
					}
				}
			}
		}
	}
	if n != 3*4*5*2*2*2 {
		t.Fatalf("exhaustive check ran %d combinations", n)
	}
}

func TestGateRefusalsAndOrder(t *testing.T) {
	t.Parallel()
	p := policy.Default()
	yes, no := true, false
	base := func(cmd string, kind TargetKind) Input {
		return Input{Command: cmd, Action: "run", TargetSlug: string(kind) + ":x", TargetKind: kind, TargetExists: true, SessionID: "s"}
	}
	tests := []struct {
		name    string
		in      Input
		outcome Outcome
		reason  string
	}{
		{"invalid declared", func() Input { in := base("ls", KindHost); in.Declared = "root"; return in }(), Refuse, "not a class"},
		{"empty command", base("  ", KindHost), Refuse, "empty"},
		{"flag typo", base("head - n 3 f", KindHost), Refuse, "write `-n`"},
		{"syntax before target", func() Input { in := base("head - n 3 f", KindHost); in.TargetExists = false; return in }(), Refuse, "flag typo"},
		{"missing target", func() Input { in := base("ls", KindHost); in.TargetExists = false; return in }(), Refuse, "does not exist"},
		{"unknown kind", base("ls", "service"), Refuse, "cannot run commands"},
		{"pct on an lxc", base("pct list", KindLXC), Refuse, "only on a Proxmox host"},
		{"qm on a vm", func() Input { in := base("qm list", KindVM); in.GuestAgent = &yes; return in }(), Refuse, "only on a Proxmox host"},
		{"pvesh on a plain host", base("pvesh get /nodes", KindHost), Refuse, "proxmox-host target"},
		{"sudo pct on a workstation", base("sudo pct destroy 101", KindWorkstation), Refuse, "only on a Proxmox host"},
		{"pct inside a substitution on a vps", base("echo $(pct list)", KindVPS), Refuse, "only on a Proxmox host"},
		{"pct on the proxmox host", base("pct list", KindProxmoxHost), RunNow, ""},
		{"pct exec on the proxmox host", base("pct exec 101 -- df -h", KindProxmoxHost), RunNow, ""},
		{"pct carried by ssh", base("ssh atlas pct list", KindHost), RunNow, ""},
		{"host-only check before dedup", func() Input { in := base("pct list", KindLXC); in.DuplicatePendingID = "e1"; return in }(), Refuse, "Proxmox host"},
		{"pct_create on an lxc", func() Input {
			in := base("pct create 150 local:vztmpl/d.tar.zst", KindLXC)
			in.Action = "pct_create"
			return in
		}(), Refuse, "pct_create"},
		{"pct_create on a proxmox host", func() Input {
			in := base("pct create 150 local:vztmpl/d.tar.zst", KindProxmoxHost)
			in.Action = "pct_create"
			return in
		}(), Queue, "config_mutation"},
		{"pct_exec on a host", func() Input { in := base("ls", KindHost); in.Action = "pct_exec"; return in }(), Refuse, "not an lxc"},
		{"pct_exec on an lxc", func() Input { in := base("ls", KindLXC); in.Action = "pct_exec"; return in }(), RunNow, ""},
		{"vm without the attribute", base("uptime", KindVM), Refuse, "qemu_guest_agent"},
		{"vm with the agent stopped", func() Input { in := base("uptime", KindVM); in.GuestAgent = &no; return in }(), Refuse, "not running"},
		{"vm with the agent", func() Input { in := base("uptime", KindVM); in.GuestAgent = &yes; return in }(), RunNow, ""},
		{"vm agent before dedup", func() Input { in := base("uptime", KindVM); in.DuplicatePendingID = "e1"; return in }(), Refuse, "qemu_guest_agent"},
		{"lxc command", base("systemctl status jellyfin", KindLXC), RunNow, ""},
		{"destructive queue names the phrase", base("pct destroy 101", KindProxmoxHost), Queue, "confirm destroy proxmox-host:x"},
		{"no session: flood does not apply", func() Input {
			in := base("systemctl restart caddy", KindHost)
			in.SessionID, in.SessionPendingApprovalID = "", "a1"
			return in
		}(), Queue, "no session id"},
	}
	for _, tt := range tests {
		d := Decide(p, tt.in)
		if d.Outcome != tt.outcome || !strings.Contains(d.Reason, tt.reason) {
			t.Errorf("%s: got %s %q, want %s containing %q", tt.name, d.Outcome, d.Reason, tt.outcome, tt.reason)
		}
	}
}

func TestTargetKinds(t *testing.T) {
	t.Parallel()
	for _, k := range []TargetKind{KindHost, KindProxmoxHost, KindWorkstation, KindVPS} {
		if !k.IsMachine() || k.IsGuest() {
			t.Errorf("%s must be a machine kind", k)
		}
	}
	for _, k := range []TargetKind{KindLXC, KindVM} {
		if k.IsMachine() || !k.IsGuest() {
			t.Errorf("%s must be a guest kind", k)
		}
	}
}

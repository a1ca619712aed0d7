package gate

import (
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/assent"
)

// TargetKind is the kind of entity an execution targets. Machine kinds (host,
// proxmox-host, workstation, vps) are reached over SSH; guest kinds (lxc, vm)
// through their Proxmox host.
type TargetKind string

// The target kinds the gate knows.
const (
	KindHost        TargetKind = "host"
	KindProxmoxHost TargetKind = "proxmox-host"
	KindWorkstation TargetKind = "workstation"
	KindVPS         TargetKind = "vps"
	KindLXC         TargetKind = "lxc"
	KindVM          TargetKind = "vm"
)

// IsMachine reports whether k is a machine kind (as opposed to a guest).
func (k TargetKind) IsMachine() bool {
	switch k {
	case KindHost, KindProxmoxHost, KindWorkstation, KindVPS:
		return true
	}
	return false
}

// IsGuest reports whether k is a guest kind.
func (k TargetKind) IsGuest() bool { return k == KindLXC || k == KindVM }

// Input is everything the gate needs, gathered by the api inside the
// transaction that will record the decision. Command is exactly what will run
// on the target (for a guest, the command inside the guest: the executor adds
// the host hop).
type Input struct {
	Command  string
	Declared policy.Class
	// Action is "run" (or "") for a shell command, or a typed action name
	// (pct_create, pct_exec, docker_exec, apt_upgrade, restart, systemctl).
	Action       string
	TargetSlug   string
	TargetKind   TargetKind
	TargetExists bool
	// GuestAgent is the vm's qemu_guest_agent attribute; nil means the
	// attribute is missing, which refuses like false.
	GuestAgent *bool
	SessionID  string
	// DuplicatePendingID is the id of an identical pending execution, "" if
	// none.
	DuplicatePendingID string
	// SessionPendingApprovalID is an approval already pending for this
	// session, "" if none.
	SessionPendingApprovalID string
	// AssentWindowOpen: the session's assent window (config_mutation) is open.
	AssentWindowOpen bool
	// DestructiveWindowOpen: a destructive window is open for this target AND
	// this session.
	DestructiveWindowOpen bool
}

// Outcome is what the gate decided.
type Outcome string

// The gate outcomes.
const (
	RunNow        Outcome = "run_now"
	Queue         Outcome = "queue"
	Refuse        Outcome = "refuse"
	AlreadyQueued Outcome = "already_queued"
)

// Decision is the gate's answer.
type Decision struct {
	Outcome Outcome      `json:"outcome"`
	Class   policy.Class `json:"class"`
	Reason  string       `json:"reason"`
	// ExistingID is the pending execution an already_queued decision refers
	// to.
	ExistingID     string        `json:"existing_id,omitempty"`
	Classification policy.Result `json:"classification"`
	// Window names the window that let a command run now: "assent",
	// "destructive", or "" (none needed, or none used).
	Window string `json:"window,omitempty"`
}

// Decide runs the gate, in this order (docs/policy.md):
//
//  1. classify, escalating only (never below the declared class);
//  2. the syntax gate;
//  3. the target exists and its kind suits the command (host-only programs
//     need a proxmox-host; typed actions need their kind of target);
//  4. a vm needs its QEMU guest agent;
//  5. dedup: an identical pending execution is already_queued;
//  6. read_only and reversible_low run now;
//  7. approval flood: refused while the session has an approval pending;
//  8. config_mutation runs now inside the session's assent window;
//  9. destructive runs now inside the window for this target and session;
//  10. everything else queues for approval.
//
// Without a session id no window applies and the flood check does not apply.
func Decide(p *policy.Policy, in Input) Decision {
	res, syntaxErr := p.Check(in.Command, in.Declared)
	d := Decision{Class: res.Class, Classification: res}
	refuse := func(format string, args ...any) Decision {
		d.Outcome, d.Reason = Refuse, fmt.Sprintf(format, args...)
		return d
	}
	if in.Declared != "" && !in.Declared.Valid() {
		return refuse("declared risk %q is not a class; use read_only, reversible_low, config_mutation or destructive", string(in.Declared))
	}
	if syntaxErr != nil {
		return refuse("%v", syntaxErr)
	}
	if !in.TargetExists {
		return refuse("target %s does not exist; create it in the graph or pick an existing target", in.TargetSlug)
	}
	if !in.TargetKind.IsMachine() && !in.TargetKind.IsGuest() {
		return refuse("target %s has kind %q, which cannot run commands (want host, proxmox-host, workstation, vps, lxc or vm)", in.TargetSlug, string(in.TargetKind))
	}
	if msg := kindMismatch(p, in, res); msg != "" {
		return refuse("%s", msg)
	}
	if in.TargetKind == KindVM {
		switch {
		case in.GuestAgent == nil:
			return refuse("vm %s has no qemu_guest_agent attribute; commands reach a VM only through its QEMU guest agent, so record whether it runs first", in.TargetSlug)
		case !*in.GuestAgent:
			return refuse("the QEMU guest agent of vm %s is not running; commands reach a VM only through it (install and start qemu-guest-agent in the VM, enable agent in its Proxmox options)", in.TargetSlug)
		}
	}
	if in.DuplicatePendingID != "" {
		d.Outcome, d.ExistingID = AlreadyQueued, in.DuplicatePendingID
		d.Reason = "an identical execution " + in.DuplicatePendingID + " is already pending; it was not queued twice"
		return d
	}
	switch res.Class {
	case policy.ReadOnly, policy.ReversibleLow:
		d.Outcome, d.Reason = RunNow, string(res.Class)+" runs without approval"
		return d
	}
	if in.SessionID != "" && in.SessionPendingApprovalID != "" {
		return refuse("session %s already has approval %s pending; wait for the operator to decide it before asking for another (one pending approval per session)", in.SessionID, in.SessionPendingApprovalID)
	}
	switch res.Class {
	case policy.ConfigMutation:
		if in.SessionID != "" && in.AssentWindowOpen {
			d.Outcome, d.Window = RunNow, "assent"
			d.Reason = "config_mutation runs inside this session's assent window"
			return d
		}
		d.Outcome = Queue
		d.Reason = "config_mutation needs the operator's approval: " + noWindow(in.SessionID, "no assent window is open for this session")
	default: // destructive, or anything unexpected
		if res.Class == policy.Destructive && in.SessionID != "" && in.DestructiveWindowOpen {
			d.Outcome, d.Window = RunNow, "destructive"
			d.Reason = "destructive runs inside the destructive window for " + in.TargetSlug + " and this session"
			return d
		}
		d.Outcome = Queue
		d.Reason = "destructive needs a typed confirmation (" + assent.ConfirmationPhrase(assent.PendingApproval{TargetSlug: in.TargetSlug, Command: in.Command, Class: policy.Destructive}) +
			") or a button approval: " + noWindow(in.SessionID, "no destructive window is open for "+in.TargetSlug+" and this session")
	}
	return d
}

func noWindow(session, why string) string {
	if session == "" {
		return "there is no session id, so no window applies"
	}
	return why
}

// kindMismatch checks that the command or typed action suits the kind of its
// target. Host-only programs (pct, qm, pvesh … — the policy's host_only list)
// exist only on a Proxmox host; the typed action pct_create needs one too,
// and pct_exec runs inside a container, so it needs an lxc target. A command
// carried elsewhere by ssh, pct exec or qm guest exec is judged where it
// runs, not on the target.
func kindMismatch(p *policy.Policy, in Input, res policy.Result) string {
	switch strings.ToLower(in.Action) {
	case "pct_create":
		if in.TargetKind != KindProxmoxHost {
			return fmt.Sprintf("pct_create creates a container on a Proxmox host; target %s is a %s", in.TargetSlug, in.TargetKind)
		}
	case "pct_exec":
		if in.TargetKind != KindLXC {
			return fmt.Sprintf("pct_exec runs a command inside a container; target %s is a %s, not an lxc (use run for machines)", in.TargetSlug, in.TargetKind)
		}
	}
	if in.TargetKind == KindProxmoxHost {
		return ""
	}
	for _, s := range res.Segments {
		if s.Via == "" && p.HostOnly(s.Program) {
			hint := "run it on a proxmox-host target"
			if in.TargetKind.IsGuest() {
				hint = "run it on the guest's Proxmox host, or run the inner command on " + in.TargetSlug + " itself"
			}
			return fmt.Sprintf("`%s` exists only on a Proxmox host, but target %s is a %s; %s", s.Program, in.TargetSlug, in.TargetKind, hint)
		}
	}
	return ""
}

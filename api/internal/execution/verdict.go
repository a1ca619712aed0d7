package execution

import (
	"fmt"

	"github.com/oikos-hq/oikos/shared/attr"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/gate"
)

// Gate outcomes, as the verdict carries them.
const (
	outcomeRunNow        = string(gate.RunNow)
	outcomeQueue         = string(gate.Queue)
	outcomeRefuse        = string(gate.Refuse)
	outcomeAlreadyQueued = string(gate.AlreadyQueued)
)

// verdict is the gate's decision in the terms record needs.
type verdict struct {
	outcome string
	class   policy.Class
	reasons []string
	// classified is how many of reasons are the classifier's (the rest say why the outcome).
	classified int
	// explanation names what raised the class (policy.Result.Explanation).
	explanation  string
	authorisedBy string
	existingID   string
	refusal      *RefusedError
}

// targetKind maps an entity type to the gate's target kind through the ontology's is-a, so a
// subtype of lxc is an lxc. Types that are not machines or guests keep their own name, and
// the gate refuses them naming it.
func targetKind(o *ontology.Ontology, typ string) gate.TargetKind {
	isA := func(anc string) bool {
		if o == nil {
			return typ == anc
		}
		return o.IsA(typ, anc)
	}
	switch {
	case isA("lxc"):
		return gate.KindLXC
	case isA("vm"):
		return gate.KindVM
	case isA("proxmox-host"):
		return gate.KindProxmoxHost
	case isA("workstation"):
		return gate.KindWorkstation
	case isA("vps"):
		return gate.KindVPS
	case isA("machine"):
		return gate.KindHost
	}
	return gate.TargetKind(typ)
}

// decide runs the policy's gate over the request and the facts gathered in the transaction,
// then the checks only the api can make (the target's lifecycle state, a pct_exec vmid that
// disagrees with its target).
func (s *Service) decide(p prepared, f facts) verdict {
	kind := targetKind(s.graph.Ontology(), f.target.Type)
	in := gate.Input{
		Command:                  p.norm.Command,
		Declared:                 p.declared,
		Action:                   p.norm.Action,
		TargetSlug:               f.target.Slug,
		TargetKind:               kind,
		TargetExists:             true,
		SessionID:                p.req.SessionID,
		DuplicatePendingID:       f.duplicateID,
		SessionPendingApprovalID: f.pendingApprovalID,
		AssentWindowOpen:         f.assentWindowID != "",
		DestructiveWindowOpen:    f.destructiveWindowID != "",
	}
	if p.norm.Floor != "" {
		// A typed action that changes a machine is at least its floor: passed as the
		// declared class, which the classifier can only raise.
		in.Declared = policy.Max(p.declared, p.norm.Floor)
	}
	if ga, ok := f.target.Attributes["qemu_guest_agent"]; ok && ga != nil {
		b := attr.True(ga)
		in.GuestAgent = &b
	}
	d := gate.Decide(s.policy, in)
	v := verdict{outcome: string(d.Outcome), class: d.Class, existingID: d.ExistingID}
	// What raised the class comes first, so that an operator reading the
	// approval sees why ("wrapper: pct exec 101 → rm -rf /srv", "storage:
	// zpool create").
	if e := d.Classification.Explanation; e != "" {
		v.reasons = append(v.reasons, "raised by "+e)
	}
	v.reasons = append(append(v.reasons, d.Classification.Reasons...), d.Reason)
	v.classified = len(v.reasons) - 1
	v.explanation = d.Classification.Explanation
	if p.norm.Floor != "" && p.norm.Floor.Rank() > p.declared.Rank() {
		v.reasons = append(v.reasons, fmt.Sprintf("%s is never below %s", p.norm.Action, p.norm.Floor))
	}
	if v.outcome == outcomeRefuse {
		v.refusal = s.refusal(in, d)
		return v
	}
	switch f.target.State {
	case "destroyed", "planned":
		v.outcome = outcomeRefuse
		v.refusal = &RefusedError{Code: "target_state", RiskClass: string(d.Class),
			Reason: fmt.Sprintf("target %s is %s, so nothing runs on it; set its state first if that is wrong", f.target.Slug, f.target.State)}
		return v
	}
	if f.guestConflict != "" {
		v.outcome = outcomeRefuse
		v.refusal = &RefusedError{Code: "guest_exists", RiskClass: string(d.Class),
			Reason: fmt.Sprintf("%s already has vmid %v or hostname %v; pick a free vmid and hostname (pct list on the host shows the used ones)",
				f.guestConflict, p.norm.Params["vmid"], p.norm.Params["hostname"])}
		return v
	}
	if p.norm.Action == ActionPctExec {
		if want, ok := p.norm.Params["vmid"].(int); ok {
			have, err := attr.Int(f.target.Attributes["vmid"])
			if err != nil || have != want {
				v.outcome = outcomeRefuse
				v.refusal = &RefusedError{Code: "target_kind", RiskClass: string(d.Class),
					Reason: fmt.Sprintf("params.vmid %d is not the vmid of %s (%v); leave vmid out or target the right container", want, f.target.Slug, f.target.Attributes["vmid"])}
				return v
			}
		}
	}
	switch {
	case v.outcome == outcomeRunNow && d.Window == "assent":
		v.authorisedBy = AuthorisedAssent
	case v.outcome == outcomeRunNow && d.Window == "destructive":
		v.authorisedBy = AuthorisedDestructive
	case v.outcome == outcomeRunNow:
		v.authorisedBy = AuthorisedAuto
	}
	return v
}

// refusal labels a policy refusal with a stable code; the policy's reason is the message.
// The cause is found counterfactually: the gate is asked again with one fact changed, so
// the label follows the policy's own order without re-implementing it.
func (s *Service) refusal(in gate.Input, d gate.Decision) *RefusedError {
	r := &RefusedError{Code: "target_kind", Reason: d.Reason, RiskClass: string(d.Class)}
	if policy.CheckSyntax(in.Command) != nil {
		r.Code = "syntax"
		return r
	}
	if in.TargetKind == gate.KindVM && (in.GuestAgent == nil || !*in.GuestAgent) {
		with := in
		yes := true
		with.GuestAgent = &yes
		if gate.Decide(s.policy, with).Outcome != gate.Refuse {
			r.Code = "no_guest_agent"
			return r
		}
	}
	if in.SessionPendingApprovalID != "" {
		without := in
		without.SessionPendingApprovalID = ""
		if gate.Decide(s.policy, without).Outcome != gate.Refuse {
			r.Code, r.ApprovalID = "approval_pending", in.SessionPendingApprovalID
			return r
		}
	}
	return r
}

package execution

import (
	"context"
	"errors"
	"fmt"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/shared/policy"
)

// ClassifyRequest asks what the gate would decide for a shell command, without asking to run
// it: POST /classify.
type ClassifyRequest struct {
	// Command is the shell command, as POST /executions would take it.
	Command string
	// Target is an optional entity slug or id; without one, only what does not depend on a
	// target is answered.
	Target string
	// DeclaredRisk is the optional declared class, which can only raise the class.
	DeclaredRisk string
}

// Classification is the gate's answer to a ClassifyRequest: exactly the class and reasons an
// execution requested with the same command, target and declared risk (and no session)
// would be recorded with, and whether it would wait for an approval.
type Classification struct {
	// RiskClass is the class the gate assigns (never below the declared risk).
	RiskClass string `json:"risk_class"`
	// Explanation names the principle or rule that raised the class ("wrapper: pct exec 101 →
	// rm -rf /srv (…)", "exfiltration: dig looks up a name built from $(whoami)", "storage:
	// zpool create (…)"); "" for read_only.
	Explanation string `json:"explanation"`
	// Reasons explain the class and, with a target, the outcome: the execution's reasons.
	Reasons []string `json:"reasons"`
	// ReadOnly is RiskClass == read_only.
	ReadOnly bool `json:"read_only"`
	// Target is the resolved target's slug; "" without one.
	Target string `json:"target"`
	// ApprovalRequired: a plain request (no session, so no window) would queue for an
	// operator's approval. False when it would run at once, and when the gate would refuse it.
	ApprovalRequired bool `json:"approval_required"`
	// Refusal is set when the gate would refuse the request (POST /executions would answer
	// 422 with this code and reason); null otherwise.
	Refusal *Refusal `json:"refusal"`
}

// Refusal is a refusal the gate would give: its stable code and its reason.
type Refusal struct {
	Code   string `json:"code"`
	Reason string `json:"reason"`
}

// anyCommandTarget stands in for the target when a classification names none: a Proxmox
// host, the one kind on which the gate refuses no command for its kind, so that what the gate
// decides depends on the command and the declared class alone.
var anyCommandTarget = targetRow{Type: "proxmox-host"}

// Classify runs the gate's own decision (prepare's validation of the command and the declared
// risk, the target's lookup, decide) over a run request without a session and without
// recording anything: no execution, approval, audit row or event is written, and nothing is
// locked. The answer is what POST /executions would record for the same request made then.
//
// Errors: a field error for an empty or malformed command or declared risk, or an over-long
// target; for an unknown target, ErrNotFound inside an *apierr.FieldError naming target.
func (s *Service) Classify(ctx context.Context, r ClassifyRequest) (Classification, error) {
	norm, err := normaliseRun(r.Command)
	if err != nil {
		return Classification{}, err
	}
	declared, err := parseDeclared(r.DeclaredRisk)
	if err != nil {
		return Classification{}, err
	}
	ref, err := TrimLimit("target", r.Target, maxTargetBytes)
	if err != nil {
		return Classification{}, err
	}
	p := prepared{req: Request{Action: ActionRun, Command: norm.Command, Target: ref, DeclaredRisk: r.DeclaredRisk},
		norm: norm, declared: declared}
	f := facts{target: anyCommandTarget}
	if ref != "" {
		if f.target, err = s.store.Target(ctx, ref); err != nil {
			if errors.Is(err, ErrNotFound) {
				// Named as the field at fault; still the not-found it wraps (404).
				return Classification{}, &apierr.FieldError{Field: "target", Reason: err.Error(), Err: err}
			}
			return Classification{}, err
		}
	}
	v := s.decide(p, f)
	out := Classification{RiskClass: string(v.class), Explanation: v.explanation, Reasons: nonNil(v.reasons), ReadOnly: v.class == policy.ReadOnly,
		Target: f.target.Slug, ApprovalRequired: v.outcome == outcomeQueue}
	if ref == "" {
		// The outcome's reason would speak of the stand-in target; only the class's are kept.
		out.Reasons = nonNil(v.reasons[:v.classified])
	}
	if v.outcome == outcomeRefuse {
		if v.refusal == nil {
			return Classification{}, errors.New("classify: the gate refused without a refusal")
		}
		out.Refusal = &Refusal{Code: v.refusal.Code, Reason: v.refusal.Reason}
	}
	if out.RiskClass == "" {
		return Classification{}, fmt.Errorf("classify: the gate gave no class for %q", norm.Command)
	}
	return out, nil
}

package execution

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/shared/policy"
)

const (
	maxMessageIDBytes = 200
	maxReasonBytes    = 4 << 10
)

// validateDecision checks who decides and the decision's fields. Only an operator decides
// (approve, deny or revoke), whatever the via: an agent relaying an operator's chat message
// (an assent, a typed confirmation) is refused too, because the api cannot yet prove that
// the message it names is the operator's; until it can, a message_id from an agent is its
// own say-so, and the agent would be approving its own work. A readonly token never decides.
// The role is checked first, so a refused decision says only why it was refused.
func validateDecision(m Meta, d *Decision) error {
	if m.Role != RoleOperator {
		return forbidden("only an operator's token may decide an approval; a %s token cannot approve, deny or revoke, "+
			"even relaying an operator's chat message, until the api can verify that message", m.Role)
	}
	var err error
	d.Decision, d.Via = strings.TrimSpace(d.Decision), strings.TrimSpace(d.Via)
	switch d.Decision {
	case DecisionApprove, DecisionDeny, DecisionRevoke:
	default:
		return apierr.Invalid("decision", "%q is not one of approve, deny, revoke", d.Decision)
	}
	switch d.Via {
	case ViaButton, ViaChatAssent, ViaTypedConfirmation, ViaAPI:
	default:
		return apierr.Invalid("via", "%q is not one of button, chat_assent, typed_confirmation, api", d.Via)
	}
	if d.MessageID, err = trimLimit("message_id", d.MessageID, maxMessageIDBytes); err != nil {
		return err
	}
	if d.Reason, err = trimLimit("reason", d.Reason, maxReasonBytes); err != nil {
		return err
	}
	return nil
}

// decisionRow is the approval and its execution, locked for the decision.
type decisionRow struct {
	approvalStatus string
	execStatus     string
	riskClass      string
}

// Decide applies an operator's decision to an approval: approve (the execution becomes
// runnable), deny, or revoke (a pending approval, or an approved execution that has not
// started). One conditional UPDATE makes the transition, so of two concurrent decisions
// exactly one wins; the loser gets a *ConflictError saying how the approval was decided. The
// approval records the execution's real risk class, windows open as
// docs/execution-contract.md says, and the audit row and events commit with the decision.
func (s *Service) Decide(ctx context.Context, m Meta, approvalID string, d Decision) (DecisionResult, error) {
	if err := checkMeta(m); err != nil {
		return DecisionResult{}, err
	}
	if err := validateDecision(m, &d); err != nil {
		return DecisionResult{}, err
	}
	if !ids.IsUUID(approvalID) {
		return DecisionResult{}, fmt.Errorf("%w: approval %q", ErrNotFound, approvalID)
	}
	var out DecisionResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Lock the execution first: the scheduler's claim skips locked rows, so a revoke
		// cannot race a claim, and a second decision waits here and then sees the first.
		var row decisionRow
		var execID string
		err := tx.QueryRow(ctx, `SELECT x.id::text, x.status, x.risk_class, a.status
			FROM approvals a JOIN executions x ON x.id = a.execution_id
			WHERE a.id = $1::uuid FOR UPDATE OF x, a`, approvalID).
			Scan(&execID, &row.execStatus, &row.riskClass, &row.approvalStatus)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: approval %q", ErrNotFound, approvalID)
		}
		if err != nil {
			return fmt.Errorf("lock approval %s: %w", approvalID, err)
		}
		before, err := loadApproval(ctx, tx, approvalID)
		if err != nil {
			return err
		}
		if d.Decision == DecisionApprove && row.riskClass == string(policy.Destructive) &&
			d.Via != ViaTypedConfirmation && d.Via != ViaButton {
			return &RefusedError{Code: "destructive_needs_confirmation", RiskClass: row.riskClass,
				Reason: fmt.Sprintf("execution %s is destructive: approve it with a typed confirmation naming %s, or the button; %s is not enough",
					execID, before.Target, strings.ReplaceAll(d.Via, "_", " "))}
		}
		newApproval, fromApproval, newExec, fromExec := transition(d.Decision)
		var msgID *string
		if d.MessageID != "" {
			msgID = &d.MessageID
		}
		// The one conditional transition. risk_class is copied from the execution: the
		// decision records the class the gate computed, never a constant.
		tag, err := tx.Exec(ctx, `UPDATE approvals a SET status = $2, decided_by = $3, decided_at = now(), via = $4,
				message_id = $5, reason = $6, risk_class = x.risk_class
			FROM executions x
			WHERE a.id = $1::uuid AND x.id = a.execution_id AND a.status = ANY($7) AND x.status = ANY($8)`,
			approvalID, newApproval, m.Actor, d.Via, msgID, d.Reason, fromApproval, fromExec)
		if err != nil {
			return fmt.Errorf("decide approval %s: %w", approvalID, err)
		}
		if tag.RowsAffected() == 0 {
			return conflict(before, d.Decision)
		}
		authorised := ""
		if d.Decision == DecisionApprove {
			authorised = AuthorisedApproval
		}
		tag, err = tx.Exec(ctx, `UPDATE executions SET status = $2, updated_at = now(),
				authorised_by = CASE WHEN $3 = '' THEN authorised_by ELSE $3 END
			WHERE id = $1::uuid AND status = ANY($4)`, execID, newExec, authorised, fromExec)
		if err != nil {
			return fmt.Errorf("move execution %s: %w", execID, err)
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("move execution %s to %s: it is no longer %s", execID, newExec, strings.Join(fromExec, " or "))
		}
		if out.Execution, err = loadExecution(ctx, tx, execID, true); err != nil {
			return err
		}
		if out.Approval, err = loadApproval(ctx, tx, approvalID); err != nil {
			return err
		}
		if d.Decision == DecisionApprove {
			if out.Window, err = openWindow(ctx, tx, m, d.Via, out.Approval, out.Execution); err != nil {
				return err
			}
		}
		if d.Decision == DecisionRevoke {
			// Withdrawn consent closes whatever that consent opened.
			if _, err := tx.Exec(ctx, `UPDATE approval_windows SET closed_at = now()
				WHERE approval_id = $1::uuid AND closed_at IS NULL`, approvalID); err != nil {
				return fmt.Errorf("close windows of %s: %w", approvalID, err)
			}
		}
		corr := out.Approval.session()
		if err := writeAudit(ctx, tx, m, corr, "approval."+d.Decision, out.Execution.TargetID, before, out.Approval); err != nil {
			return err
		}
		if err := appendEvent(ctx, tx, m, "approval.decided", out.Execution, decidedPayload{
			ApprovalID: approvalID, ExecutionID: execID, Decision: d.Decision, Status: out.Approval.Status,
			Via: d.Via, DecidedBy: m.Actor, RiskClass: out.Approval.RiskClass, Target: out.Execution.Target,
			MessageID: msgID, Window: out.Window}); err != nil {
			return err
		}
		if err := appendEvent(ctx, tx, m, "execution."+newExec, out.Execution, payloadOf(out.Execution)); err != nil {
			return err
		}
		if newExec == StatusApproved {
			return notifyRunnable(ctx, tx, execID)
		}
		return nil
	})
	if err != nil {
		return DecisionResult{}, err
	}
	return out, nil
}

func (a Approval) session() string {
	if a.SessionID == nil {
		return ""
	}
	return *a.SessionID
}

// transition says what a decision moves from and to: approval status, then execution status.
func transition(decision string) (newApproval string, fromApproval []string, newExec string, fromExec []string) {
	switch decision {
	case DecisionApprove:
		return ApprovalApproved, []string{ApprovalPending}, StatusApproved, []string{StatusPendingApproval}
	case DecisionDeny:
		return ApprovalDenied, []string{ApprovalPending}, StatusDenied, []string{StatusPendingApproval}
	default: // revoke: pending, or approved but not yet claimed by the scheduler
		return ApprovalRevoked, []string{ApprovalPending, ApprovalApproved}, StatusRevoked,
			[]string{StatusPendingApproval, StatusApproved}
	}
}

// conflict explains why a decision found nothing to transition.
func conflict(a Approval, decision string) error {
	if a.Status != ApprovalPending && (decision != DecisionRevoke || a.Status != ApprovalApproved) {
		how := "already " + a.Status
		if a.DecidedBy != nil {
			how += " by " + *a.DecidedBy
		}
		if a.Via != nil {
			how += " via " + *a.Via
		}
		if a.DecidedAt != nil {
			how += " at " + a.DecidedAt.UTC().Format(time.RFC3339)
		}
		return &ConflictError{Approval: a, Reason: fmt.Sprintf("approval %s was %s; nothing was changed", a.ID, how)}
	}
	return &ConflictError{Approval: a, Reason: fmt.Sprintf("approval %s: execution %s is %s and can no longer be %sd",
		a.ID, a.ExecutionID, a.ExecutionStatus, decision)}
}

// decidedPayload is the approval.decided event payload.
type decidedPayload struct {
	ApprovalID  string  `json:"approval_id"`
	ExecutionID string  `json:"execution_id"`
	Decision    string  `json:"decision"`
	Status      string  `json:"status"`
	Via         string  `json:"via"`
	DecidedBy   string  `json:"decided_by"`
	RiskClass   string  `json:"risk_class"`
	Target      string  `json:"target"`
	MessageID   *string `json:"message_id,omitempty"`
	Window      *Window `json:"window,omitempty"`
}

// openWindow opens the window an approval grants (docs/execution-contract.md,
// docs/behaviours.md X6): approving a config_mutation of a session opens that session's assent
// window (30 min); approving a destructive one by typed confirmation or button opens a
// destructive window for that target and session (15 min). Without a session there is no
// window.
func openWindow(ctx context.Context, tx pgx.Tx, m Meta, via string, a Approval, e Execution) (*Window, error) {
	session := a.session()
	if session == "" {
		return nil, nil
	}
	var kind string
	var length time.Duration
	var target *string
	switch {
	case e.RiskClass == string(policy.ConfigMutation):
		kind, length = "assent", AssentWindow
	case e.RiskClass == string(policy.Destructive) && (via == ViaTypedConfirmation || via == ViaButton):
		kind, length, target = "destructive", DestructiveWindow, &e.TargetID
	default:
		return nil, nil
	}
	id, err := newID()
	if err != nil {
		return nil, err
	}
	w := &Window{ID: id, Kind: kind, SessionID: session}
	if target != nil {
		w.Target = e.Target
	}
	err = tx.QueryRow(ctx, `INSERT INTO approval_windows (id, kind, session_id, target_id, approval_id, opened_by, via, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8)) RETURNING expires_at`,
		id, kind, session, target, a.ID, m.Actor, via, length.Seconds()).Scan(&w.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("open %s window: %w", kind, err)
	}
	return w, nil
}

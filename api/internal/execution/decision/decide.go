package decision

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/chat"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/assent"
)

const (
	maxMessageIDBytes = 200
	maxReasonBytes    = 4 << 10
)

// validateDecision checks who decides and the decision's fields. An operator decides
// (approve, deny or revoke) by any via. An agent's token decides nothing of its own: it may only
// approve, by chat_assent or typed_confirmation, naming the message_id of an operator's chat
// message the api recorded (POST /chat), and the decision then proves that message
// (proveRelay) before anything changes. A readonly token never decides. The role is checked
// first, so a refused decision says only why it was refused.
func validateDecision(m execution.Meta, d *execution.Decision) error {
	switch m.Role {
	case execution.RoleOperator:
	case execution.RoleAgent:
		return validateRelay(d)
	default:
		return execution.Forbidden("only an operator's token may decide an approval (an agent's only by relaying an operator's "+
			"chat message the api recorded); a %s token cannot approve, deny or revoke", m.Role)
	}
	var err error
	d.Decision, d.Via = strings.TrimSpace(d.Decision), strings.TrimSpace(d.Via)
	switch d.Decision {
	case execution.DecisionApprove, execution.DecisionDeny, execution.DecisionRevoke:
	default:
		return apierr.Invalid("decision", "%q is not one of approve, deny, revoke", d.Decision)
	}
	switch d.Via {
	case execution.ViaButton, execution.ViaChatAssent, execution.ViaTypedConfirmation, execution.ViaAPI:
	default:
		return apierr.Invalid("via", "%q is not one of button, chat_assent, typed_confirmation, api", d.Via)
	}
	if d.MessageID, err = execution.TrimLimit("message_id", d.MessageID, maxMessageIDBytes); err != nil {
		return err
	}
	if d.Reason, err = execution.TrimLimit("reason", d.Reason, maxReasonBytes); err != nil {
		return err
	}
	if d.Confirmation, err = execution.TrimLimit("confirmation", d.Confirmation, maxReasonBytes); err != nil {
		return err
	}
	return nil
}

// validateRelay checks the shape of an agent's decision: an approval by chat_assent or
// typed_confirmation that names the operator's message. Anything else is refused (403).
func validateRelay(d *execution.Decision) error {
	d.Decision, d.Via = strings.TrimSpace(d.Decision), strings.TrimSpace(d.Via)
	d.MessageID, d.Reason = strings.TrimSpace(d.MessageID), strings.TrimSpace(d.Reason)
	switch {
	case d.Decision != execution.DecisionApprove:
		return refuseRelay("an agent's token may only approve, not %q: denying and revoking are the operator's own, "+
			"with an operator's token", d.Decision)
	case d.Via != execution.ViaChatAssent && d.Via != execution.ViaTypedConfirmation:
		return refuseRelay("an agent relays only chat_assent or typed_confirmation, not %q", d.Via)
	case d.MessageID == "":
		return refuseRelay("message_id is required: the id the api gave the operator's chat message (POST /api/v1/chat)")
	case len(d.MessageID) > maxMessageIDBytes:
		return refuseRelay("message_id is longer than %d bytes", maxMessageIDBytes)
	case len(d.Reason) > maxReasonBytes:
		return apierr.Invalid("reason", "is longer than %d bytes", maxReasonBytes)
	}
	return nil
}

// RelayRefusedError is a chat message the api could not prove grants what a relay asks for
// (HTTP 403): Reason says which check failed. Nothing was changed; the refusal has its audit
// row (approval.relay_refused, or plan.assent_refused for a plan).
type RelayRefusedError struct {
	Reason string
	// Plan is set for an assent to a plan, unset for an approval's decision.
	Plan bool
}

// Error implements error.
func (e *RelayRefusedError) Error() string {
	if e.Plan {
		return "only an operator's chat message the api recorded assents to a plan, and this one is refused: " + e.Reason
	}
	return "only an operator's token may decide an approval; an agent's token may only approve by relaying an " +
		"operator's chat message the api recorded, and this relay is refused: " + e.Reason
}

// Unwrap makes a refused relay an ErrForbidden.
func (e *RelayRefusedError) Unwrap() error { return execution.ErrForbidden }

func refuseRelay(format string, args ...any) error {
	return &RelayRefusedError{Reason: fmt.Sprintf(format, args...)}
}

func refusePlan(format string, args ...any) error {
	return &RelayRefusedError{Reason: fmt.Sprintf(format, args...), Plan: true}
}

// proveRelay proves the operator's chat message an agent's approval names, in the decision's
// transaction with the approval locked (docs/behaviours.md A5): the api recorded it
// (chat_messages), in the approval's session, from an operator's token, after the approval was
// requested; it has not granted this approval before; and the deterministic detection of
// shared/policy over the session's pending approvals requested before it grants this approval
// by this via (a loose assent never a destructive one, a typed confirmation only naming the
// target). An approval no longer pending answers as any late decision does (409). It returns
// the message.
func proveRelay(ctx context.Context, tx *execstore.Store, a execution.Approval, d execution.Decision) (chat.Message, error) {
	msg, err := chat.Load(ctx, tx.DB(), d.MessageID)
	if errors.Is(err, apierr.ErrNotFound) {
		return chat.Message{}, refuseRelay("message %q is not a chat message the api recorded", d.MessageID)
	}
	if err != nil {
		return chat.Message{}, err
	}
	session := a.Session()
	switch {
	case session == "":
		return msg, refuseRelay("approval %s belongs to no session; a chat message grants only approvals of its own session", a.ID)
	case msg.SessionID != session:
		return msg, refuseRelay("message %s was sent in session %q, but approval %s belongs to session %q",
			msg.ID, msg.SessionID, a.ID, session)
	case msg.TokenRole != execution.RoleOperator:
		return msg, refuseRelay("message %s was sent with the %s token %q, not an operator's", msg.ID, msg.TokenRole, msg.TokenName)
	case !msg.CreatedAt.After(a.RequestedAt):
		return msg, refuseRelay("message %s (%s) is not newer than approval %s (requested %s); an assent grants only what was asked before it",
			msg.ID, msg.CreatedAt.UTC().Format(time.RFC3339Nano), a.ID, a.RequestedAt.UTC().Format(time.RFC3339Nano))
	}
	used, err := chat.Used(ctx, tx.DB(), chat.Use{MessageID: msg.ID, ApprovalID: a.ID})
	if err != nil {
		return msg, err
	}
	if used {
		return msg, refuseRelay("message %s already granted approval %s; a message grants each approval once", msg.ID, a.ID)
	}
	if a.Status != execution.ApprovalPending {
		return msg, conflict(a, d.Decision)
	}
	pending, err := tx.PendingBefore(ctx, session, msg.CreatedAt)
	if err != nil {
		return msg, err
	}
	var target *assent.PendingApproval
	for i := range pending {
		if pending[i].ID == a.ID {
			target = &pending[i]
		}
	}
	if target == nil {
		return msg, conflict(a, d.Decision)
	}
	for _, g := range assent.Detect(msg.Text, pending) {
		if g.ApprovalID != a.ID {
			continue
		}
		if g.Via != d.Via {
			return msg, refuseRelay("message %s grants approval %s by %s, not %s", msg.ID, a.ID, g.Via, d.Via)
		}
		// A loose assent answers only the immediately preceding answer's approvals: one asked
		// before the operator's previous message was already answered (or passed over) by it,
		// and an old "yes" never approves something new. A typed confirmation names the verb
		// and the target, so it may answer an approval still pending from an earlier turn
		// (after a loose "yes" was refused for it, say).
		if g.Via == assent.ViaTypedConfirmation {
			return msg, nil
		}
		prev, err := chat.PreviousAt(ctx, tx.DB(), msg)
		if err != nil {
			return msg, err
		}
		if !prev.IsZero() && a.RequestedAt.Before(prev) {
			return msg, refuseRelay("approval %s was asked before the operator's previous message in this session; "+
				"an assent grants only what the immediately preceding answer asked", a.ID)
		}
		return msg, nil
	}
	phrase := assent.ConfirmationPhrase(*target)
	how := fmt.Sprintf("only a loose assent (yes, ok, go ahead, approve, proceed) or the typed confirmation %q grants it", phrase)
	if target.Class == policy.Destructive {
		how = fmt.Sprintf("it is destructive, so only the typed confirmation %q grants it", phrase)
	}
	return msg, refuseRelay("message %s does not grant approval %s (%s on %s): %s", msg.ID, a.ID, target.Class, target.TargetSlug, how)
}

// refusedKind reports whether err is a refusal the caller caused (a 4xx), which a relay
// audits, rather than a failure of the api.
func refusedKind(err error) bool {
	for _, s := range []error{execution.ErrForbidden, execution.ErrNotFound, apierr.ErrInvalid, apierr.ErrRefused, apierr.ErrAlreadyDecided, apierr.ErrConflict} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// refusalReason is what an audit row says of a refusal: a refused relay's check, else the error.
func refusalReason(err error) string {
	var rr *RelayRefusedError
	if errors.As(err, &rr) {
		return rr.Reason
	}
	return err.Error()
}

// relayRefusal is the after of an approval.relay_refused audit row.
type relayRefusal struct {
	ApprovalID string `json:"approval_id"`
	MessageID  string `json:"message_id"`
	Decision   string `json:"decision"`
	Via        string `json:"via"`
	Reason     string `json:"reason"`
}

// auditRefusal writes the audit row of a refused relay, in a transaction of its own (the
// decision's was rolled back: nothing else changes). A failure to write it is logged; the
// refusal stands.
func (s *Service) auditRefusal(ctx context.Context, m execution.Meta, action, correlation, entityID string, after any) {
	ctx = context.WithoutCancel(ctx)
	err := s.inTx(ctx, func(tx *execstore.Store) error {
		return execution.WriteAudit(ctx, tx, m, correlation, action, entityID, nil, after)
	})
	if err != nil {
		s.log.Error().Err(err).Str("actor", m.Actor).Str("action", action).Msg("audit of a refused relay failed")
	}
}

// Decide applies an operator's decision to an approval: approve (the execution becomes
// runnable), deny, or revoke (a pending approval, or an approved execution that has not
// started). One conditional UPDATE makes the transition, so of two concurrent decisions
// exactly one wins; the loser gets a *ConflictError saying how the approval was decided. The
// approval records the execution's real risk class, windows open as
// docs/execution-contract.md says, and the audit row and events commit with the decision.
//
// An agent's token approves only by relaying an operator's chat message the api recorded,
// proved in the same transaction (proveRelay); the approval then records the operator as
// decided_by and the agent token as relayed_by, and the message's use, so it grants this
// approval once. A relay that fails any check, or any other way, is refused and audited
// (approval.relay_refused, actor: the agent token), and nothing else changes.
func (s *Service) Decide(ctx context.Context, m execution.Meta, approvalID string, d execution.Decision) (execution.DecisionResult, error) {
	if err := execution.CheckMeta(m); err != nil {
		return execution.DecisionResult{}, err
	}
	relay := m.Role == execution.RoleAgent
	var session, entityID string
	out, err := func() (execution.DecisionResult, error) {
		if err := validateDecision(m, &d); err != nil {
			return execution.DecisionResult{}, err
		}
		if !ids.IsUUID(approvalID) {
			return execution.DecisionResult{}, fmt.Errorf("%w: approval %q", execution.ErrNotFound, approvalID)
		}
		return s.decideApproval(ctx, m, approvalID, d, relay, &session, &entityID)
	}()
	if err != nil && relay && refusedKind(err) {
		s.auditRefusal(ctx, m, "approval.relay_refused", session, entityID, relayRefusal{ApprovalID: approvalID,
			MessageID: d.MessageID, Decision: d.Decision, Via: d.Via, Reason: refusalReason(err)})
	}
	return out, err
}

// decideApproval is Decide's transaction; session and entityID receive the approval's session
// and target as soon as they are read, for the audit row of a refused relay.
func (s *Service) decideApproval(ctx context.Context, m execution.Meta, approvalID string, d execution.Decision, relay bool, session, entityID *string) (execution.DecisionResult, error) {
	var out execution.DecisionResult
	err := s.inTx(ctx, func(tx *execstore.Store) error {
		// Lock the execution first: the scheduler's claim skips locked rows, so a revoke
		// cannot race a claim, and a second decision waits here and then sees the first.
		row, err := tx.LockDecision(ctx, approvalID)
		if err != nil {
			return err
		}
		execID := row.ExecutionID
		before, err := tx.Approval(ctx, approvalID)
		if err != nil {
			return err
		}
		*session, *entityID = before.Session(), before.TargetID
		decider := m.Actor
		var relayer *string
		if relay {
			msg, err := proveRelay(ctx, tx, before, d)
			if err != nil {
				return err
			}
			decider, relayer = msg.TokenName, &m.Actor
		}
		if d.Decision == execution.DecisionApprove && row.RiskClass == string(policy.Destructive) &&
			d.Via != execution.ViaTypedConfirmation && d.Via != execution.ViaButton {
			return &execution.RefusedError{Code: "destructive_needs_confirmation", RiskClass: row.RiskClass,
				Reason: fmt.Sprintf("execution %s is destructive: approve it with a typed confirmation naming %s, or the button; %s is not enough",
					execID, before.Target, strings.ReplaceAll(d.Via, "_", " "))}
		}
		if d.Confirmation != "" && d.Decision == execution.DecisionApprove && strings.TrimSpace(d.Confirmation) != before.ConfirmationPhrase {
			want := before.ConfirmationPhrase
			if want == "" {
				want = "none (it is not destructive)"
			}
			return apierr.Invalid("confirmation", "%q is not the confirmation of this approval: type %s", d.Confirmation, want)
		}
		newApproval, fromApproval, newExec, fromExec := transition(d.Decision)
		var msgID *string
		if d.MessageID != "" {
			msgID = &d.MessageID
		}
		// The one conditional transition. risk_class is copied from the execution: the
		// decision records the class the gate computed, never a constant.
		moved, err := tx.DecideApproval(ctx, execstore.Decided{ApprovalID: approvalID, Status: newApproval, DecidedBy: decider,
			RelayedBy: relayer, Via: d.Via, MessageID: msgID, Reason: d.Reason, FromApproval: fromApproval, FromExecution: fromExec})
		if err != nil {
			return err
		}
		if !moved {
			return conflict(before, d.Decision)
		}
		if relay {
			fresh, err := chat.MarkUsed(ctx, tx.DB(), chat.Use{MessageID: d.MessageID, ApprovalID: approvalID, UsedBy: m.Actor})
			if err != nil {
				return err
			}
			if !fresh {
				return refuseRelay("message %s already granted approval %s; a message grants each approval once", d.MessageID, approvalID)
			}
		}
		authorised := ""
		if d.Decision == execution.DecisionApprove {
			authorised = execution.AuthorisedApproval
		}
		if moved, err = tx.MoveExecution(ctx, execID, newExec, authorised, fromExec); err != nil {
			return err
		}
		if !moved {
			return fmt.Errorf("move execution %s to %s: it is no longer %s", execID, newExec, strings.Join(fromExec, " or "))
		}
		if out.Execution, err = tx.Execution(ctx, execID, true); err != nil {
			return err
		}
		if out.Approval, err = tx.Approval(ctx, approvalID); err != nil {
			return err
		}
		if d.Decision == execution.DecisionApprove {
			if out.Window, err = openWindow(ctx, tx, decider, d.Via, out.Approval, out.Execution); err != nil {
				return err
			}
		}
		if d.Decision == execution.DecisionRevoke {
			// Withdrawn consent closes whatever that consent opened.
			if err := tx.CloseWindows(ctx, approvalID); err != nil {
				return err
			}
		}
		corr := out.Approval.Session()
		if err := execution.WriteAudit(ctx, tx, m, corr, "approval."+d.Decision, out.Execution.TargetID, before, out.Approval); err != nil {
			return err
		}
		if err := execution.AppendEvent(ctx, tx, m, "approval.decided", out.Execution, decidedPayload{
			ApprovalID: approvalID, ExecutionID: execID, Decision: d.Decision, Status: out.Approval.Status,
			Via: d.Via, DecidedBy: decider, RelayedBy: relayer, RiskClass: out.Approval.RiskClass, Target: out.Execution.Target,
			MessageID: msgID, Window: out.Window}); err != nil {
			return err
		}
		if err := execution.AppendEvent(ctx, tx, m, "execution."+newExec, out.Execution, execution.PayloadOf(out.Execution)); err != nil {
			return err
		}
		if newExec == execution.StatusApproved {
			return tx.NotifyRunnable(ctx, execID)
		}
		return nil
	})
	if err != nil {
		return execution.DecisionResult{}, err
	}
	return out, nil
}

// transition says what a decision moves from and to: approval status, then execution status.
func transition(decision string) (newApproval string, fromApproval []string, newExec string, fromExec []string) {
	switch decision {
	case execution.DecisionApprove:
		return execution.ApprovalApproved, []string{execution.ApprovalPending}, execution.StatusApproved, []string{execution.StatusPendingApproval}
	case execution.DecisionDeny:
		return execution.ApprovalDenied, []string{execution.ApprovalPending}, execution.StatusDenied, []string{execution.StatusPendingApproval}
	default: // revoke: pending, or approved but not yet claimed by the scheduler
		return execution.ApprovalRevoked, []string{execution.ApprovalPending, execution.ApprovalApproved}, execution.StatusRevoked,
			[]string{execution.StatusPendingApproval, execution.StatusApproved}
	}
}

// conflict explains why a decision found nothing to transition.
func conflict(a execution.Approval, decision string) error {
	if a.Status != execution.ApprovalPending && (decision != execution.DecisionRevoke || a.Status != execution.ApprovalApproved) {
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
		return &execution.ConflictError{Approval: a, Reason: fmt.Sprintf("approval %s was %s; nothing was changed", a.ID, how)}
	}
	return &execution.ConflictError{Approval: a, Reason: fmt.Sprintf("approval %s: execution %s is %s and can no longer be %sd",
		a.ID, a.ExecutionID, a.ExecutionStatus, decision)}
}

// decidedPayload is the approval.decided event payload.
type decidedPayload struct {
	ApprovalID  string `json:"approval_id"`
	ExecutionID string `json:"execution_id"`
	Decision    string `json:"decision"`
	Status      string `json:"status"`
	Via         string `json:"via"`
	DecidedBy   string `json:"decided_by"`
	// RelayedBy names the agent token that relayed the operator's chat message; omitted on a
	// direct decision.
	RelayedBy *string           `json:"relayed_by,omitempty"`
	RiskClass string            `json:"risk_class"`
	Target    string            `json:"target"`
	MessageID *string           `json:"message_id,omitempty"`
	Window    *execution.Window `json:"window,omitempty"`
}

// openWindow opens the window an approval grants (docs/execution-contract.md,
// docs/behaviours.md X6): approving a config_mutation of a session opens that session's assent
// window (30 min); approving a destructive one by typed confirmation or button opens a
// destructive window for that target and session (15 min). Without a session there is no
// window. openedBy is the operator who decided.
func openWindow(ctx context.Context, tx *execstore.Store, openedBy, via string, a execution.Approval, e execution.Execution) (*execution.Window, error) {
	session := a.Session()
	if session == "" {
		return nil, nil
	}
	var kind string
	var length time.Duration
	var target *string
	switch {
	case e.RiskClass == string(policy.ConfigMutation):
		kind, length = "assent", execution.AssentWindow
	case e.RiskClass == string(policy.Destructive) && (via == execution.ViaTypedConfirmation || via == execution.ViaButton):
		kind, length, target = "destructive", execution.DestructiveWindow, &e.TargetID
	default:
		return nil, nil
	}
	id, err := execution.NewID()
	if err != nil {
		return nil, err
	}
	w := &execution.Window{ID: id, Kind: kind, SessionID: session}
	if target != nil {
		w.Target = e.Target
	}
	w.ExpiresAt, err = tx.OpenWindow(ctx, execstore.NewWindow{ID: id, Kind: kind, SessionID: session, TargetID: target,
		ApprovalID: &a.ID, OpenedBy: openedBy, Via: via, Length: length})
	if err != nil {
		return nil, fmt.Errorf("open %s window: %w", kind, err)
	}
	return w, nil
}

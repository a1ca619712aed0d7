package loop

import (
	"context"
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/agent/internal/apiclient"
	api "github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/assent"
)

// pendingApprovals is the part of GET /approvals that assent detection reads.
type pendingApprovals struct {
	Items []struct {
		ID          string    `json:"id"`
		ExecutionID string    `json:"execution_id"`
		Target      string    `json:"target"`
		Command     string    `json:"command"`
		RiskClass   string    `json:"risk_class"`
		RequestedAt time.Time `json:"requested_at"`
	} `json:"items"`
}

// relayAssent finds what the operator's message assents to — the pending approvals and the
// plan of the immediately preceding assistant turn (those created after the previous user
// message), or for a typed confirmation any approval still pending — by the deterministic detection of shared/policy, and relays it to the api naming
// the api's own record of the message. The api proves the relay before it decides (same
// session, an operator's token, newer than what it approves, the same detection); the agent's
// verdict alone decides nothing. It returns notes for the model about what was decided.
func (l *Loop) relayAssent(ctx context.Context, req TurnRequest, prevUser time.Time) []string {
	if req.MessageID == "" || prevUser.IsZero() || l.cfg.AgentToken == "" {
		return nil
	}
	var notes []string
	as := apiclient.As(l.cfg.AgentToken, req.SessionID)
	list, err := apiclient.Decode[pendingApprovals](l.api.API().ListApprovals(ctx,
		&api.ListApprovalsParams{SessionId: &req.SessionID, Status: api.Ptr("pending"), Limit: api.Ptr(50)}, as...))
	if err != nil {
		l.log.Warn().Err(err).Str("session", req.SessionID).Msg("pending approvals for assent")
	}
	// A loose assent answers the approvals the immediately preceding assistant turn asked
	// for; a typed confirmation (it names verb and target) any approval still pending.
	var recent, all []assent.PendingApproval
	byID := map[string]string{}
	for _, a := range list.Items {
		p := assent.PendingApproval{ID: a.ID, TargetSlug: a.Target, Class: policy.Class(a.RiskClass), Command: a.Command}
		all = append(all, p)
		if !a.RequestedAt.Before(prevUser) {
			recent = append(recent, p)
		}
		byID[a.ID] = fmt.Sprintf("`%s` on %s (%s)", a.Command, a.Target, a.RiskClass)
	}
	var grants []assent.Grant
	for _, g := range assent.Detect(req.Message, all) {
		if g.Via == assent.ViaTypedConfirmation {
			grants = append(grants, g)
		}
	}
	for _, g := range assent.Detect(req.Message, recent) {
		if g.Via == assent.ViaChatAssent {
			grants = append(grants, g)
		}
	}
	for _, g := range grants {
		body := api.DecisionRequest{Decision: "approve", Via: api.DecisionRequestVia(g.Via), MessageId: &req.MessageID}
		if _, err := apiclient.Raw(l.api.API().DecideApproval(ctx, g.ApprovalID, body, as...)); err != nil {
			l.log.Warn().Err(err).Str("approval", g.ApprovalID).Msg("assent relay refused")
			notes = append(notes, fmt.Sprintf("the operator's message was read as approving %s, but the api did not accept it: %v. It still waits for the operator.", byID[g.ApprovalID], err))
			continue
		}
		notes = append(notes, fmt.Sprintf("the operator's message approved %s; it runs now and its result comes back to this session.", byID[g.ApprovalID]))
	}
	if s, err := l.tasks.Session(ctx, req.SessionID); err == nil && s.PlanProposedAt != nil && s.PlanProposedAt.After(prevUser) && assent.ToPlan(req.Message) {
		if _, err := apiclient.Raw(l.api.API().AssentToPlan(ctx, req.SessionID, api.PlanAssentRequest{MessageId: req.MessageID}, as...)); err != nil {
			l.log.Warn().Err(err).Str("session", req.SessionID).Msg("plan assent relay refused")
			notes = append(notes, fmt.Sprintf("the operator's message was read as approving the plan, but the api did not accept it: %v.", err))
		} else {
			notes = append(notes, fmt.Sprintf("the operator approved plan generation %d: its config_mutation steps now run without asking again for a while; destructive steps still need their own approval. Work through the plan.", s.PlanGeneration))
		}
	}
	return notes
}

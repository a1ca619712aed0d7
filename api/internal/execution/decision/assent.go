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
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/policy/assent"
)

// PlanAssent is what a proved assent to a session's plan answers: the session, the plan
// generation assented to and the assent window it opened.
type PlanAssent struct {
	SessionID  string           `json:"session_id"`
	Window     execution.Window `json:"window"`
	Generation int              `json:"generation"`
}

// planAssented is the plan.assented audit row's after and event payload.
type planAssented struct {
	SessionID  string           `json:"session_id"`
	Generation int              `json:"generation"`
	MessageID  string           `json:"message_id"`
	DecidedBy  string           `json:"decided_by"`
	RelayedBy  *string          `json:"relayed_by,omitempty"`
	Window     execution.Window `json:"window"`
}

// planRefusal is the plan.assent_refused audit row's after.
type planRefusal struct {
	SessionID string `json:"session_id"`
	MessageID string `json:"message_id"`
	Reason    string `json:"reason"`
}

// AssentToPlan proves an operator's chat message assents to the session's current plan and
// opens the session's assent window, exactly as approving a config_mutation of the session
// does (docs/behaviours.md A5, X6: 30 minutes, covering that session's config_mutation
// requests and never a destructive one). The message must be one the api recorded, in this
// session, from an operator's token, newer than the plan's proposal (agent_sessions.
// plan_proposed_at, the agent's table, read only), a loose assent (assent.ToPlan), and
// must not have assented to this plan generation before. The caller is the agent relaying it
// or the operator; either way the window is opened by the operator who wrote the message, and
// the audit row and the plan.assented event commit with it. A refusal (403 for a message that
// proves nothing, 404 for an unknown session, 422 for a session without a plan or a missing
// message_id) changes nothing but its audit row (plan.assent_refused).
func (s *Service) AssentToPlan(ctx context.Context, m execution.Meta, sessionID, messageID string) (PlanAssent, error) {
	if err := execution.CheckMeta(m); err != nil {
		return PlanAssent{}, err
	}
	messageID = strings.TrimSpace(messageID)
	out, err := func() (PlanAssent, error) {
		switch {
		case m.Role != execution.RoleOperator && m.Role != execution.RoleAgent:
			return PlanAssent{}, execution.Forbidden("only an operator's token, or an agent's relaying an operator's chat message, "+
				"may assent to a plan; a %s token cannot", m.Role)
		case messageID == "":
			return PlanAssent{}, apierr.Invalid("message_id", "is required: the id the api gave the operator's chat message (POST /api/v1/chat)")
		case len(messageID) > maxMessageIDBytes:
			return PlanAssent{}, apierr.Invalid("message_id", "is longer than %d bytes", maxMessageIDBytes)
		case !chat.ValidSessionID(sessionID):
			return PlanAssent{}, fmt.Errorf("%w: session %q", execution.ErrNotFound, sessionID)
		}
		return s.assentToPlan(ctx, m, sessionID, messageID)
	}()
	if err != nil && refusedKind(err) {
		s.auditRefusal(ctx, m, "plan.assent_refused", sessionID, "", planRefusal{SessionID: sessionID,
			MessageID: messageID, Reason: refusalReason(err)})
	}
	return out, err
}

func (s *Service) assentToPlan(ctx context.Context, m execution.Meta, sessionID, messageID string) (PlanAssent, error) {
	var out PlanAssent
	err := s.inTx(ctx, func(tx *execstore.Store) error {
		proposedAt, gen, err := tx.SessionPlan(ctx, sessionID)
		if err != nil {
			return err
		}
		if gen <= 0 || proposedAt == nil {
			return &execution.RefusedError{Code: "no_plan", Reason: fmt.Sprintf("session %s has no plan proposed; there is nothing to assent to", sessionID)}
		}
		msg, err := chat.Load(ctx, tx.DB(), messageID)
		if errors.Is(err, apierr.ErrNotFound) {
			return refusePlan("message %q is not a chat message the api recorded", messageID)
		}
		if err != nil {
			return err
		}
		switch {
		case msg.SessionID != sessionID:
			return refusePlan("message %s was sent in session %q, not in session %q", msg.ID, msg.SessionID, sessionID)
		case msg.TokenRole != execution.RoleOperator:
			return refusePlan("message %s was sent with the %s token %q, not an operator's", msg.ID, msg.TokenRole, msg.TokenName)
		case !msg.CreatedAt.After(*proposedAt):
			return refusePlan("message %s (%s) is not newer than plan generation %d of session %s (proposed %s); an assent grants only what was proposed before it",
				msg.ID, msg.CreatedAt.UTC().Format(time.RFC3339Nano), gen, sessionID, proposedAt.UTC().Format(time.RFC3339Nano))
		}
		use := chat.Use{MessageID: msg.ID, PlanGeneration: gen, UsedBy: m.Actor}
		used, err := chat.Used(ctx, tx.DB(), use)
		if err != nil {
			return err
		}
		if used {
			return refusePlan("message %s already assented to plan generation %d of session %s; a message assents once", msg.ID, gen, sessionID)
		}
		if !assent.ToPlan(msg.Text) {
			return refusePlan("message %s is not an assent to the plan: only a message of the assent words alone "+
				"(yes, ok, go ahead, approve, proceed, continue) assents", msg.ID)
		}
		prev, err := chat.PreviousAt(ctx, tx.DB(), msg)
		if err != nil {
			return err
		}
		if !prev.IsZero() && proposedAt.Before(prev) {
			return refusePlan("plan generation %d of session %s was proposed before the operator's previous message; an assent answers only the immediately preceding answer",
				gen, sessionID)
		}
		fresh, err := chat.MarkUsed(ctx, tx.DB(), use)
		if err != nil {
			return err
		}
		if !fresh {
			return refusePlan("message %s already assented to plan generation %d of session %s; a message assents once", msg.ID, gen, sessionID)
		}
		id, err := execution.NewID()
		if err != nil {
			return err
		}
		w := execution.Window{ID: id, Kind: "assent", SessionID: sessionID}
		// The window of a config_mutation's approval (openWindow), opened by the operator who
		// wrote the message; no approval stands behind it.
		w.ExpiresAt, err = tx.OpenWindow(ctx, execstore.NewWindow{ID: id, Kind: "assent", SessionID: sessionID,
			OpenedBy: msg.TokenName, Via: execution.ViaChatAssent, Length: execution.AssentWindow})
		if err != nil {
			return fmt.Errorf("open the assent window of %s: %w", sessionID, err)
		}
		p := planAssented{SessionID: sessionID, Generation: gen, MessageID: msg.ID, DecidedBy: msg.TokenName, Window: w}
		if m.Actor != msg.TokenName || m.Role != execution.RoleOperator {
			p.RelayedBy = &m.Actor
		}
		if err := execution.WriteAudit(ctx, tx, m, sessionID, "plan.assented", "", nil, p); err != nil {
			return err
		}
		if err := tx.AppendEvent(ctx, eventbus.Event{Type: "plan.assented", CorrelationID: sessionID, Actor: m.Actor}, p); err != nil {
			return err
		}
		out = PlanAssent{SessionID: sessionID, Window: w, Generation: gen}
		return nil
	})
	if err != nil {
		return PlanAssent{}, err
	}
	return out, nil
}

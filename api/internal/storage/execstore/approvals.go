package execstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/shared/policy/assent"
)

// approvalColumns matches scanApproval; a is approvals, x the execution it gates.
const approvalColumns = `a.id::text, a.execution_id::text, a.session_id, a.target_id::text, x.target_slug, x.action,
	x.command, x.purpose, a.risk_class, x.reasons, a.status, a.requested_by, a.requested_at, a.decided_by,
	a.relayed_by, a.decided_at, a.via, a.message_id, a.reason, x.status`

const approvalFrom = ` FROM approvals a JOIN executions x ON x.id = a.execution_id `

const (
	qApproval     = `SELECT ` + approvalColumns + approvalFrom + `WHERE a.id = $1::uuid`
	qApprovalList = `SELECT ` + approvalColumns + approvalFrom
	qLockDecision = `SELECT x.id::text, x.status, x.risk_class, a.status
			FROM approvals a JOIN executions x ON x.id = a.execution_id
			WHERE a.id = $1::uuid FOR UPDATE OF x, a`
	qPendingBefore = `SELECT a.id::text, x.target_slug, x.risk_class, x.command
		FROM approvals a JOIN executions x ON x.id = a.execution_id
		WHERE a.session_id = $1 AND a.status = 'pending' AND a.requested_at < $2
		ORDER BY a.requested_at, a.id`
	// The one conditional transition. risk_class is copied from the execution: the
	// decision records the class the gate computed, never a constant.
	qDecideApproval = `UPDATE approvals a SET status = $2, decided_by = $3, relayed_by = $9, decided_at = now(),
				via = $4, message_id = $5, reason = $6, risk_class = x.risk_class
			FROM executions x
			WHERE a.id = $1::uuid AND x.id = a.execution_id AND a.status = ANY($7) AND x.status = ANY($8)`
	qMoveExecution = `UPDATE executions SET status = $2, updated_at = now(),
				authorised_by = CASE WHEN $3 = '' THEN authorised_by ELSE $3 END
			WHERE id = $1::uuid AND status = ANY($4)`
	qOpenWindow = `INSERT INTO approval_windows (id, kind, session_id, target_id, approval_id, opened_by, via, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8)) RETURNING expires_at`
	qCloseWindows = `UPDATE approval_windows SET closed_at = now()
				WHERE approval_id = $1::uuid AND closed_at IS NULL`
	qSessionPlan = `SELECT plan_proposed_at, plan_generation FROM agent_sessions WHERE id = $1`
)

func scanApproval(row pgx.Row) (Approval, error) {
	var a Approval
	var reasons []byte
	err := row.Scan(&a.ID, &a.ExecutionID, &a.SessionID, &a.TargetID, &a.Target, &a.Action, &a.Command, &a.Purpose,
		&a.RiskClass, &reasons, &a.Status, &a.RequestedBy, &a.RequestedAt, &a.DecidedBy, &a.RelayedBy, &a.DecidedAt, &a.Via,
		&a.MessageID, &a.Reason, &a.ExecutionStatus)
	if err != nil {
		return Approval{}, err
	}
	if err := json.Unmarshal(reasons, &a.Reasons); err != nil {
		return Approval{}, fmt.Errorf("decode reasons of approval %s: %w", a.ID, err)
	}
	if a.Reasons == nil {
		a.Reasons = []string{}
	}
	if a.RiskClass == string(policy.Destructive) {
		a.ConfirmationPhrase = assent.ConfirmationPhrase(assent.PendingApproval{TargetSlug: a.Target, Command: a.Command, Class: policy.Destructive})
	}
	return a, nil
}

// Approval reads one approval with what it gates. An id that is not a uuid, or names no
// approval, is apierr.ErrNotFound.
func (s *Store) Approval(ctx context.Context, id string) (Approval, error) {
	if !ids.IsUUID(id) {
		return Approval{}, fmt.Errorf("%w: approval %q", apierr.ErrNotFound, id)
	}
	a, err := scanApproval(s.db.QueryRow(ctx, qApproval, id))
	if storage.IsNoRows(err) {
		return Approval{}, fmt.Errorf("%w: approval %q", apierr.ErrNotFound, id)
	}
	if err != nil {
		return Approval{}, fmt.Errorf("read approval %s: %w", id, err)
	}
	return a, nil
}

// ApprovalFilter selects approvals. Empty fields do not filter.
type ApprovalFilter struct {
	Statuses  []string
	SessionID string
	After     *After
}

func approvalList(f ApprovalFilter, limit int) (string, []any) {
	var w where
	if len(f.Statuses) > 0 {
		w.add(`a.status = ANY($?)`, f.Statuses)
	}
	if f.SessionID != "" {
		w.add(`a.session_id = $?`, f.SessionID)
	}
	if f.After != nil {
		w.add(`(a.requested_at, a.id) < ($?, $?::uuid)`, f.After.At, f.After.ID)
	}
	return w.sql(qApprovalList, `a.requested_at DESC, a.id DESC`, limit)
}

// Approvals lists at most limit approvals matching f, newest request first.
func (s *Store) Approvals(ctx context.Context, f ApprovalFilter, limit int) ([]Approval, error) {
	sql, args := approvalList(f, limit)
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Approval, error) { return scanApproval(r) })
	if err != nil {
		return nil, fmt.Errorf("list approvals: %w", err)
	}
	return items, nil
}

// Locked is an approval and its execution as LockDecision read them.
type Locked struct {
	ExecutionID, ExecutionStatus, RiskClass, ApprovalStatus string
}

// LockDecision locks the approval and the execution it gates for a decision (the execution
// first: the scheduler's claim skips locked rows, so a revoke cannot race a claim, and a
// second decision waits here and then sees the first). An unknown approval is
// apierr.ErrNotFound.
func (s *Store) LockDecision(ctx context.Context, approvalID string) (Locked, error) {
	var l Locked
	err := s.db.QueryRow(ctx, qLockDecision, approvalID).Scan(&l.ExecutionID, &l.ExecutionStatus, &l.RiskClass, &l.ApprovalStatus)
	if storage.IsNoRows(err) {
		return l, fmt.Errorf("%w: approval %q", apierr.ErrNotFound, approvalID)
	}
	if err != nil {
		return l, fmt.Errorf("lock approval %s: %w", approvalID, err)
	}
	return l, nil
}

// PendingBefore lists the session's pending approvals requested before at, oldest first, as
// shared/policy's assent detection takes them.
func (s *Store) PendingBefore(ctx context.Context, session string, at time.Time) ([]assent.PendingApproval, error) {
	rows, err := s.db.Query(ctx, qPendingBefore, session, at)
	if err != nil {
		return nil, fmt.Errorf("pending approvals of %s: %w", session, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (assent.PendingApproval, error) {
		var p assent.PendingApproval
		var class string
		err := r.Scan(&p.ID, &p.TargetSlug, &class, &p.Command)
		p.Class = policy.Class(class)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("pending approvals of %s: %w", session, err)
	}
	return out, nil
}

// Decided is a decision as DecideApproval writes it.
type Decided struct {
	ApprovalID, Status string
	// DecidedBy is the operator; RelayedBy the agent token that relayed their message.
	DecidedBy string
	RelayedBy *string
	Via       string
	MessageID *string
	Reason    string
	// FromApproval and FromExecution are the statuses the transition starts from.
	FromApproval, FromExecution []string
}

// DecideApproval makes the decision's one conditional transition and reports whether it
// did (false: the approval or its execution is no longer in a status it starts from).
func (s *Store) DecideApproval(ctx context.Context, d Decided) (bool, error) {
	tag, err := s.db.Exec(ctx, qDecideApproval, d.ApprovalID, d.Status, d.DecidedBy, d.Via, d.MessageID, d.Reason,
		d.FromApproval, d.FromExecution, d.RelayedBy)
	if err != nil {
		return false, fmt.Errorf("decide approval %s: %w", d.ApprovalID, err)
	}
	return tag.RowsAffected() > 0, nil
}

// MoveExecution moves execution id from one of from to status, setting authorised_by when
// authorised is not "", and reports whether it moved.
func (s *Store) MoveExecution(ctx context.Context, id, status, authorised string, from []string) (bool, error) {
	tag, err := s.db.Exec(ctx, qMoveExecution, id, status, authorised, from)
	if err != nil {
		return false, fmt.Errorf("move execution %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// NewWindow is an approval window to open.
type NewWindow struct {
	ID, Kind, SessionID string
	// TargetID scopes a destructive window; nil for an assent window.
	TargetID *string
	// ApprovalID is the approval whose decision opened it; nil for an assent to a plan.
	ApprovalID *string
	OpenedBy   string
	Via        string
	Length     time.Duration
}

// OpenWindow opens w and returns when it expires.
func (s *Store) OpenWindow(ctx context.Context, w NewWindow) (time.Time, error) {
	var expires time.Time
	err := s.db.QueryRow(ctx, qOpenWindow, w.ID, w.Kind, w.SessionID, w.TargetID, w.ApprovalID, w.OpenedBy, w.Via,
		w.Length.Seconds()).Scan(&expires)
	return expires, err
}

// CloseWindows closes the windows approvalID's decision opened.
func (s *Store) CloseWindows(ctx context.Context, approvalID string) error {
	if _, err := s.db.Exec(ctx, qCloseWindows, approvalID); err != nil {
		return fmt.Errorf("close windows of %s: %w", approvalID, err)
	}
	return nil
}

// SessionPlan reads the plan of an agent session (agent_sessions, the agent's table, read
// only): when its current plan was proposed (nil: none) and its generation. An unknown
// session is apierr.ErrNotFound.
func (s *Store) SessionPlan(ctx context.Context, sessionID string) (*time.Time, int, error) {
	var proposedAt *time.Time
	var gen int
	err := s.db.QueryRow(ctx, qSessionPlan, sessionID).Scan(&proposedAt, &gen)
	if storage.IsNoRows(err) {
		return nil, 0, fmt.Errorf("%w: session %q", apierr.ErrNotFound, sessionID)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read the plan of session %s: %w", sessionID, err)
	}
	return proposedAt, gen, nil
}

package execution

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
	"github.com/oikos-hq/oikos/shared/policy"
)

// Limits on request fields.
const (
	maxPurposeBytes  = 4 << 10
	maxSessionBytes  = 200
	maxTargetBytes   = 300
	defaultTimeout   = 600
	maxTimeoutSecond = 24 * 60 * 60
)

// prepared is a validated request: what to classify and what to store.
type prepared struct {
	req      Request
	norm     Normalised
	params   []byte
	declared policy.Class
}

// prepare validates and normalises a request. Nothing here touches the database.
func (s *Service) prepare(r Request) (prepared, error) {
	var err error
	p := prepared{req: r}
	if p.req.Target, err = TrimLimit("target", r.Target, maxTargetBytes); err != nil {
		return p, err
	}
	if p.req.Target == "" {
		return p, apierr.Invalid("target", "is required (an entity slug such as lxc:jellyfin)")
	}
	if p.req.Purpose, err = TrimLimit("purpose", r.Purpose, maxPurposeBytes); err != nil {
		return p, err
	}
	if p.req.Purpose == "" {
		return p, apierr.Invalid("purpose", "is required: say why this runs (the operator reads it on the approval)")
	}
	if p.req.SessionID, err = TrimLimit("session_id", r.SessionID, maxSessionBytes); err != nil {
		return p, err
	}
	switch {
	case r.TimeoutSeconds == 0:
		p.req.TimeoutSeconds = defaultTimeout
	case r.TimeoutSeconds < 1 || r.TimeoutSeconds > maxTimeoutSecond:
		return p, apierr.Invalid("timeout_seconds", "must be from 1 to %d", maxTimeoutSecond)
	}
	if p.declared, err = parseDeclared(r.DeclaredRisk); err != nil {
		return p, err
	}
	if r.Action == "" || r.Action == ActionRun {
		p.req.Action = ActionRun
		if len(r.Params) > 0 && strings.TrimSpace(string(r.Params)) != "null" && strings.TrimSpace(string(r.Params)) != "{}" {
			return p, apierr.Invalid("params", "run takes a command, not params")
		}
		if p.norm, err = normaliseRun(r.Command); err != nil {
			return p, err
		}
	} else {
		if r.Command != "" {
			return p, apierr.Invalid("command", "a typed action takes params, not a command")
		}
		if p.norm, err = NormaliseAction(r.Action, r.Params); err != nil {
			return p, err
		}
	}
	p.req.Command = p.norm.Command
	// json.Marshal sorts map keys: the stored params are canonical, so equal requests have
	// equal dedup keys.
	if p.params, err = json.Marshal(p.norm.Params); err != nil {
		return p, fmt.Errorf("marshal params: %w", err)
	}
	return p, nil
}

// parseDeclared reads the declared risk; "" (nothing declared) is the empty class.
func parseDeclared(s string) (policy.Class, error) {
	d := strings.TrimSpace(s)
	if d == "" {
		return "", nil
	}
	c, err := policy.ParseClass(d)
	if err != nil {
		return "", apierr.Invalid("declared_risk", "%v", err)
	}
	return c, nil
}

// normaliseRun validates the command of a run request: what the gate classifies and the
// executor runs, unchanged.
func normaliseRun(cmd string) (Normalised, error) {
	if strings.TrimSpace(cmd) == "" {
		return Normalised{}, apierr.Invalid("command", "is required")
	}
	if len(cmd) > maxCommandBytes {
		return Normalised{}, apierr.Invalid("command", "is longer than %d bytes", maxCommandBytes)
	}
	if strings.IndexByte(cmd, 0) >= 0 {
		return Normalised{}, apierr.Invalid("command", "contains a NUL byte, which no shell command can carry")
	}
	return Normalised{Action: ActionRun, Params: map[string]any{}, Command: cmd}, nil
}

// targetRow is the target entity as the gate reads it.
type targetRow = execstore.Target

// facts are what the gate learned in the transaction.
type facts struct {
	target targetRow
	key    string
	// duplicateID is a pending execution identical to this request.
	duplicateID string
	// pendingApprovalID / pendingExecutionID: the session's approval awaiting a decision.
	pendingApprovalID  string
	pendingExecutionID string
	// assentWindowID / destructiveWindowID: open windows covering this request.
	assentWindowID      string
	destructiveWindowID string
	// guestConflict is a live guest already holding a pct_create's vmid or hostname.
	guestConflict string
}

// gather reads the facts the gate decides on. The caller holds the request's advisory lock,
// so no concurrent request of the same session (or, without a session, the same dedup key)
// changes them before the transaction commits.
func (s *Service) gather(ctx context.Context, tx *execstore.Store, p prepared, f *facts) error {
	var err error
	if p.norm.Action == ActionPctCreate {
		guests := []string{"lxc", "vm"}
		if o := s.graph.Ontology(); o != nil {
			guests = o.Descendants("guest")
		}
		if f.guestConflict, err = tx.GuestHolding(ctx, guests, fmt.Sprint(p.norm.Params["vmid"]), p.norm.Params["hostname"]); err != nil {
			return err
		}
	}
	if f.duplicateID, err = tx.PendingDuplicate(ctx, f.key); err != nil {
		return err
	}
	sid := p.req.SessionID
	if sid == "" {
		// No session id, no window and no flood accounting: windows are per session, and
		// a request without one must never ride another's.
		return nil
	}
	if f.pendingApprovalID, f.pendingExecutionID, err = tx.SessionPendingApproval(ctx, sid); err != nil {
		return err
	}
	if f.assentWindowID, err = tx.OpenAssentWindow(ctx, sid); err != nil {
		return err
	}
	f.destructiveWindowID, err = tx.OpenDestructiveWindow(ctx, sid, f.target.ID)
	return err
}

// Request runs the gate over a request and records its outcome. It returns the execution
// (Status approved when it runs now, pending_approval when it waits for an operator,
// AlreadyQueued when an identical request is pending), or an error: *FieldError for a
// malformed request, ErrNotFound for an unknown target, *RefusedError when the gate refuses
// (nothing is written then), ErrForbidden for a readonly caller.
func (s *Service) Request(ctx context.Context, m Meta, r Request) (Execution, error) {
	if err := CheckMeta(m); err != nil {
		return Execution{}, err
	}
	if m.Role == RoleReadonly {
		return Execution{}, Forbidden("a readonly token cannot request executions")
	}
	p, err := s.prepare(r)
	if err != nil {
		return Execution{}, err
	}
	// The advisory lock serialises requests that could conflict, so the unique indexes
	// should never fire; if one does (a request racing a decision), the facts are re-read
	// and the gate runs again on them.
	for attempt := 0; ; attempt++ {
		e, err := s.gate(ctx, m, p)
		if attempt < 2 && execstore.IsRequestRace(err) {
			continue
		}
		return e, err
	}
}

func (s *Service) gate(ctx context.Context, m Meta, p prepared) (Execution, error) {
	var out Execution
	err := s.inTx(ctx, func(tx *execstore.Store) error {
		t, err := tx.Target(ctx, p.req.Target)
		if err != nil {
			return err
		}
		f := facts{target: t, key: dedupKey(t.ID, p.norm.Action, p.norm.Command, p.params, p.req.SessionID)}
		lockKey := "oikos.exec.dedup:" + f.key
		if p.req.SessionID != "" {
			lockKey = "oikos.exec.session:" + p.req.SessionID
		}
		if err := tx.LockRequest(ctx, lockKey); err != nil {
			return err
		}
		if err := s.gather(ctx, tx, p, &f); err != nil {
			return err
		}
		v := s.decide(p, f)
		switch v.outcome {
		case outcomeRefuse:
			return v.refusal
		case outcomeAlreadyQueued:
			e, err := tx.Execution(ctx, v.existingID, true)
			if err != nil {
				return err
			}
			e.AlreadyQueued = true
			e.Message = alreadyQueuedMessage(e)
			out = e
			return nil
		}
		out, err = s.record(ctx, tx, m, p, f, v)
		return err
	})
	if err != nil {
		return Execution{}, err
	}
	return out, nil
}

func alreadyQueuedMessage(e Execution) string {
	msg := fmt.Sprintf("already queued: an identical execution %s is waiting", e.ID)
	if e.ApprovalID != nil {
		msg += " on approval " + *e.ApprovalID
	}
	return msg + "; nothing new was queued"
}

// record writes an execution the gate let through (run now) or queued.
func (s *Service) record(ctx context.Context, tx *execstore.Store, m Meta, p prepared, f facts, v verdict) (Execution, error) {
	id, err := NewID()
	if err != nil {
		return Execution{}, err
	}
	status, authorised := StatusApproved, v.authorisedBy
	var approvalID *string
	if v.outcome == outcomeQueue {
		status, authorised = StatusPendingApproval, ""
		aid, err := NewID()
		if err != nil {
			return Execution{}, err
		}
		approvalID = &aid
	}
	var declared, session *string
	if p.declared != "" {
		d := string(p.declared)
		declared = &d
	}
	if p.req.SessionID != "" {
		session = &p.req.SessionID
	}
	err = tx.InsertExecution(ctx, execstore.NewExecution{ID: id, TargetID: f.target.ID, TargetSlug: f.target.Slug,
		Action: p.norm.Action, Command: p.norm.Command, Params: p.params, Purpose: p.req.Purpose, DeclaredRisk: declared,
		RiskClass: string(v.class), Reasons: v.reasons, Status: status, AuthorisedBy: authorised, ApprovalID: approvalID,
		SessionID: session, CorrelationID: p.req.SessionID, Requester: m.Actor, DedupKey: f.key, TimeoutSeconds: p.req.TimeoutSeconds})
	if err != nil {
		return Execution{}, err
	}
	e, err := tx.Execution(ctx, id, true)
	if err != nil {
		return Execution{}, err
	}
	if err := WriteAudit(ctx, tx, m, p.req.SessionID, "execution.request", f.target.ID, nil, e); err != nil {
		return Execution{}, err
	}
	if err := s.linkEntity(ctx, tx, m, e); err != nil {
		return Execution{}, err
	}
	if err := AppendEvent(ctx, tx, m, "execution.requested", e, PayloadOf(e)); err != nil {
		return Execution{}, err
	}
	if v.outcome == outcomeQueue {
		if err := AppendEvent(ctx, tx, m, "execution.queued", e, PayloadOf(e)); err != nil {
			return Execution{}, err
		}
		ap := ApprovalRequested{ApprovalID: *approvalID, ExecutionID: e.ID, Asked: execstore.Asked{Target: e.Target,
			Action: e.Action, Command: e.Command, Purpose: e.Purpose, RiskClass: e.RiskClass, Reasons: e.Reasons}, SessionID: session}
		if err := AppendEvent(ctx, tx, m, "approval.requested", e, ap); err != nil {
			return Execution{}, err
		}
		e.Message = fmt.Sprintf("queued for approval %s: %s needs an operator's decision", *approvalID, e.RiskClass)
		return e, nil
	}
	if err := AppendEvent(ctx, tx, m, "execution.approved", e, PayloadOf(e)); err != nil {
		return Execution{}, err
	}
	if err := tx.NotifyRunnable(ctx, e.ID); err != nil {
		return Execution{}, err
	}
	e.Message = runMessage(e)
	return e, nil
}

func runMessage(e Execution) string {
	switch e.AuthorisedBy {
	case AuthorisedAssent:
		return "runs now: config_mutation inside this session's assent window"
	case AuthorisedDestructive:
		return "runs now: destructive inside this session's window for " + e.Target
	}
	return "runs now: " + e.RiskClass + " runs unattended"
}

// ApprovalRequested is the approval.requested payload: enough for a dashboard card, and
// for the notification an operator gets (api/internal/notify).
type ApprovalRequested struct {
	ApprovalID  string `json:"approval_id"`
	ExecutionID string `json:"execution_id"`
	execstore.Asked
	SessionID *string `json:"session_id,omitempty"`
}

// linkEntity creates the execution's entity and its edges (G12) in tx: target -targets->
// execution, and task -involves-> execution when a session's task drove it. Its later
// states follow the execution's status (the Registrar moves it from the execution events).
func (s *Service) linkEntity(ctx context.Context, tx *execstore.Store, m Meta, e Execution) error {
	session := ""
	if e.SessionID != nil {
		session = *e.SessionID
	}
	attrs := map[string]any{"command": e.Command, "risk": e.RiskClass, "action": e.Action}
	if session != "" {
		attrs["correlation_id"] = session
	}
	slug := EntitySlug(e.ID)
	plan := graph.BulkPlan{
		Creates: []graph.NewEntity{{Type: "execution", Name: e.ID, State: ExecutionState(e.Status), Attributes: attrs}},
		Edges:   []graph.NewEdge{{Type: "targets", Source: e.Target, Target: slug}},
	}
	if session != "" {
		task, err := tx.SessionTask(ctx, session)
		if err != nil {
			return err
		}
		if task != "" {
			plan.Edges = append(plan.Edges, graph.NewEdge{Type: "involves", Source: task, Target: slug})
		}
	}
	if _, err := s.graph.ApplyBulk(ctx, tx.DB(), graphMeta(m, session), s.graph.Ontology(), plan); err != nil {
		return fmt.Errorf("execution entity and edges: %w", err)
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

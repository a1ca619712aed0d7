package execution

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
)

// Execution statuses (docs/behaviours.md X8, docs/execution-contract.md). Only the api writes
// pending_approval, approved, denied, revoked and cancelled; the scheduler writes running and
// the terminal ones.
const (
	StatusPendingApproval = "pending_approval"
	StatusApproved        = "approved"
	StatusRunning         = "running"
	StatusCompleted       = "completed"
	StatusFailed          = "failed"
	StatusTimedOut        = "timed_out"
	StatusInterrupted     = "interrupted"
	StatusDenied          = "denied"
	StatusRevoked         = "revoked"
	StatusCancelled       = "cancelled"
)

// Terminal reports whether an execution in this status will never change again.
func Terminal(status string) bool {
	switch status {
	case StatusCompleted, StatusFailed, StatusTimedOut, StatusInterrupted, StatusDenied, StatusRevoked, StatusCancelled:
		return true
	}
	return false
}

// Statuses lists every execution status, for validating list filters.
func Statuses() []string {
	return []string{StatusPendingApproval, StatusApproved, StatusRunning, StatusCompleted, StatusFailed,
		StatusTimedOut, StatusInterrupted, StatusDenied, StatusRevoked, StatusCancelled}
}

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalRevoked  = "revoked"
	ApprovalExpired  = "expired"
)

// Decisions and the ways an operator makes them.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
	DecisionRevoke  = "revoke"

	ViaButton            = "button"
	ViaChatAssent        = "chat_assent"
	ViaTypedConfirmation = "typed_confirmation"
	ViaAPI               = "api"
)

// How an execution that runs without a new approval was authorised (executions.authorised_by).
const (
	// AuthorisedAuto: read_only or reversible_low, which run unattended.
	AuthorisedAuto = "auto"
	// AuthorisedAssent: the session's assent window covered a config_mutation.
	AuthorisedAssent = "assent_window"
	// AuthorisedDestructive: the (target, session) destructive window covered it.
	AuthorisedDestructive = "destructive_window"
	// AuthorisedApproval: an operator's decision on its approval.
	AuthorisedApproval = "approval"
)

// Window lengths (docs/execution-contract.md).
const (
	AssentWindow      = 30 * time.Minute
	DestructiveWindow = 15 * time.Minute
)

// Meta says who asks and through what; it lands on audit rows and events.
type Meta struct {
	// Actor is the token name (required).
	Actor string
	// Role is operator, agent or readonly.
	Role string
	// Method and Path of the HTTP request.
	Method, Path string
}

// Roles as the auth package names them (kept as strings so this package does not depend on
// the HTTP layer).
const (
	RoleOperator = "operator"
	RoleAgent    = "agent"
	RoleReadonly = "readonly"
)

// Request is what POST /executions and POST /executions/actions ask for.
type Request struct {
	// Target is an entity slug or id.
	Target string
	// Action is "run" (Command given) or a typed action (Params given).
	Action  string
	Command string
	Params  json.RawMessage
	Purpose string
	// DeclaredRisk is the caller's own class; it can only raise the classification.
	DeclaredRisk string
	// SessionID ties the execution to an agent session (windows, flood, correlation).
	SessionID string
	// TimeoutSeconds bounds the run (default 600).
	TimeoutSeconds int
}

// Execution is one execution as the api answers it (the row execstore reads).
type Execution = execstore.Execution

// TextOf renders output bytes as UTF-8 text: invalid sequences become U+FFFD. NUL and other
// control characters stay (JSON escapes them), so nothing is silently dropped.
func TextOf(b []byte) string { return execstore.TextOf(b) }

// Approval is one approval request and, once made, its decision.
type Approval = execstore.Approval

// Window is an open approval window a decision opened.
type Window = execstore.Window

// Decision is the body of POST /approvals/{id}/decision.
type Decision struct {
	Decision  string `json:"decision"`
	Via       string `json:"via"`
	MessageID string `json:"message_id,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// Confirmation is the phrase the operator typed to approve a destructive execution; when
	// given it must be the approval's ConfirmationPhrase exactly, or nothing is approved.
	Confirmation string `json:"confirmation,omitempty"`
}

// DecisionResult is what a decision answers: the approval and execution after it, and the
// window it opened, if any.
type DecisionResult struct {
	Approval  Approval  `json:"approval"`
	Execution Execution `json:"execution"`
	Window    *Window   `json:"window,omitempty"`
}

// LogChunk is one piece of an execution's output stream.
type LogChunk = execstore.LogChunk

// Logs is a page of output chunks.
type Logs struct {
	ExecutionID string     `json:"execution_id"`
	Status      string     `json:"status"`
	Chunks      []LogChunk `json:"chunks"`
	// NextSeq is the seq to ask for next (after=NextSeq); Done is true when the execution is
	// terminal and no chunk follows.
	NextSeq int  `json:"next_seq"`
	Done    bool `json:"done"`
}

// The errors of this package are the api's (api/internal/apierr and auth's refusal),
// wrapped with detail, so request.ToProblem answers them as it answers every other
// package's; no mapping sits in between. The names below are the ones this package knows
// them by. A malformed request field is an *apierr.FieldError of apierr.ErrInvalid
// (apierr.Invalid); RefusedError and ConflictError carry what a client needs beyond their
// message.
var (
	// ErrNotFound: no such target, execution or approval.
	ErrNotFound = apierr.ErrNotFound
	// ErrForbidden: the caller's role may not do this.
	ErrForbidden = auth.ErrForbidden
)

// FieldError names the request field at fault and why (apierr.FieldError).
type FieldError = apierr.FieldError

// RefusedError is the gate refusing an execution or a decision (HTTP 422). Nothing was
// written.
type RefusedError struct {
	// Code is a stable machine-readable reason: syntax, target_kind, no_guest_agent,
	// approval_pending, target_state, destructive_needs_confirmation, ...
	Code string
	// Reason says why and what to do instead.
	Reason string
	// ApprovalID names the pending approval a flood refusal is waiting on.
	ApprovalID string
	// RiskClass is the class the gate computed, when it got that far.
	RiskClass string
}

// Error implements error.
func (e *RefusedError) Error() string { return "refused: " + e.Reason }

// Unwrap makes a refusal an apierr.ErrRefused.
func (e *RefusedError) Unwrap() error { return apierr.ErrRefused }

// As gives errors.As an *apierr.Extended for the refusal: its reason as the detail, and its
// code, the approval a flood refusal waits on and the risk class as extension members.
func (e *RefusedError) As(target any) bool {
	x, ok := target.(**apierr.Extended)
	if ok {
		*x = &apierr.Extended{Err: e, Detail: e.Reason, Code: e.Code, ApprovalID: e.ApprovalID, RiskClass: e.RiskClass}
	}
	return ok
}

// ConflictError is a decision that lost: the approval was already decided, or the execution
// has already started (HTTP 409).
type ConflictError struct {
	Reason   string
	Approval Approval
}

// Error implements error.
func (e *ConflictError) Error() string { return e.Reason }

// Unwrap makes a lost decision an apierr.ErrAlreadyDecided.
func (e *ConflictError) Unwrap() error { return apierr.ErrAlreadyDecided }

// As gives errors.As an *apierr.Extended for the lost decision: its reason as the detail and
// the approval as it now stands.
func (e *ConflictError) As(target any) bool {
	x, ok := target.(**apierr.Extended)
	if ok {
		a := e.Approval
		*x = &apierr.Extended{Err: e, Detail: e.Reason, Approval: &a}
	}
	return ok
}

// Forbidden wraps ErrForbidden with the reason.
func Forbidden(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrForbidden, fmt.Sprintf(format, args...))
}

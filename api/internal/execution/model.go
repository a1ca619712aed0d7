package execution

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/auth"
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

// Execution is one execution as the api answers it.
type Execution struct {
	ID             string          `json:"id"`
	Target         string          `json:"target"`
	TargetID       string          `json:"target_id"`
	Action         string          `json:"action"`
	Command        string          `json:"command"`
	Params         json.RawMessage `json:"params"`
	Purpose        string          `json:"purpose"`
	DeclaredRisk   *string         `json:"declared_risk"`
	RiskClass      string          `json:"risk_class"`
	Reasons        []string        `json:"reasons"`
	Status         string          `json:"status"`
	AuthorisedBy   string          `json:"authorised_by"`
	ApprovalID     *string         `json:"approval_id"`
	SessionID      *string         `json:"session_id"`
	CorrelationID  string          `json:"correlation_id"`
	RequestedBy    string          `json:"requested_by"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	ExitCode       *int            `json:"exit_code"`
	// Output is the output tail as UTF-8 text (invalid bytes replaced); OutputBase64 has the
	// exact bytes. Both are omitted from list answers (read one execution for them).
	Output          *string         `json:"output,omitempty"`
	OutputBase64    *string         `json:"output_base64,omitempty"`
	OutputTruncated bool            `json:"output_truncated"`
	Result          json.RawMessage `json:"result"`
	Error           string          `json:"error"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	StartedAt       *time.Time      `json:"started_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	// AlreadyQueued is set on the answer to a request identical to a pending one (X7).
	AlreadyQueued bool `json:"already_queued,omitempty"`
	// Message says in words what happened, for the agent and the CLI.
	Message string `json:"message,omitempty"`

	dedupKey string
}

// setOutput fills the two output fields from the stored bytes.
func (e *Execution) setOutput(b []byte) {
	text := TextOf(b)
	enc := base64.StdEncoding.EncodeToString(b)
	e.Output, e.OutputBase64 = &text, &enc
}

// TextOf renders output bytes as UTF-8 text: invalid sequences become U+FFFD. NUL and other
// control characters stay (JSON escapes them), so nothing is silently dropped.
func TextOf(b []byte) string { return strings.ToValidUTF8(string(b), "\uFFFD") }

// Approval is one approval request and, once made, its decision.
type Approval struct {
	ID          string    `json:"id"`
	ExecutionID string    `json:"execution_id"`
	SessionID   *string   `json:"session_id"`
	TargetID    string    `json:"target_id"`
	Target      string    `json:"target"`
	Action      string    `json:"action"`
	Command     string    `json:"command"`
	Purpose     string    `json:"purpose"`
	RiskClass   string    `json:"risk_class"`
	Reasons     []string  `json:"reasons"`
	Status      string    `json:"status"`
	RequestedBy string    `json:"requested_by"`
	RequestedAt time.Time `json:"requested_at"`
	// DecidedBy is the operator who decided: the token's name on a direct decision, or the
	// operator whose chat message an agent relayed (RelayedBy then names the agent token).
	DecidedBy *string `json:"decided_by"`
	// RelayedBy is the agent token that relayed the operator's chat message the decision was
	// proved from; null for a direct decision.
	RelayedBy *string    `json:"relayed_by"`
	DecidedAt *time.Time `json:"decided_at"`
	Via       *string    `json:"via"`
	MessageID *string    `json:"message_id"`
	Reason    string     `json:"reason"`
	// ExecutionStatus is the status of the execution it gates.
	ExecutionStatus string `json:"execution_status"`
	// ConfirmationPhrase is what an operator types to approve a destructive execution
	// (assent.ConfirmationPhrase); empty for other classes. The dashboard shows it and sends
	// it back as Decision.Confirmation, so the rule has one home.
	ConfirmationPhrase string `json:"confirmation_phrase,omitempty"`
}

// Window is an open approval window a decision opened.
type Window struct {
	ID        string    `json:"id"`
	Kind      string    `json:"kind"`
	SessionID string    `json:"session_id"`
	Target    string    `json:"target,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

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
type LogChunk struct {
	Seq    int       `json:"seq"`
	Stream string    `json:"stream"`
	At     time.Time `json:"at"`
	// Data is the exact bytes, base64 in JSON; Text is the same as UTF-8 text.
	Data []byte `json:"data"`
	Text string `json:"text"`
}

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

// forbidden wraps ErrForbidden with the reason.
func forbidden(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrForbidden, fmt.Sprintf(format, args...))
}

package execstore

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"
)

// The rows the execution path reads, in the shape the api answers with (the execution
// package names them as its own: execution.Execution = execstore.Execution).

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

// Asked is what an approval asks an operator about: the execution it gates, as a dashboard
// card or a notification shows it. Approval and the approval.requested payload
// (execution.ApprovalRequested) both carry it, so the two say the same of it.
type Asked struct {
	Target    string   `json:"target"`
	Action    string   `json:"action"`
	Command   string   `json:"command"`
	Purpose   string   `json:"purpose"`
	RiskClass string   `json:"risk_class"`
	Reasons   []string `json:"reasons"`
}

// Approval is one approval request and, once made, its decision.
type Approval struct {
	ID          string  `json:"id"`
	ExecutionID string  `json:"execution_id"`
	SessionID   *string `json:"session_id"`
	TargetID    string  `json:"target_id"`
	Asked
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

// LogChunk is one piece of an execution's output stream.
type LogChunk struct {
	Seq    int       `json:"seq"`
	Stream string    `json:"stream"`
	At     time.Time `json:"at"`
	// Data is the exact bytes, base64 in JSON; Text is the same as UTF-8 text.
	Data []byte `json:"data"`
	Text string `json:"text"`
}

// Session is the approval's session id, "" when it belongs to none.
func (a Approval) Session() string {
	if a.SessionID == nil {
		return ""
	}
	return *a.SessionID
}

// Target is the target entity as the gate reads it.
type Target struct {
	ID         string
	Slug       string
	Type       string
	State      string
	Attributes map[string]any
}

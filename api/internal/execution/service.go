// Package execution is the api side of the one gated execution path (docs/architecture.md
// "One gated execution path", docs/behaviours.md X3-X10, G12): it takes a request to run
// something on a machine, runs the authoritative gate over it, and records what the gate
// decided. It holds the path's model (executions, approvals, windows, decisions, the errors)
// and its reads. Below it, api/internal/execution/decision takes an operator's decision on a
// queued execution and moves the execution with it, and api/internal/execution/registrar
// keeps the graph in step with what executions did; both import this package, never the
// other way. The SQL is api/internal/storage/execstore's.
//
// Everything one request changes is written in one transaction: the execution, its approval,
// the execution entity with its targets and involves edges (through the graph service), the
// windows a decision opens, the audit row, the events, and the NOTIFY that wakes the
// scheduler. A request that fails leaves nothing behind, and a committed one is complete.
//
// The gate never trusts its caller. The agent's declared risk can only raise the class the
// classifier finds; typed actions (pct_create, restart, ...) are classified by the command
// they stand for, never by a class the caller or the action's code asserts, because the
// original system let a restart of the fleet's reverse proxy run with a hard-coded
// reversible_low. Decisions record the execution's real class (the original hard-coded
// config_mutation on every approval) and move the execution (the original left denied and
// revoked executions pending forever).
package execution

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/execstore"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/policy"
)

// Graph is what the execution path needs from the graph service: its bulk path, which
// validates, audits and emits events inside the caller's transaction, so the execution
// entity and its edges commit with the execution or not at all. *graph.Service implements it.
type Graph interface {
	// Ontology is the current ontology (target kinds are decided through is-a).
	Ontology() *ontology.Ontology
	ApplyBulk(ctx context.Context, tx storage.DB, m graph.Meta, o *ontology.Ontology, p graph.BulkPlan) (graph.BulkResult, error)
}

// Options configure a Service.
type Options struct {
	Pool *storage.Pool
	// Policy classifies commands and decides the gate.
	Policy *policy.Policy
	Graph  Graph
	Logger zerolog.Logger
}

// Service is the gate, the decisions and the reads of executions and approvals. It is safe
// for concurrent use.
type Service struct {
	store  *execstore.Store
	policy *policy.Policy
	graph  Graph
	log    zerolog.Logger
}

// New builds a Service.
func New(opts Options) (*Service, error) {
	if opts.Pool == nil {
		return nil, errors.New("execution: a pool is required")
	}
	if opts.Policy == nil {
		return nil, errors.New("execution: a policy is required")
	}
	if opts.Graph == nil {
		return nil, errors.New("execution: a graph service is required")
	}
	return &Service{store: execstore.New(opts.Pool), policy: opts.Policy, graph: opts.Graph, log: opts.Logger}, nil
}

// CheckMeta refuses a Meta without an actor: every audit row and event names who acted.
func CheckMeta(m Meta) error {
	if m.Actor == "" {
		return errors.New("execution: Meta.Actor is required (audit rows name who acted)")
	}
	return nil
}

// graphMeta is the graph's view of the request: the session is the correlation id, so the
// execution entity's events line up with the execution's.
func graphMeta(m Meta, sessionID string) graph.Meta {
	return graph.Meta{Actor: m.Actor, Role: m.Role, Method: m.Method, Path: m.Path, CorrelationID: sessionID}
}

// NewID returns a uuid v7: executions sort by creation in their primary key.
func NewID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return id.String(), nil
}

// dedupKey identifies identical requests: same target, action, command, params and session.
// Parts are joined with NUL, which none of them can contain unescaped (params are JSON).
func dedupKey(targetID, action, command string, params []byte, session string) string {
	h := sha256.New()
	for _, p := range []string{targetID, action, command, string(params), session} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WriteAudit appends one audit row in tx (shared/audit); before/after are marshalled, nil
// stays SQL NULL.
func WriteAudit(ctx context.Context, tx *execstore.Store, m Meta, correlation, action, entityID string, before, after any) error {
	return tx.WriteAudit(ctx, audit.Row{Actor: m.Actor, Action: action, Method: m.Method, Path: m.Path,
		CorrelationID: correlation, EntityID: entityID, Before: before, After: after})
}

// EventPayload is the payload every execution.* event carries (docs/execution-contract.md).
type EventPayload struct {
	ExecutionID string  `json:"execution_id"`
	Status      string  `json:"status"`
	Target      string  `json:"target"`
	Action      string  `json:"action"`
	RiskClass   string  `json:"risk_class"`
	ApprovalID  *string `json:"approval_id,omitempty"`
	SessionID   *string `json:"session_id,omitempty"`
	ExitCode    *int    `json:"exit_code,omitempty"`
}

// PayloadOf is e's EventPayload.
func PayloadOf(e Execution) EventPayload {
	return EventPayload{ExecutionID: e.ID, Status: e.Status, Target: e.Target, Action: e.Action,
		RiskClass: e.RiskClass, ApprovalID: e.ApprovalID, SessionID: e.SessionID, ExitCode: e.ExitCode}
}

// AppendEvent writes an event about an execution: entity_id is the target, correlation_id
// the session.
func AppendEvent(ctx context.Context, tx *execstore.Store, m Meta, typ string, e Execution, payload any) error {
	corr := ""
	if e.SessionID != nil {
		corr = *e.SessionID
	}
	return tx.AppendEvent(ctx, eventbus.Event{Type: typ, EntityID: e.TargetID, CorrelationID: corr, Actor: m.Actor}, payload)
}

// inTx runs fn in a transaction on the pool.
func (s *Service) inTx(ctx context.Context, fn func(tx *execstore.Store) error) error {
	return s.store.InTx(ctx, fn)
}

// ExecutionState maps an execution status to the state of its execution entity in the
// ontology, which names an approved execution "runnable", a completed one "succeeded" and a
// revoked one "cancelled".
func ExecutionState(status string) string {
	switch status {
	case StatusApproved:
		return "runnable"
	case StatusCompleted:
		return "succeeded"
	case StatusRevoked:
		return "cancelled"
	}
	return status
}

// EntitySlug is the slug of an execution's entity: the full id, never a prefix (an 8-char
// prefix of a uuid v7 is a timestamp, and two executions a few seconds apart collided).
func EntitySlug(id string) string { return "execution:" + id }

// TrimLimit bounds free-text fields: s without surrounding white space, or a field error
// when it is longer than max bytes.
func TrimLimit(field, s string, max int) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) > max {
		return "", apierr.Invalid(field, "is longer than %d bytes", max)
	}
	return s, nil
}

// Package graph is the api's single mutation path for the knowledge graph: entities,
// relationships and knowledge. HTTP handlers, agent tools and the seed ingest all call it, so
// there is exactly one copy of every rule (docs/behaviours.md G2-G5, G8): ontology validation, the
// audit row, the outbox event, idempotency and check re-derivation happen in the same
// transaction as the change they describe, or not at all.
//
// The original system had three drifted copies of these mutations (HTTP, MCP and seed), each
// with its own subset of validation, audit and check regeneration; this package exists so
// that cannot happen again.
package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/graphstore"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
)

// Sentinel errors: the api's (api/internal/apierr), under the names this package's callers
// know them by. api/internal/request maps each to its answer; nothing here knows HTTP.
var (
	// ErrNotFound: no entity (or relationship) with that slug or id.
	ErrNotFound = apierr.ErrNotFound
	// ErrVersionConflict: the expected version is not the current one.
	ErrVersionConflict = apierr.ErrVersionConflict
	// ErrDuplicate: an entity with that slug already exists.
	ErrDuplicate = apierr.ErrDuplicate
	// ErrIdempotencyMismatch: the Idempotency-Key was used before with another body.
	ErrIdempotencyMismatch = apierr.ErrIdempotencyMismatch
	// ErrSchedulerOwned: the attribute is written only by the scheduler.
	ErrSchedulerOwned = apierr.ErrSchedulerOwned
	// ErrPreconditionFailed: a state transition's precondition does not hold.
	ErrPreconditionFailed = apierr.ErrPreconditionFailed
	// ErrInvalid: a malformed request value (empty name, bad slug, ...).
	ErrInvalid = apierr.ErrInvalid
)

// SchedulerOwnedKeys are the attribute keys only the scheduler writes (into entity_status,
// not attributes); an update that names one is refused, never silently stripped.
var SchedulerOwnedKeys = []string{"health", "last_check_at", "last_check"}

// ValidationError names the field at fault and why (apierr.FieldError). It wraps the
// underlying sentinel (ontology.ErrUnknownType, ErrSchedulerOwned, ...) so errors.Is still
// matches it, and that sentinel alone decides how the api answers.
type ValidationError = apierr.FieldError

func invalid(field string, sentinel error, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...), Err: sentinel}
}

// Meta says who asked for a mutation and through what; it lands on the audit row and event.
type Meta struct {
	// Actor is the token name, "seed", "scheduler", an agent session, ...; required.
	Actor string
	// Role of the actor (operator, agent, readonly).
	Role string
	// Method and Path of the HTTP request ("" for non-HTTP callers).
	Method, Path string
	// CorrelationID ties the audit row and event to a request or session.
	CorrelationID string
	// IdempotencyKey, when set on a create, makes the create replayable.
	IdempotencyKey string
}

// Entity, Relationship and Knowledge are the api's row types (api/internal/storage): the
// graph returns exactly what the reads return.
type (
	// Entity is one node of the graph, with the health the scheduler recorded for it.
	Entity = storage.Entity
	// Relationship is one edge; ValidTo is set once it has ended.
	Relationship = storage.Relationship
	// Knowledge is a document, investigation or runbook: an entity with a markdown body.
	Knowledge = storage.Knowledge
)

// CreateEntityInput is the body of an entity create.
type CreateEntityInput struct {
	// Type must exist in the ontology and be concrete.
	Type string `json:"type"`
	// Name becomes the slug "<type>:<name>".
	Name string `json:"name"`
	// State must be declared for the type; "" means the type's default state.
	State string `json:"state,omitempty"`
	// Attributes are checked against the type's schema; undeclared keys are allowed.
	Attributes map[string]any `json:"attributes,omitempty"`
}

// KnowledgeInput is the body of a knowledge upsert.
type KnowledgeInput struct {
	// Slug is "<kind>:<name>".
	Slug string `json:"slug"`
	// Kind is document, investigation or runbook.
	Kind string `json:"kind"`
	// Title is required; Body is markdown; Tags help search.
	Title string   `json:"title"`
	Body  string   `json:"body"`
	Tags  []string `json:"tags,omitempty"`
	// About is an optional entity slug; an about edge to it is created when missing.
	About string `json:"about,omitempty"`
}

// Replay is a stored response to an idempotent create: the caller returns it verbatim.
type Replay struct {
	// Status is the HTTP status of the original response (201).
	Status int
	// Body is the original response body (the created entity as JSON).
	Body json.RawMessage
}

// Options configure a Service.
type Options struct {
	// Pool is where the graph lives (its SQL is api/internal/storage/graphstore's).
	Pool *storage.Pool
	// Ontology validates mutations until SyncOntology / SetOntology replace it.
	Ontology *ontology.Ontology
	// Logger receives derivation warnings.
	Logger zerolog.Logger
}

// Service is the graph's mutation and lookup path. It is safe for concurrent use.
type Service struct {
	pool  *storage.Pool
	store *graphstore.Store
	onto  atomic.Pointer[ontology.Ontology]
	log   zerolog.Logger
}

// New builds a Service. The ontology is the one mutations are validated against;
// SyncOntology replaces it.
func New(opts Options) (*Service, error) {
	if opts.Pool == nil {
		return nil, errors.New("graph: a pool is required")
	}
	if opts.Ontology == nil {
		return nil, errors.New("graph: an ontology is required")
	}
	s := &Service{pool: opts.Pool, store: graphstore.New(opts.Pool, opts.Logger), log: opts.Logger}
	s.onto.Store(opts.Ontology)
	return s, nil
}

// Ontology returns the ontology mutations are currently validated against.
func (s *Service) Ontology() *ontology.Ontology { return s.onto.Load() }

// Pool returns the pool the service writes through (the seed ingest reads with it).
func (s *Service) Pool() *storage.Pool { return s.pool }

// newID returns a uuid v7: time-ordered, so ids of entities created together sort together
// and index inserts stay local.
func newID() (string, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("generate id: %w", err)
	}
	return id.String(), nil
}

// NewID returns a fresh uuid v7 string (for callers that need a correlation id).
func NewID() (string, error) { return newID() }

func checkMeta(m Meta) error {
	if m.Actor == "" {
		return errors.New("graph: Meta.Actor is required (audit rows name who acted)")
	}
	return nil
}

// auditOf is the audit row of a mutation m made: before/after are marshalled, nil stays
// SQL NULL.
func auditOf(m Meta, action, entityID string, before, after any) audit.Row {
	return audit.Row{Actor: m.Actor, Action: action, Method: m.Method, Path: m.Path, CorrelationID: m.CorrelationID,
		EntityID: entityID, Before: before, After: after}
}

// eventOf is the outbox event of type typ a mutation m made about entityID.
func eventOf(m Meta, typ, entityID string) eventbus.Event {
	return eventbus.Event{Type: typ, EntityID: entityID, CorrelationID: m.CorrelationID, Actor: m.Actor}
}

// writeAudit appends one audit row in st's transaction (shared/audit).
func writeAudit(ctx context.Context, st *graphstore.Store, m Meta, action, entityID string, before, after any) error {
	return st.WriteAudit(ctx, auditOf(m, action, entityID, before, after))
}

// appendEvent writes the mutation's event to the outbox in st's transaction.
func appendEvent(ctx context.Context, st *graphstore.Store, m Meta, typ, entityID string, payload any) error {
	return st.AppendEvent(ctx, eventOf(m, typ, entityID), payload)
}

// inTx runs fn in a transaction on the service's pool.
func (s *Service) inTx(ctx context.Context, fn func(st *graphstore.Store) error) error {
	return s.store.InTx(ctx, fn)
}

// on is the graph's store on a caller's transaction.
func (s *Service) on(tx storage.DB) *graphstore.Store { return s.store.On(tx) }

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
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/checksync"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
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

// Entity, Relationship and Knowledge are the api's row types (api/internal/store): the
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
	// Pool is where the graph lives.
	Pool *pgxpool.Pool
	// Ontology validates mutations until SyncOntology / SetOntology replace it.
	Ontology *ontology.Ontology
	// Logger receives derivation warnings.
	Logger zerolog.Logger
}

// Service is the graph's mutation and lookup path. It is safe for concurrent use.
type Service struct {
	pool  *pgxpool.Pool
	onto  atomic.Pointer[ontology.Ontology]
	log   zerolog.Logger
	check *checksync.Syncer
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
	s := &Service{pool: opts.Pool, log: opts.Logger, check: checksync.New(opts.Logger)}
	s.onto.Store(opts.Ontology)
	return s, nil
}

// Ontology returns the ontology mutations are currently validated against.
func (s *Service) Ontology() *ontology.Ontology { return s.onto.Load() }

// Pool returns the pool the service writes through (the seed ingest reads with it).
func (s *Service) Pool() *pgxpool.Pool { return s.pool }

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

// writeAudit appends one audit row in tx (shared/audit).
func writeAudit(ctx context.Context, tx pgx.Tx, m Meta, action, entityID string, before, after any) error {
	return audit.Write(ctx, tx, auditOf(m, action, entityID, before, after))
}

// appendEvent writes the mutation's event to the outbox in tx.
func appendEvent(ctx context.Context, tx pgx.Tx, m Meta, typ, entityID string, payload any) error {
	_, err := eventbus.Append(ctx, tx, eventbus.Event{Type: typ, EntityID: entityID,
		CorrelationID: m.CorrelationID, Actor: m.Actor}, payload)
	return err
}

// queueEvent is appendEvent for a batch (see eventbus.Queue).
func queueEvent(b *pgx.Batch, m Meta, typ, entityID string, payload any) error {
	return eventbus.Queue(b, eventbus.Event{Type: typ, EntityID: entityID, CorrelationID: m.CorrelationID, Actor: m.Actor}, payload, nil)
}

// inTx runs fn in a transaction on the service's pool.
func (s *Service) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pg.InTx(ctx, s.pool, fn)
}

// batchTx is the transaction a pipelined mutation runs in: a caller's transaction, or one of
// its own on a pooled connection whose BEGIN rides in the first batch sent and whose COMMIT
// rides in the batch sent by finish. A mutation written against it therefore has one
// implementation for both, and costs no round trip for BEGIN or COMMIT when it owns the
// transaction.
type batchTx struct {
	// q is the caller's transaction, or the connection the own transaction runs on.
	q pg.Querier
	// conn is set when the transaction is batchTx's own.
	conn *pgxpool.Conn
	// begun: a batch carrying BEGIN was sent; committed: the COMMIT batch succeeded.
	begun, committed bool
}

// batch returns a new batch; in an own transaction not yet begun, it starts with BEGIN.
func (t *batchTx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	if t.conn != nil && !t.begun {
		b.BeginTx(pgx.TxOptions{})
	}
	return b
}

// send sends b and reads all its results (the queued callbacks run in order).
func (t *batchTx) send(ctx context.Context, b *pgx.Batch) error {
	if t.conn != nil && !t.begun {
		if len(b.QueuedQueries) == 0 || b.QueuedQueries[0].SQL != "begin" {
			return errors.New("graph: the first batch of an own transaction must come from batch()")
		}
		t.begun = true
	}
	return t.q.SendBatch(ctx, b).Close()
}

// finish sends the mutation's last batch; in an own transaction COMMIT is queued at its end,
// after the outbox appends, so the outbox lock is released by the same batch that took it.
// In PostgreSQL's pipeline a failed statement makes the server skip the rest of the batch,
// so COMMIT runs only if everything before it succeeded. The callbacks queued before COMMIT
// must therefore fail only when the server reported an error: one that failed on its own
// would report a change as failed that the server had already committed.
func (t *batchTx) finish(ctx context.Context, b *pgx.Batch) error {
	if t.conn == nil {
		return t.send(ctx, b)
	}
	if !t.begun {
		return errors.New("graph: finish before the transaction began")
	}
	b.Queue("commit").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() == "ROLLBACK" {
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	if err := t.send(ctx, b); err != nil {
		return err
	}
	t.committed = true
	return nil
}

// inBatchTx runs fn in an own batchTx on a pooled connection. Whatever fn did not commit
// (an error, a no-op that stopped early, a panic) is rolled back before the connection goes
// back to the pool.
func (s *Service) inBatchTx(ctx context.Context, fn func(t *batchTx) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer conn.Release() // a connection still inside a transaction is closed, not reused
	t := &batchTx{q: conn, conn: conn}
	defer func() {
		if t.begun && !t.committed && conn.Conn().PgConn().TxStatus() != 'I' {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "rollback")
		}
	}()
	return fn(t)
}

// Package audit is the one writer of the audit log (table audit_log): every mutation of every
// daemon records who changed what, through which request, with the before and after of the
// thing changed, in the transaction of the change itself (CONTRIBUTING.md: a change, its audit
// row and its event commit together or not at all).
//
// A row is written one of four ways, all with the same columns and encoding:
//
//   - Write: an INSERT in the caller's transaction;
//   - Queue: the same INSERT queued into a pgx.Batch (a pipelined mutation);
//   - GuardedInsert + Row.Args: the INSERT as the last part of the caller's own statement, after
//     its WITH clause, so a change and its audit row cost one statement (the graph's PATCH);
//   - Rows (or Copy): many rows collected and written by COPY (the seed ingest).
//
// Nothing else inserts into audit_log.
package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oikos-hq/oikos/shared/pg"
)

// Table is the audit log's table.
const Table = "audit_log"

// columns are the columns every form writes, in the order Row.Args binds them.
var columns = []string{"actor", "action", "method", "path", "correlation_id", "entity_id", "before", "after"}

// ErrInvalid is returned for a row without its actor or action.
var ErrInvalid = errors.New("audit: actor and action are required")

// Row is one audit row.
type Row struct {
	// Actor is who acted: a token name, "seed", "scheduler", an agent session; required.
	Actor string
	// Action names the change, e.g. "entity.update", "signal.ack"; required.
	Action string
	// Method and Path of the HTTP request ("" for other callers).
	Method, Path string
	// CorrelationID ties the row to a request or session (and to the change's event).
	CorrelationID string
	// EntityID is the entity the change concerns (a uuid); "" stores NULL.
	EntityID string
	// Before and After are the changed thing before and after the change, marshalled as JSON;
	// nil stores NULL. A json.RawMessage or []byte is taken as already-marshalled JSON (empty:
	// NULL).
	Before, After any
}

// Args returns r's values in column order, as Write, Queue and GuardedInsert bind them:
// actor, action, method, path, correlation_id, entity_id, before, after.
func (r Row) Args() ([]any, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	b, err := encode(r.Before)
	if err != nil {
		return nil, fmt.Errorf("audit %s: before: %w", r.Action, err)
	}
	a, err := encode(r.After)
	if err != nil {
		return nil, fmt.Errorf("audit %s: after: %w", r.Action, err)
	}
	var entity *string
	if r.EntityID != "" {
		entity = &r.EntityID
	}
	return []any{r.Actor, r.Action, r.Method, r.Path, r.CorrelationID, entity, b, a}, nil
}

func (r Row) check() error {
	if r.Actor == "" || r.Action == "" {
		return fmt.Errorf("%w (actor %q, action %q)", ErrInvalid, r.Actor, r.Action)
	}
	return nil
}

// encode returns v as JSON; nil (and empty raw JSON) is nil, which binds as SQL NULL.
func encode(v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return nilIfEmpty(x), nil
	case []byte:
		return nilIfEmpty(x), nil
	}
	return json.Marshal(v)
}

func nilIfEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// insertSQL is the INSERT Write and Queue run.
var insertSQL = `INSERT INTO ` + Table + ` (` + strings.Join(columns, ", ") + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// Write inserts r in q's transaction.
func Write(ctx context.Context, q pg.Querier, r Row) error {
	args, err := r.Args()
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx, insertSQL, args...); err != nil {
		return fmt.Errorf("audit %s: %w", r.Action, err)
	}
	return nil
}

// Queue queues the INSERT of r into b; it is written when the batch runs, in the batch's
// transaction. r is encoded now.
func Queue(b *pgx.Batch, r Row) error {
	args, err := r.Args()
	if err != nil {
		return err
	}
	b.Queue(insertSQL, args...)
	return nil
}

// GuardedInsert returns the INSERT of one audit row for the end of a caller's statement that
// begins with its own WITH clause, e.g.
//
//	WITH changed AS (UPDATE entities SET ... WHERE id = $1 AND version = $3 RETURNING id)
//	<GuardedInsert("changed", 4)>
//
// bound with the caller's arguments followed by Row.Args (here $1-$3, then $4-$11). The row's
// actor is selected from guard, the name of one of the caller's CTEs, so the statement fails
// (actor is NOT NULL; a scalar subquery may not return several rows) unless guard yields
// exactly one row: a change that matched nothing aborts the transaction instead of leaving an
// audit row for it. Build the SQL once (a package variable), not per call.
func GuardedInsert(guard string, first int) string {
	p := make([]string, len(columns))
	for i := range columns {
		p[i] = fmt.Sprintf("$%d", first+i)
	}
	p[0] = fmt.Sprintf("(SELECT %s::text FROM %s)", p[0], guard)
	return `INSERT INTO ` + Table + ` (` + strings.Join(columns, ", ") + `) VALUES (` + strings.Join(p, ", ") + `)`
}

// Rows collects audit rows for one COPY (a bulk write: the seed ingest). Add encodes each
// row at once, so a row no longer refers to values the caller changes afterwards; Copy
// writes them all. The zero value is ready to use.
type Rows struct {
	rows [][]any
}

// Add encodes r and keeps it for Copy.
func (c *Rows) Add(r Row) error {
	if err := r.check(); err != nil {
		return err
	}
	b, err := encode(r.Before)
	if err != nil {
		return fmt.Errorf("audit %s: before: %w", r.Action, err)
	}
	a, err := encode(r.After)
	if err != nil {
		return fmt.Errorf("audit %s: after: %w", r.Action, err)
	}
	// COPY is binary: the entity id goes as a uuid value.
	var entity any
	if r.EntityID != "" {
		u, err := uuid.Parse(r.EntityID)
		if err != nil {
			return fmt.Errorf("audit %s: entity id %q: %w", r.Action, r.EntityID, err)
		}
		entity = pgtype.UUID{Bytes: u, Valid: true}
	}
	c.rows = append(c.rows, []any{r.Actor, r.Action, r.Method, r.Path, r.CorrelationID, entity, b, a})
	return nil
}

// Len is the number of rows collected.
func (c *Rows) Len() int { return len(c.rows) }

// Copy writes the collected rows by COPY in q's transaction and forgets them.
func (c *Rows) Copy(ctx context.Context, q pg.Querier) error {
	if len(c.rows) == 0 {
		return nil
	}
	if _, err := q.CopyFrom(ctx, pgx.Identifier{Table}, columns, pgx.CopyFromRows(c.rows)); err != nil {
		return fmt.Errorf("audit: copy %d rows: %w", len(c.rows), err)
	}
	c.rows = nil
	return nil
}

// Copy writes rows by COPY in q's transaction (Rows, for rows at hand).
func Copy(ctx context.Context, q pg.Querier, rows []Row) error {
	var c Rows
	for _, r := range rows {
		if err := c.Add(r); err != nil {
			return err
		}
	}
	return c.Copy(ctx, q)
}

package graphstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/api/internal/ids"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/checksync"
	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/checks"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
)

// qUpdateAttributesHead and qUpdateAttributes write the entity and its audit row in one
// statement ($1-$3 the update's, then audit.Row.Args). The audit row takes its actor from
// the updated row (audit.GuardedInsert), so an update that matched nothing fails on the NOT
// NULL actor and aborts the transaction: the COMMIT queued behind it in the same batch then
// never runs. The row lock taken by the first batch makes a miss impossible; the statement
// does not rely on it.
const qUpdateAttributesHead = `WITH changed AS (
		UPDATE entities SET attributes = $2, version = version + 1, updated_at = now()
		WHERE id = $1 AND version = $3 RETURNING id)
	`

// qUpdateAttributes is qUpdateAttributesHead with shared/audit's guarded insert.
var qUpdateAttributes = qUpdateAttributesHead + audit.GuardedInsert("changed", 4)

// qStatusOf reads the entity_status row of $1.
const qStatusOf = `SELECT health, reason, last_check_at FROM entity_status WHERE entity_id = $1`

// Locked is what the first round trip of an attribute update read: the entity, locked FOR
// NO KEY UPDATE, whether it has an entity_status row, and the transaction's now() (which the
// update writes as updated_at).
type Locked struct {
	Entity    storage.Entity
	HasStatus bool
	Now       time.Time
}

// AttrUpdate is an attribute update decided between its two round trips.
type AttrUpdate struct {
	// Next is the entity as it will be: the merged attributes, version + 1, updated_at Now.
	Next storage.Entity
	// Audit is the entity.update audit row.
	Audit audit.Row
	// Event is the entity.updated event, with Payload; Checks is the checks.changed event
	// (AnnounceChecks) appended when check definitions change.
	Event, Checks eventbus.Event
	Payload       any
}

// UpdateAttributes is the attribute update in two round trips to the database. The first
// begins the transaction (when the Store runs on the pool: on a transaction the update runs
// in it, and the outbox lock is then held until the caller commits), locks and reads the
// entity ref names and reads its check definitions; with lockHeld it first locks the backup
// targets the entity holds (checksync.QueueLockHeld), for an update that may change the
// attributes their checks derive from. decide then gets what was read and returns the
// update, or nil when nothing changes (the entity read is returned and nothing is written).
// The second round trip writes the entity, its audit row, its re-derived checks and its
// events, and commits: the outbox lock (ADR 0002) is so held only while the server executes
// the end of the second batch.
func (s *Store) UpdateAttributes(ctx context.Context, o *ontology.Ontology, ref string, lockHeld bool,
	decide func(Locked) (*AttrUpdate, error)) (storage.Entity, error) {
	pool, own := s.onPool()
	if !own {
		return s.updateAttributes(ctx, &batchTx{q: s.db}, o, ref, lockHeld, decide)
	}
	var out storage.Entity
	err := inBatchTx(ctx, pool, func(t *batchTx) error {
		var err error
		out, err = s.updateAttributes(ctx, t, o, ref, lockHeld, decide)
		return err
	})
	if err != nil {
		return storage.Entity{}, err
	}
	return out, nil
}

// updateAttributes is the one implementation of an attribute update, in t's transaction.
func (s *Store) updateAttributes(ctx context.Context, t *batchTx, o *ontology.Ontology, ref string, lockHeld bool,
	decide func(Locked) (*AttrUpdate, error)) (storage.Entity, error) {
	// Round trip 1: lock and read the entity (and the transaction's timestamp), then read
	// its check definitions.
	var l Locked
	first := t.batch()
	if lockHeld {
		// This may change the checks of the backup targets the entity holds: lock them
		// with it, in id order (see holderAttributesChanged below).
		checksync.QueueLockHeld(first, ref, ids.IsUUID(ref))
	}
	first.Queue(storage.EntitySQL(ref, true, `, st.entity_id IS NOT NULL, now()`), ref).QueryRow(func(row pgx.Row) error {
		var err error
		l.Entity, err = storage.ScanEntity(row, &l.HasStatus, &l.Now)
		return storage.EntityReadError(ref, err)
	})
	prefetched := checksync.QueuePrefetch(first, ref, ids.IsUUID(ref))
	if err := t.send(ctx, first); err != nil {
		return storage.Entity{}, err
	}
	u, err := decide(l)
	if err != nil {
		return storage.Entity{}, err
	}
	if u == nil {
		return l.Entity, nil
	}
	cur, next := l.Entity, u.Next

	// Round trip 2: the entity and its audit row, the checks re-derived from the new
	// attributes, the events last (they take the outbox lock), and COMMIT.
	row, err := u.Audit.Args()
	if err != nil {
		return storage.Entity{}, err
	}
	w := &pgx.Batch{}
	w.Queue(qUpdateAttributes, append([]any{cur.ID, next.Attributes, cur.Version}, row...)...)
	target := checks.Target{ID: next.ID, Slug: next.Slug, Type: next.Type, Name: next.Name, State: next.State, Attributes: next.Attributes}
	changes, statusCreated, err := s.check.SyncPrefetched(ctx, t.q, o, target, prefetched, l.HasStatus, w)
	if err != nil {
		return storage.Entity{}, fmt.Errorf("derive checks of %s: %w", cur.Slug, err)
	}
	if holderAttributesChanged(cur.Attributes, next.Attributes) {
		// The backup targets this entity holds derive their checks from these attributes:
		// write the entity now, then re-derive theirs (rare: an os change of a holder).
		if err := t.send(ctx, w); err != nil {
			return storage.Entity{}, fmt.Errorf("update %s: %w", cur.Slug, err)
		}
		w = &pgx.Batch{}
		held, err := s.check.SyncHeldBackups(ctx, t.q, o, cur.ID)
		if err != nil {
			return storage.Entity{}, fmt.Errorf("derive checks of the backups %s holds: %w", cur.Slug, err)
		}
		changes.Merge(held)
	}
	if statusCreated {
		// The entity is monitored now: answer with the status row the batch creates.
		w.Queue(qStatusOf, cur.ID).QueryRow(func(row pgx.Row) error {
			return row.Scan(&next.Health, &next.HealthReason, &next.LastCheckAt)
		})
	}
	if err := eventbus.Queue(w, u.Event, u.Payload, nil); err != nil {
		return storage.Entity{}, err
	}
	if err := queueChecksChanged(w, u.Checks, changes); err != nil {
		return storage.Entity{}, err
	}
	if err := t.finish(ctx, w); err != nil {
		return storage.Entity{}, fmt.Errorf("update %s: %w", cur.Slug, err)
	}
	return next, nil
}

// holderAttributesChanged reports whether an attribute derivation reads of a backup holder
// differs between before and after.
func holderAttributesChanged(before, after map[string]any) bool {
	for _, k := range checks.HolderAttributes {
		if !reflect.DeepEqual(before[k], after[k]) {
			return true
		}
	}
	return false
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
			return errors.New("graphstore: the first batch of an own transaction must come from batch()")
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
		return errors.New("graphstore: finish before the transaction began")
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
func inBatchTx(ctx context.Context, pool *pgxpool.Pool, fn func(t *batchTx) error) error {
	conn, err := pool.Acquire(ctx)
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

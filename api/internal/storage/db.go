package storage

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// The api's storage layer is this package and the packages below it (issue #29; ADR 0007):
// this one holds the rows every surface answers with and what the others share (the DB a
// store runs on, transactions, the outbox and the audit inside them, error mapping); each
// subpackage holds one domain's SQL as registered constants checked against the migrated
// schema by its tests (testkit/sqlcheck). No package outside the layer imports pgx or holds
// a SQL statement (deploy/layering, rules 3 and 5).

// Pool is the api's connection pool. The composition roots open it (shared/pg) and hand it
// to the stores' constructors; nothing outside the storage layer runs SQL on it.
type Pool = pgxpool.Pool

// Tx is a transaction a store opened (its InTx), handed to the graph service's ...Tx
// methods so that their writes join it. Code outside the storage layer only passes it on.
type Tx = pgx.Tx

// DB is what a store runs on: the pool or a transaction (Begin on a transaction opens a
// savepoint).
type DB interface {
	pg.Querier
	pg.TxBeginner
}

// InTx runs fn on one transaction of db and commits when fn returns nil (pg.InTx): the
// change, its audit entry and its event commit together or not at all. Stores of several
// domains join the same transaction by being built On the DB fn receives.
func InTx(ctx context.Context, db DB, fn func(tx DB) error) error {
	return pg.InTx(ctx, db, func(tx pgx.Tx) error { return fn(tx) })
}

// AppendEvent appends e to the outbox on db (eventbus.Append), inside the caller's
// transaction when db is one.
func AppendEvent(ctx context.Context, db DB, e eventbus.Event, payload any) (int64, error) {
	return eventbus.Append(ctx, db, e, payload)
}

// WriteAudit writes one audit row on db (audit.Write).
func WriteAudit(ctx context.Context, db DB, r audit.Row) error { return audit.Write(ctx, db, r) }

// IsNoRows reports whether err is the driver's "no rows" (a store maps it to
// apierr.ErrNotFound with what was asked for).
func IsNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// Constraint returns the name of the constraint err violated (unique, foreign key, check,
// exclusion) and its SQLSTATE, or "", "" when err is no constraint violation. Stores map
// the ones they expect to the api's sentinels (apierr.ErrConflict, ...).
func Constraint(err error) (name, code string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.ConstraintName != "" {
		return pe.ConstraintName, pe.Code
	}
	return "", ""
}

// SQLState returns err's SQLSTATE, or "" when err did not come from the server.
func SQLState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

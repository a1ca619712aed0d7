package storage

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/pg"
)

// Pool is the agent's connection pool. The composition root opens it (shared/pg) and hands
// it to the services; nothing outside this package runs SQL on it.
type Pool = pgxpool.Pool

// DB is what the queries run on: the pool or a transaction (Begin on a transaction opens a
// savepoint).
type DB interface {
	pg.Querier
	pg.TxBeginner
}

// InTx runs fn on one transaction of db and commits when fn returns nil (pg.InTx): the
// change, its audit entry and its event commit together or not at all.
func InTx(ctx context.Context, db pg.TxBeginner, fn func(tx DB) error) error {
	return pg.InTx(ctx, db, func(tx pgx.Tx) error { return fn(tx) })
}

package pg_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM batchtx_test`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A BatchTx of two batches commits both or neither: a failed statement in the last batch
// skips its COMMIT and the first batch's rows are rolled back; so does an error of fn or a
// return without Commit. The connection goes back to the pool outside any transaction.
func TestInBatchTx(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t).Pool
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE batchtx_test (n int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	insert := func(b *pgx.Batch, n int) { b.Queue(`INSERT INTO batchtx_test (n) VALUES ($1)`, n) }

	// Committed: two batches, two round trips.
	err := pg.InBatchTx(ctx, pool, func(tx *pg.BatchTx) error {
		b := tx.Batch()
		insert(b, 1)
		if err := tx.Send(ctx, b); err != nil {
			return err
		}
		if n := count(t, pool); n != 0 { // another connection
			t.Errorf("the first batch's row is visible before COMMIT (%d rows): it began no transaction", n)
		}
		b = tx.Batch()
		insert(b, 2)
		return tx.Commit(ctx, b)
	})
	if err != nil || count(t, pool) != 2 {
		t.Fatalf("commit: %v, %d rows", err, count(t, pool))
	}

	// A failed statement in the last batch: nothing of the transaction stays.
	err = pg.InBatchTx(ctx, pool, func(tx *pg.BatchTx) error {
		b := tx.Batch()
		insert(b, 3)
		if err := tx.Send(ctx, b); err != nil {
			return err
		}
		b = tx.Batch()
		insert(b, 1) // duplicate key
		insert(b, 4)
		return tx.Commit(ctx, b)
	})
	if !pg.IsUniqueViolation(err, "") || count(t, pool) != 2 {
		t.Fatalf("failed batch: %v, %d rows (want the unique violation and 2 rows)", err, count(t, pool))
	}

	// fn's own error, and a return without Commit, roll back.
	boom := errors.New("boom")
	err = pg.InBatchTx(ctx, pool, func(tx *pg.BatchTx) error {
		b := tx.Batch()
		insert(b, 5)
		if err := tx.Send(ctx, b); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || count(t, pool) != 2 {
		t.Fatalf("fn error: %v, %d rows", err, count(t, pool))
	}
	err = pg.InBatchTx(ctx, pool, func(tx *pg.BatchTx) error {
		b := tx.Batch()
		insert(b, 6)
		return tx.Send(ctx, b)
	})
	if err == nil || count(t, pool) != 2 {
		t.Fatalf("no Commit: %v, %d rows", err, count(t, pool))
	}

	// A panic rolls back and propagates.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not propagate")
			}
		}()
		_ = pg.InBatchTx(ctx, pool, func(tx *pg.BatchTx) error {
			b := tx.Batch()
			insert(b, 7)
			if err := tx.Send(ctx, b); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if n := count(t, pool); n != 2 {
		t.Fatalf("after a panic: %d rows", n)
	}

	// Nothing sent: no transaction, no error.
	if err := pg.InBatchTx(ctx, pool, func(*pg.BatchTx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// A first batch that does not come from Batch is refused.
	err = pg.InBatchTx(ctx, pool, func(tx *pg.BatchTx) error {
		b := &pgx.Batch{}
		insert(b, 8)
		return tx.Commit(ctx, b)
	})
	if err == nil || count(t, pool) != 2 {
		t.Fatalf("foreign batch: %v, %d rows", err, count(t, pool))
	}

	// Every connection is idle again.
	for _, c := range pool.AcquireAllIdle(ctx) {
		if s := c.Conn().PgConn().TxStatus(); s != 'I' {
			t.Errorf("a pooled connection is in transaction state %q", s)
		}
		c.Release()
	}
}

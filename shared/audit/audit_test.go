package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

const entity = "0192f3a4-0000-7000-8000-0000000000a1"

type stored struct {
	Actor, Action, Method, Path, Correlation string
	Entity                                   *string
	Before, After                            *string
}

func rows(t *testing.T, db *pgxpool.Pool) []stored {
	t.Helper()
	r, err := db.Query(context.Background(), `SELECT actor, action, method, path, correlation_id, entity_id::text, before::text, after::text
		FROM audit_log ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(r, func(row pgx.CollectableRow) (stored, error) {
		var s stored
		err := row.Scan(&s.Actor, &s.Action, &s.Method, &s.Path, &s.Correlation, &s.Entity, &s.Before, &s.After)
		return s, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func str(p *string) string {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// Write, Queue and GuardedInsert each write one row in the caller's transaction, which
// commits or rolls back with the change; every form stores the same columns the same way.
func TestOneRowPerMutationInTheCallersTx(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t).Pool
	ctx := context.Background()
	row := audit.Row{Actor: "dana", Action: "thing.update", Method: "PATCH", Path: "/api/v1/things/a",
		CorrelationID: "corr-1", EntityID: entity, Before: map[string]int{"v": 1}, After: json.RawMessage(`{"v": 2}`)}

	// Rolled back with the transaction.
	boom := errors.New("the change failed")
	err := pg.InTx(ctx, db, func(tx pgx.Tx) error {
		if err := audit.Write(ctx, tx, row); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := rows(t, db); len(got) != 0 {
		t.Fatalf("a rolled-back mutation left audit rows: %+v", got)
	}

	// Committed: Write, then Queue in a batch of the same transaction, then a guarded insert.
	err = pg.InTx(ctx, db, func(tx pgx.Tx) error {
		if err := audit.Write(ctx, tx, row); err != nil {
			return err
		}
		b := &pgx.Batch{}
		create := row
		create.Action, create.Before, create.EntityID, create.Method, create.Path = "thing.create", nil, "", "", ""
		if err := audit.Queue(b, create); err != nil {
			return err
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		args, err := row.Args()
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `WITH changed AS (SELECT 1 FROM generate_series(1, $1::int))
			`+audit.GuardedInsert("changed", 2), append([]any{1}, args...)...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	got := rows(t, db)
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(got), got)
	}
	for _, i := range []int{0, 2} {
		g := got[i]
		if g.Actor != "dana" || g.Action != "thing.update" || g.Method != "PATCH" || g.Path != "/api/v1/things/a" ||
			g.Correlation != "corr-1" || str(g.Entity) != entity || str(g.Before) != `{"v": 1}` || str(g.After) != `{"v": 2}` {
			t.Errorf("row %d: %+v (entity %s, before %s, after %s)", i, g, str(g.Entity), str(g.Before), str(g.After))
		}
	}
	if g := got[1]; g.Action != "thing.create" || g.Entity != nil || g.Before != nil || str(g.After) != `{"v": 2}` || g.Method != "" {
		t.Errorf("queued row: %+v (entity %s, before %s)", g, str(g.Entity), str(g.Before))
	}
}

// A guarded insert whose guard matched nothing (or several rows) fails, and the statement's
// change with it: no audit row without its change, no change without its row.
func TestGuardedInsertFailsWithoutExactlyOneRow(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t).Pool
	ctx := context.Background()
	args, err := audit.Row{Actor: "dana", Action: "thing.update"}.Args()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 2} {
		_, err := db.Exec(ctx, `WITH changed AS (SELECT 1 FROM generate_series(1, $1::int))
			`+audit.GuardedInsert("changed", 2), append([]any{n}, args...)...)
		if err == nil {
			t.Errorf("guard of %d rows: the insert succeeded", n)
		}
	}
	if got := rows(t, db); len(got) != 0 {
		t.Errorf("rows written: %+v", got)
	}
	if got := audit.GuardedInsert("changed", 4); got != `INSERT INTO audit_log (actor, action, method, path, correlation_id, entity_id, before, after) `+
		`VALUES ((SELECT $4::text FROM changed), $5, $6, $7, $8, $9, $10, $11)` {
		t.Errorf("GuardedInsert = %s", got)
	}
}

// Rows and Copy write many rows as Write would, in the caller's transaction; a row added to
// Rows is encoded at once, so it no longer depends on the caller's values.
func TestCopy(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t).Pool
	ctx := context.Background()
	attrs := map[string]any{"cores": 2}
	var c audit.Rows
	if err := c.Add(audit.Row{Actor: "seed", Action: "entity.create", EntityID: entity, After: attrs}); err != nil {
		t.Fatal(err)
	}
	attrs["cores"] = 4 // after Add: not in the row
	if err := c.Add(audit.Row{Actor: "seed", Action: "relationship.create", Before: json.RawMessage(nil), After: []byte(`[1]`)}); err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2 {
		t.Fatalf("%d rows collected", c.Len())
	}
	err := pg.InTx(ctx, db, func(tx pgx.Tx) error {
		if err := c.Copy(ctx, tx); err != nil {
			return err
		}
		if c.Len() != 0 {
			t.Errorf("%d rows kept after Copy", c.Len())
		}
		if err := c.Copy(ctx, tx); err != nil {
			return err
		}
		return audit.Copy(ctx, tx, []audit.Row{{Actor: "seed", Action: "entity.update", Method: "SEED"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	got := rows(t, db)
	if len(got) != 3 || str(got[0].Entity) != entity || str(got[0].After) != `{"cores": 2}` || got[0].Before != nil ||
		got[1].Entity != nil || got[1].Before != nil || str(got[1].After) != `[1]` || got[1].Action != "relationship.create" ||
		got[2].Action != "entity.update" || got[2].Method != "SEED" || got[2].After != nil {
		t.Fatalf("copied rows %+v", got)
	}
	if err := c.Add(audit.Row{Actor: "seed", Action: "x", EntityID: "nope"}); err == nil || c.Len() != 0 {
		t.Errorf("a malformed entity id was collected (%v, %d rows)", err, c.Len())
	}
}

// Every form refuses a row without actor or action before it reaches the database.
func TestRowNeedsActorAndAction(t *testing.T) {
	t.Parallel()
	for _, r := range []audit.Row{{Action: "x"}, {Actor: "x"}} {
		if _, err := r.Args(); !errors.Is(err, audit.ErrInvalid) {
			t.Errorf("%+v: Args %v", r, err)
		}
		b := &pgx.Batch{}
		if err := audit.Queue(b, r); !errors.Is(err, audit.ErrInvalid) || b.Len() != 0 {
			t.Errorf("%+v: Queue %v (%d queued)", r, err, b.Len())
		}
		var c audit.Rows
		if err := c.Add(r); !errors.Is(err, audit.ErrInvalid) || c.Len() != 0 {
			t.Errorf("%+v: Add %v", r, err)
		}
	}
	if _, err := (audit.Row{Actor: "a", Action: "b", After: func() {}}).Args(); err == nil {
		t.Error("an unmarshallable after was accepted")
	}
}

package graphstore

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/oikos-hq/oikos/shared/audit"
	"github.com/oikos-hq/oikos/testkit/pgtest"
	"github.com/oikos-hq/oikos/testkit/sqlcheck"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestQueriesPrepare prepares every registered query against the migrated schema, so a
// renamed column or table fails here rather than at run time.
func TestQueriesPrepare(t *testing.T) { sqlcheck.Prepare(t, pgtest.New(t).Pool, Queries) }

// TestQueriesRegistered parses the package's own source: every constant that starts like a
// statement must be in Queries, and no statement may be written outside a constant.
func TestQueriesRegistered(t *testing.T) { sqlcheck.Registered(t, ".", Queries) }

// TestUpdateAttributesSQLRefusesAMiss: the statement that writes the entity and its audit row
// fails, rather than writing the audit row alone, when the update matches no row, so the
// COMMIT pipelined behind it never runs.
func TestUpdateAttributesSQLRefusesAMiss(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t).Pool
	const id = "0192f3a4-0000-7000-8000-000000000001"
	if _, err := pool.Exec(ctx, `INSERT INTO entity_types (name, attribute_schema, states, default_state) VALUES ('thing', '{}', '{active}', 'active')`); err != nil {
		t.Fatal(err)
	}
	if err := On(pool).InsertEntity(ctx, id, "thing:a", "thing", "a", "active", map[string]any{"unit": "a"}); err != nil {
		t.Fatal(err)
	}
	count := func() (n int) {
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	for _, tc := range []struct {
		name, id string
		version  int64
	}{
		{"stale version", id, 6},
		{"no such entity", "0192f3a4-0000-7000-8000-0000000000ff", 1},
	} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		row, err := audit.Row{Actor: "tester", Action: "entity.update", Method: "PATCH", Path: "/p", CorrelationID: "corr",
			EntityID: tc.id, Before: json.RawMessage(`{}`), After: json.RawMessage(`{}`)}.Args()
		if err != nil {
			t.Fatal(err)
		}
		_, err = tx.Exec(ctx, qUpdateAttributes, append([]any{tc.id, map[string]any{"unit": "x"}, tc.version}, row...)...)
		_ = tx.Rollback(ctx)
		if err == nil || !strings.Contains(err.Error(), "actor") {
			t.Errorf("%s: the update+audit statement gave %v, want the NOT NULL actor violation", tc.name, err)
		}
	}
	if after := count(); after != before {
		t.Errorf("audit rows %d, want %d", after, before)
	}
	e, err := On(pool).GetEntity(ctx, id, false)
	if err != nil || e.Version != 1 || e.Attributes["unit"] != "a" {
		t.Errorf("entity after the misses: %+v %v", e, err)
	}
}

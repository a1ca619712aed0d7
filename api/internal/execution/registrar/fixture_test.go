package registrar

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/exectest"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// simulate plays the scheduler as docs/execution-contract.md describes it: claim (running,
// started_at, execution.running), append output chunks, then finish with a terminal status,
// exit code, output tail, result and its event, each step in one transaction.
func simulate(t testing.TB, f *exectest.Fixture, id string, chunks [][]byte, status string, exitCode int, result string) {
	t.Helper()
	ctx := context.Background()
	event := func(tx pgx.Tx, st string, code *int) error {
		var target, slug, action, risk string
		var session *string
		if err := tx.QueryRow(ctx, `SELECT target_id::text, target_slug, action, risk_class, session_id FROM executions WHERE id = $1`, id).
			Scan(&target, &slug, &action, &risk, &session); err != nil {
			return err
		}
		corr := ""
		if session != nil {
			corr = *session
		}
		_, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "execution." + st, EntityID: target, CorrelationID: corr, Actor: "scheduler:test"},
			execution.EventPayload{ExecutionID: id, Status: st, Target: slug, Action: action, RiskClass: risk, ExitCode: code})
		return err
	}
	err := pg.InTx(ctx, f.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE executions SET status = 'running', started_at = now(), claimed_by = 'test'
			WHERE id = $1 AND status = 'approved'`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return fmt.Errorf("execution %s is not runnable", id)
		}
		return event(tx, execution.StatusRunning, nil)
	})
	if err != nil {
		t.Fatalf("claim %s: %v", id, err)
	}
	out := []byte{}
	for i, c := range chunks {
		if _, err := f.Pool.Exec(ctx, `INSERT INTO execution_logs (execution_id, seq, stream, data) VALUES ($1, $2, 'stdout', $3)`,
			id, i+1, c); err != nil {
			t.Fatalf("log chunk: %v", err)
		}
		out = append(out, c...)
	}
	var res any
	if result != "" {
		res = result
	}
	err = pg.InTx(ctx, f.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE executions SET status = $2, exit_code = $3, output = $4, result = $5::jsonb,
			finished_at = now(), updated_at = now() WHERE id = $1`, id, status, exitCode, out, res); err != nil {
			return err
		}
		return event(tx, status, &exitCode)
	})
	if err != nil {
		t.Fatalf("finish %s: %v", id, err)
	}
}

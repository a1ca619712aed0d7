// Package upgrade tests an upgrade of an install full of data (issue #32, item 2): the
// database as the previous release's migrations leave it, holding the demo fleet and a month
// of results, audit, executions and conversations, migrated to this release's schema with
// nothing lost, and with the results table written to throughout.
package upgrade

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	apiapp "github.com/oikos-hq/oikos/api/app"
	"github.com/oikos-hq/oikos/migrations"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// month is how much history the install holds; OIKOS_UPGRADE_DAYS shortens or lengthens it.
func month(t *testing.T) int {
	if v := os.Getenv("OIKOS_UPGRADE_DAYS"); v != "" {
		var d int
		if _, err := fmt.Sscan(v, &d); err != nil || d < 1 {
			t.Fatalf("OIKOS_UPGRADE_DAYS=%q: a whole number of days", v)
		}
		return d
	}
	return 30
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int64 {
	t.Helper()
	tag, err := pool.Exec(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%.120s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// fill gives the database what an install holds after days of use, written at the current
// schema: the demo fleet through the api's own seeding, then the history the daemons would
// have written, a sample for every check at its interval and the rest at a busy homelab's pace.
func fill(t *testing.T, db *pgtest.DB, days int) map[string]int64 {
	t.Helper()
	ctx := context.Background()
	api, err := apiapp.Start(ctx, apiapp.Config{DatabaseURL: db.URL, Addr: "127.0.0.1:0", SeedOnStart: true, Demo: true}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	api.Stop()
	span := fmt.Sprintf("%d days", days)
	rows := map[string]int64{}
	// One sample per check run at the check's own interval: millions of rows. They are
	// loaded with the table's indexes set aside and rebuilt after, as a bulk load would be;
	// the upgrade then runs on the table with its indexes, as an install's is.
	indexes := indexDefs(t, db.Pool, "metric_samples")
	for name := range indexes {
		exec(t, db.Pool, `DROP INDEX `+pgx.Identifier{name}.Sanitize())
	}
	rows["metric_samples"] = exec(t, db.Pool, `
INSERT INTO metric_samples (target_id, check_id, name, value, at)
SELECT cd.target_id, cd.id, 'latency_ms', (extract(epoch FROM g)::bigint % 97)::float8, g
FROM check_defs cd
CROSS JOIN LATERAL generate_series(now() - $1::interval, now(), make_interval(secs => cd.interval_seconds)) AS g
WHERE cd.enabled`, span)
	for _, def := range indexes {
		exec(t, db.Pool, def)
	}
	rows["events"] = exec(t, db.Pool, `
INSERT INTO events (at, type, entity_id, actor, payload)
SELECT now() - $1::interval + (g * interval '1 minute'), 'check.transition', cd.target_id, 'scheduler',
       jsonb_build_object('check', cd.slug, 'health', CASE WHEN g % 2 = 0 THEN 'down' ELSE 'up' END)
FROM generate_series(1, $2::int * 200) AS g
JOIN LATERAL (SELECT * FROM check_defs ORDER BY id OFFSET (g % (SELECT count(*) FROM check_defs)) LIMIT 1) cd ON true`, span, days)
	rows["audit_log"] = exec(t, db.Pool, `
INSERT INTO audit_log (at, actor, action, method, path, entity_id, after)
SELECT now() - $1::interval + (g * interval '10 minutes'), 'alice', 'entity.update', 'PATCH', '/api/v1/entities/' || e.slug, e.id,
       jsonb_build_object('attributes', jsonb_build_object('note', g))
FROM generate_series(1, $2::int * 100) AS g
JOIN LATERAL (SELECT * FROM entities ORDER BY id OFFSET (g % (SELECT count(*) FROM entities)) LIMIT 1) e ON true`, span, days)
	rows["executions"] = exec(t, db.Pool, `
INSERT INTO executions (id, target_id, target_slug, command, risk_class, status, requested_by, dedup_key, exit_code, output, created_at)
SELECT gen_random_uuid(), e.id, e.slug, 'systemctl status nginx', 'read_only', 'completed', 'nomos', 'upgrade-' || g, 0,
       convert_to(repeat('active (running) ', 20), 'UTF8'), now() - $1::interval + (g * interval '1 hour')
FROM generate_series(1, $2::int * 20) AS g
JOIN LATERAL (SELECT * FROM entities WHERE type IN ('lxc', 'vm') ORDER BY id OFFSET (g % (SELECT count(*) FROM entities WHERE type IN ('lxc', 'vm'))) LIMIT 1) e ON true`, span, days)
	rows["execution_logs"] = exec(t, db.Pool, `
INSERT INTO execution_logs (execution_id, seq, stream, data, at)
SELECT x.id, s, 'stdout', convert_to('line ' || s || E'\n', 'UTF8'), x.created_at FROM executions x, generate_series(1, 10) AS s`)
	rows["agent_sessions"] = exec(t, db.Pool, `
INSERT INTO agent_sessions (id, actor, title, goal, created_at)
SELECT 's-' || g, 'alice', 'session ' || g, 'look at the fleet', now() - $1::interval + (g * interval '6 hours')
FROM generate_series(1, $2::int * 4) AS g`, span, days)
	rows["session_messages"] = exec(t, db.Pool, `
INSERT INTO session_messages (session_id, role, content, created_at)
SELECT s.id, CASE WHEN m % 2 = 0 THEN 'user' ELSE 'assistant' END, 'message ' || m || ' of ' || s.id, s.created_at + m * interval '1 second'
FROM agent_sessions s, generate_series(1, 12) AS m`)
	rows["tool_calls"] = exec(t, db.Pool, `
INSERT INTO tool_calls (id, session_id, name, arguments, result, started_at, finished_at)
SELECT s.id || '-t' || c, s.id, 'get_entity', jsonb_build_object('slug', 'lxc:jellyfin'), '{"health":"up"}', s.created_at, s.created_at
FROM agent_sessions s, generate_series(1, 6) AS c`)
	rows["chat_messages"] = exec(t, db.Pool, `
INSERT INTO chat_messages (id, session_id, text, token_name, token_role, created_at)
SELECT gen_random_uuid(), s.id, 'is everything up?', 'alice', 'operator', s.created_at FROM agent_sessions s`)
	if _, err := db.Pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	return rows
}

// indexDefs are the definitions of table's indexes but its primary key, by name.
func indexDefs(t *testing.T, pool *pgxpool.Pool, table string) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT i.indexname, i.indexdef FROM pg_indexes i
WHERE i.schemaname = 'public' AND i.tablename = $1
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`, table)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for rows.Next() {
		var n, d string
		if err := rows.Scan(&n, &d); err != nil {
			t.Fatal(err)
		}
		out[n] = d
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// snapshot is, for every table, its columns at the time and a digest of its rows over them.
type snapshot map[string]struct {
	columns []string
	rows    int64
	digest  string
}

func take(t *testing.T, pool *pgxpool.Pool, columns map[string][]string) snapshot {
	t.Helper()
	ctx := context.Background()
	if columns == nil {
		columns = map[string][]string{}
		rows, err := pool.Query(ctx, `SELECT table_name, column_name FROM information_schema.columns
WHERE table_schema = 'public' AND table_name IN (SELECT tablename FROM pg_tables WHERE schemaname = 'public')
  AND is_generated = 'NEVER' ORDER BY table_name, ordinal_position`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var tbl, col string
			if err := rows.Scan(&tbl, &col); err != nil {
				t.Fatal(err)
			}
			columns[tbl] = append(columns[tbl], col)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	out := snapshot{}
	for tbl, cols := range columns {
		if tbl == "goose_db_version" {
			continue // its rows are the migrations themselves
		}
		ids := make([]string, len(cols))
		for i, c := range cols {
			ids[i] = pgx.Identifier{c}.Sanitize()
		}
		row := `ROW(` + strings.Join(ids, ", ") + `)::text`
		// A sum of the rows' 64-bit hashes: independent of order and constant in memory, over
		// millions of rows.
		var n int64
		var digest string
		q := `SELECT count(*), coalesce(sum(hashtextextended(` + row + `, 0)::numeric), 0)::text FROM ` + pgx.Identifier{tbl}.Sanitize()
		if err := pool.QueryRow(ctx, q).Scan(&n, &digest); err != nil {
			t.Fatalf("%s: %v", tbl, err)
		}
		out[tbl] = struct {
			columns []string
			rows    int64
			digest  string
		}{cols, n, digest}
	}
	return out
}

// TestUpgradeKeepsAMonthOfData: the migrations since the previous release, run on an install
// with the demo fleet and a month of history, keep every row of every table over the columns
// it had, while a writer keeps adding results; the down migrations that built the previous
// schema ran on that data too.
func TestUpgradeKeepsAMonthOfData(t *testing.T) {
	ctx := context.Background()
	latest := latestMigration(t)
	// At least one migration is exercised, also when this release has added none yet.
	previous := min(migrations.PreviousRelease, latest-1)
	db := pgtest.New(t)
	days := month(t)

	start := time.Now()
	rows := fill(t, db, days)
	t.Logf("filled %d days in %s: %v", days, time.Since(start).Round(time.Millisecond), rows)

	undone, err := pg.MigrateDownTo(ctx, db.Pool, previous)
	if err != nil {
		t.Fatalf("the previous release's schema from the current one: %v", err)
	}
	before := take(t, db.Pool, nil)

	// A writer of results throughout: an upgrade must not hold the results table for the
	// time of a rewrite. Its slowest insert is reported.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var slowest time.Duration
	var inserts int
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			_, err := db.Pool.Exec(ctx, `INSERT INTO metric_samples (target_id, check_id, name, value, at)
SELECT target_id, id, 'latency_ms', 1, now() FROM check_defs ORDER BY id LIMIT 1`)
			if err != nil {
				werr = err
				return
			}
			inserts++
			slowest = max(slowest, time.Since(t0))
		}
	}()
	t0 := time.Now()
	applied, err := pg.Migrate(ctx, db.Pool)
	took := time.Since(t0)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	if werr != nil {
		t.Fatalf("the results writer failed during the upgrade: %v", werr)
	}
	if err := pg.CheckSchema(ctx, db.Pool); err != nil {
		t.Fatalf("after the upgrade: %v", err)
	}
	sort.Slice(undone, func(i, j int) bool { return undone[i] < undone[j] })
	if fmt.Sprint(applied) != fmt.Sprint(undone) {
		t.Errorf("applied %v, want the migrations undone: %v", applied, undone)
	}
	t.Logf("upgrade from %d to %d (migrations %v) on %d days of data: %s; a results writer made %d inserts meanwhile, the slowest %s",
		previous, latest, applied, days, took.Round(time.Millisecond), inserts, slowest.Round(time.Microsecond))

	// Nothing lost: every table of the previous schema holds the same rows over the columns
	// it had, but for the samples the writer added.
	cols := map[string][]string{}
	for tbl, s := range before {
		cols[tbl] = s.columns
	}
	exec(t, db.Pool, `DELETE FROM metric_samples WHERE at > $1`, t0.Add(-time.Second))
	after := take(t, db.Pool, cols)
	for tbl, b := range before {
		a := after[tbl]
		if a.rows != b.rows || a.digest != b.digest {
			t.Errorf("table %s: %d rows (%s) after the upgrade, %d (%s) before", tbl, a.rows, a.digest, b.rows, b.digest)
		}
	}
	if before["metric_samples"].rows < rows["metric_samples"] {
		t.Errorf("the previous schema holds %d samples of the %d written", before["metric_samples"].rows, rows["metric_samples"])
	}
}

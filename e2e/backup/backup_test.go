// Package backup tests `oikos backup` and `oikos restore` end to end (issue #32, item 3): the
// CLI a user runs, the real pg_dump and pg_restore, a running api, and databases compared
// table by table, row by row.
package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	apiapp "github.com/oikos-hq/oikos/api/app"
	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/migrations"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

var cliPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "oikos-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cliPath = filepath.Join(dir, "oikos")
	build := exec.Command("go", "build", "-o", cliPath, "github.com/oikos-hq/oikos/api/cmd/oikos")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the oikos CLI:", err)
		os.Exit(1)
	}
	code := pgtest.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

// oikos runs the CLI against dbURL with stdin; it returns the exit code, stdout and stderr.
func oikos(t *testing.T, dbURL string, stdin io.Reader, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(cliPath, args...)
	cmd.Env = append(os.Environ(), "OIKOS_DATABASE_URL="+dbURL)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("oikos %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

func mustOikos(t *testing.T, dbURL string, args ...string) string {
	t.Helper()
	code, out, errs := oikos(t, dbURL, nil, args...)
	if code != 0 {
		t.Fatalf("oikos %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// emptyDB creates a database with nothing in it (no migrations), dropped after the test.
func emptyDB(t *testing.T) (string, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.Empty(t)
	return db.URL, db.Pool
}

// restoreRow is how the restore records itself: one audit row and one event, which the
// source does not have.
const restoreRow = "database.restored"

// tables returns, for every table of the public schema, its row count and a digest of all
// its rows (in a fixed order), leaving out the restore's own audit row and event.
func tables(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		where := ""
		switch n {
		case "audit_log":
			where = ` WHERE action <> '` + restoreRow + `'`
		case "events":
			where = ` WHERE type <> '` + restoreRow + `'`
		}
		id := pgx.Identifier{n}.Sanitize()
		var count int
		var digest string
		q := `SELECT count(*), coalesce(md5(string_agg(x.r, '|' ORDER BY x.r)), '') FROM (SELECT t::text AS r FROM ` + id + ` t` + where + `) x`
		if err := pool.QueryRow(ctx, q).Scan(&count, &digest); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		out[n] = fmt.Sprintf("%d rows %s", count, digest)
	}
	return out
}

func sameTables(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	for n, w := range want {
		if got[n] != w {
			t.Errorf("%s: table %s: %s, want %s", what, n, got[n], w)
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			t.Errorf("%s: table %s is not in the source", what, n)
		}
	}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// api is a running api on a database, with an operator token.
type api struct {
	url, token string
}

func startAPI(t *testing.T, dbURL string, demo bool) api {
	t.Helper()
	srv, u, err := e2estack.StartAPI(context.Background(), t, apiapp.Config{DatabaseURL: dbURL, SeedOnStart: true, Demo: demo}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	a := api{url: u}
	if err := e2estack.MintTokens(context.Background(), srv, e2estack.Token{Name: "alice", Role: "operator", Into: &a.token}); err != nil {
		t.Fatal(err)
	}
	return a
}

// call sends a JSON request and decodes the answer into out; it returns the status.
func (a api) call(t *testing.T, method, path string, body, out any, header ...string) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	if resp.StatusCode >= 300 && out != nil {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

// raw answers GET path as the api sent it (compared whole between two installs).
func (a api) raw(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// annotate sets attributes.note on slug to n through the api (audited, one event).
func (a api) annotate(t *testing.T, slug string, n int) {
	t.Helper()
	var e struct {
		Version int `json:"version"`
	}
	a.call(t, http.MethodGet, "/api/v1/entities/"+slug, nil, &e)
	a.call(t, http.MethodPatch, "/api/v1/entities/"+slug, map[string]any{"attributes": map[string]any{"note": n}, "expected_version": e.Version}, &e)
}

// fill gives the source what an operator's install holds besides the demo fleet and the
// knowledge base: approvals decided and pending, an annotated entity, an agent session and a
// chat message.
func fill(t *testing.T, a api, pool *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for _, cmd := range []string{"systemctl restart jellyfin", "systemctl restart nginx"} {
		var ex struct {
			ApprovalID string `json:"approval_id"`
			Status     string `json:"status"`
		}
		a.call(t, http.MethodPost, "/api/v1/executions", map[string]any{"target": "lxc:jellyfin", "command": cmd, "purpose": "backup test"}, &ex)
		if ex.ApprovalID == "" {
			t.Fatalf("%s: %s, want an approval", cmd, ex.Status)
		}
		ids = append(ids, ex.ApprovalID)
	}
	a.call(t, http.MethodPost, "/api/v1/approvals/"+ids[0]+"/decision", map[string]any{"decision": "deny", "via": "api", "reason": "not now"}, &json.RawMessage{})
	a.annotate(t, "lxc:jellyfin", 1)
	// The agent writes its sessions; no agent runs here, so one is written as it would.
	if _, err := pool.Exec(ctx, `INSERT INTO agent_sessions (id, actor, title, goal) VALUES ('s-backup', 'alice', 'Jellyfin', 'look at jellyfin')`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO chat_messages (id, session_id, text, token_name, token_role) VALUES (gen_random_uuid(), 's-backup', 'is jellyfin up?', 'alice', 'operator')`); err != nil {
		t.Fatal(err)
	}
}

// TestBackupAndRestore: a backup of a running install restored into an empty database (and
// into a new install's, whose api runs) is the same database, table by table, and its api
// answers the same graph, approvals, knowledge and sessions.
func TestBackupAndRestore(t *testing.T) {
	src := pgtest.New(t)
	a := startAPI(t, src.URL, true)
	fill(t, a, src.Pool)
	dir := t.TempDir()

	// A backup taken while the api is written to is a state the database was in: the writer's
	// every change is there with its audit row and its event, or none of the three is.
	stop := make(chan struct{})
	written := make(chan int)
	go func() {
		n := 1
		defer func() { written <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n++
			a.annotate(t, "vm:homeassistant", n)
		}
	}()
	busy := filepath.Join(dir, "busy.dump")
	out := mustOikos(t, src.URL, "backup", busy)
	close(stop)
	total := <-written
	if !strings.Contains(out, "backup: "+busy) || !strings.Contains(out, " entities") {
		t.Errorf("backup printed %q", out)
	}
	busyURL, busyPool := emptyDB(t)
	mustOikos(t, busyURL, "restore", busy)
	var note int
	if err := busyPool.QueryRow(context.Background(), `SELECT coalesce((attributes->>'note')::int, 1) FROM entities WHERE slug = 'vm:homeassistant'`).Scan(&note); err != nil {
		t.Fatal(err)
	}
	audits := count(t, busyPool, `SELECT count(*) FROM audit_log a JOIN entities e ON e.id = a.entity_id WHERE e.slug = 'vm:homeassistant' AND a.action = 'entity.update'`)
	events := count(t, busyPool, `SELECT count(*) FROM events v JOIN entities e ON e.id = v.entity_id WHERE e.slug = 'vm:homeassistant' AND v.type = 'entity.updated'`)
	if audits != note-1 || events != note-1 {
		t.Errorf("busy backup: note %d (of %d written), %d audit rows, %d events: want %d of each", note, total, audits, events, note-1)
	}
	t.Logf("busy backup: %d of %d concurrent updates in the archive, each with its audit row and event", note-1, total-1)

	// The quiet system, backed up and restored two ways: into a database with nothing in it,
	// and into a new install whose api has started (and seeded the ontology and knowledge).
	want := tables(t, src.Pool)
	file := filepath.Join(dir, "oikos.dump")
	mustOikos(t, src.URL, "backup", file)
	sameTables(t, "the source after its backup", want, tables(t, src.Pool))

	var b api
	emptyURL, emptyPool := emptyDB(t)
	out = mustOikos(t, emptyURL, "restore", file)
	if !strings.Contains(out, "restored "+file) || !strings.Contains(out, "restart the daemons") {
		t.Errorf("restore printed %q", out)
	}
	sameTables(t, "restored into an empty database", want, tables(t, emptyPool))
	if n := count(t, emptyPool, `SELECT count(*) FROM audit_log WHERE action = $1`, restoreRow); n != 1 {
		t.Errorf("%d audit rows of the restore, want 1", n)
	}
	if n := count(t, emptyPool, `SELECT count(*) FROM events WHERE type = $1`, restoreRow); n != 1 {
		t.Errorf("%d events of the restore, want 1", n)
	}

	fresh := pgtest.New(t)
	startAPI(t, fresh.URL, false)
	mustOikos(t, fresh.URL, "restore", file)
	sameTables(t, "restored into a new install", want, tables(t, fresh.Pool))

	// Through the api: the same graph, approvals, knowledge and sessions' messages, read with
	// the source's own token, which the archive carried.
	if _, u, err := e2estack.StartAPI(context.Background(), t, apiapp.Config{DatabaseURL: emptyURL}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	} else {
		b = api{url: u, token: a.token}
	}
	for _, path := range []string{"/api/v1/entities?limit=500", "/api/v1/graph", "/api/v1/export", "/api/v1/approvals?status=pending", "/api/v1/approvals?status=denied", "/api/v1/executions",
		"/api/v1/knowledge?limit=500", "/api/v1/entities/lxc:jellyfin"} {
		// The export's header says when it was written, which differs by a second at times.
		if x, y := exportedAt.ReplaceAllString(a.raw(t, path), ""), exportedAt.ReplaceAllString(b.raw(t, path), ""); x != y {
			t.Errorf("GET %s differs after the restore:\nsource   %.300s\nrestored %.300s", path, x, y)
		}
	}

	// A pipe both ways: backup - | restore -.
	pipeURL, pipePool := emptyDB(t)
	dump := exec.Command(cliPath, "backup", "-")
	dump.Env = append(os.Environ(), "OIKOS_DATABASE_URL="+src.URL)
	var archive bytes.Buffer
	dump.Stdout = &archive
	if err := dump.Run(); err != nil {
		t.Fatalf("backup -: %v", err)
	}
	if code, _, errs := oikos(t, pipeURL, &archive, "restore", "-"); code != 0 {
		t.Fatalf("restore -: exit %d: %s", code, errs)
	}
	sameTables(t, "piped", want, tables(t, pipePool))
}

// TestRestoreRefusesAndChangesNothing: a restore over a fleet, into a database that is not
// Oikos's, or of a file that is no archive of oikos backup, fails with a clear message and a
// non-zero exit and leaves the database as it was; so do the CLI's usage errors.
func TestRestoreRefusesAndChangesNothing(t *testing.T) {
	src := pgtest.New(t)
	startAPI(t, src.URL, true)
	dir := t.TempDir()
	file := filepath.Join(dir, "oikos.dump")
	mustOikos(t, src.URL, "backup", file)
	before := tables(t, src.Pool)

	code, _, errs := oikos(t, src.URL, nil, "restore", file)
	if code != 1 || !strings.Contains(errs, "holds a fleet") || !strings.Contains(errs, "Nothing was changed") {
		t.Errorf("restore over a fleet: exit %d, %q", code, errs)
	}
	sameTables(t, "after a refused restore", before, tables(t, src.Pool))

	other, otherPool := emptyDB(t)
	if _, err := otherPool.Exec(context.Background(), `CREATE TABLE invoices (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	code, _, errs = oikos(t, other, nil, "restore", file)
	if code != 1 || !strings.Contains(errs, "not an Oikos database") {
		t.Errorf("restore into another application's database: exit %d, %q", code, errs)
	}
	if n := count(t, otherPool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`); n != 1 {
		t.Errorf("the other database has %d tables after the refusal, want its 1", n)
	}

	empty, emptyPool := emptyDB(t)
	junk := filepath.Join(dir, "junk.dump")
	if err := os.WriteFile(junk, []byte("not an archive\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = oikos(t, empty, nil, "restore", junk)
	if code != 1 || !strings.Contains(errs, "is not a backup of oikos backup") {
		t.Errorf("restore of junk: exit %d, %q", code, errs)
	}
	if n := count(t, emptyPool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`); n != 0 {
		t.Errorf("a refused restore created %d tables", n)
	}

	code, _, errs = oikos(t, src.URL, nil, "backup", file)
	if code != 1 || !strings.Contains(errs, "exists") {
		t.Errorf("backup over an existing file: exit %d, %q", code, errs)
	}
	mustOikos(t, src.URL, "backup", "--force", file)
	for _, args := range [][]string{{"backup"}, {"restore"}, {"backup", "a", "b"}, {"restore", "--bogus", file}} {
		if code, _, _ := oikos(t, src.URL, nil, args...); code != 2 {
			t.Errorf("oikos %v: exit %d, want 2", args, code)
		}
	}
	if code, _, errs := oikos(t, "", nil, "backup", filepath.Join(dir, "x.dump")); code != 1 || !strings.Contains(errs, "OIKOS_DATABASE_URL") {
		t.Errorf("backup without a database: exit %d, %q", code, errs)
	}
}

// latestMigration is the newest migration's version in the embedded set.
func latestMigration(t *testing.T) int64 {
	t.Helper()
	v, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRestoreOlderReleasesArchive: an archive taken at an older schema loads and is migrated
// to the current one, and the restore says which migrations it applied.
func TestRestoreOlderReleasesArchive(t *testing.T) {
	latest := latestMigration(t)
	old := pgtest.Empty(t)
	if _, err := pg.MigrateTo(context.Background(), old.Pool, latest-2); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Pool.Exec(context.Background(), `INSERT INTO entity_types (name) VALUES ('host'); INSERT INTO entities (id, type, name, slug, state) VALUES (gen_random_uuid(), 'host', 'old', 'host:old', 'active')`); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "old.dump")
	mustOikos(t, old.URL, "backup", file)

	target := pgtest.Empty(t)
	out := mustOikos(t, target.URL, "restore", file)
	want := fmt.Sprintf("the archive was at schema version %d; applied migrations [%d %d]", latest-2, latest-1, latest)
	if !strings.Contains(out, want) {
		t.Errorf("restore printed %q, want %q", out, want)
	}
	if err := pg.CheckSchema(context.Background(), target.Pool); err != nil {
		t.Errorf("the restored database is not at the current schema: %v", err)
	}
	if n := count(t, target.Pool, `SELECT count(*) FROM entities WHERE slug = 'host:old'`); n != 1 {
		t.Errorf("the old archive's entity: %d rows", n)
	}
}

// exportedAt is the export's "# Exported at TIME:" header, left out when two are compared.
var exportedAt = regexp.MustCompile(`(?m)^# Exported at [^:]+:\d\d:\d\dZ`)

package executor

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/internal/fleet"
	"github.com/oikos-hq/oikos/scheduler/internal/fleet/fleettest"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type env struct {
	db  *pgtest.DB
	ssh *remote.Pool
	g   *fleet.Graph
}

func newEnv(t *testing.T) *env {
	t.Helper()
	db := pgtest.New(t)
	fleettest.SeedTypes(t, db.Pool)
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	p := remote.NewPool(remote.PoolOptions{Signer: signer, HostKeys: remote.NewMemoryHostKeys(), DialTimeout: time.Second})
	t.Cleanup(p.Close)
	return &env{db: db, ssh: p, g: fleet.New(db.Pool, fleet.Options{})}
}

func (v *env) executor(t *testing.T, notifier *eventbus.Notifier, id string) *Executor {
	t.Helper()
	e := New(Options{Pool: v.db.Pool, SSH: v.ssh, Fleet: v.g, Notifier: notifier, SchedulerID: id,
		Poll: 50 * time.Millisecond, Logger: zerolog.Nop()})
	t.Cleanup(e.Stop)
	return e
}

// insertExecution writes an execution row as the api would (status approved + NOTIFY in the
// same transaction, or any other status for fixtures) and returns its id.
func insertExecution(t *testing.T, pool *pgxpool.Pool, targetID, slug, action, command, status string, params map[string]any) string {
	t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7()).String()
	if params == nil {
		params = map[string]any{}
	}
	err := pg.InTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO executions (id, target_id, target_slug, action, command, params, risk_class, status,
		requested_by, dedup_key, timeout_seconds) VALUES ($1, $2, $3, $4, $5, $6, 'read_only', $7, 'test', $8, 5)`,
			id, targetID, slug, action, command, params, status, "dedup-"+id); err != nil {
			return err
		}
		if status == "approved" {
			return eventbus.Notify(ctx, tx, eventbus.ChannelExec, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type row struct {
	Status, Error, ClaimedBy string
	ExitCode                 *int
	Output                   []byte
	Truncated                bool
	Started, Finished        *time.Time
}

func readRow(t *testing.T, pool *pgxpool.Pool, id string) row {
	t.Helper()
	var r row
	if err := pool.QueryRow(context.Background(), `SELECT status, error, coalesce(claimed_by, ''), exit_code, output,
		output_truncated, started_at, finished_at FROM executions WHERE id = $1`, id).
		Scan(&r.Status, &r.Error, &r.ClaimedBy, &r.ExitCode, &r.Output, &r.Truncated, &r.Started, &r.Finished); err != nil {
		t.Fatal(err)
	}
	return r
}

// waitStatus waits, on oikos_events notifications, until the execution reaches status.
func waitStatus(t *testing.T, db *pgtest.DB, id, status string, within time.Duration) row {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN oikos_events"); err != nil {
		t.Fatal(err)
	}
	for {
		r := readRow(t, db.Pool, id)
		if r.Status == status {
			return r
		}
		wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, _ = conn.WaitForNotification(wctx)
		wcancel()
		if ctx.Err() != nil {
			t.Fatalf("execution %s is %s (error %q), want %s within %s", id, r.Status, r.Error, status, within)
		}
	}
}

func eventTypes(t *testing.T, pool *pgxpool.Pool, id string) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT type FROM events WHERE payload->>'execution_id' = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// S8: a target that cannot be resolved fails at once with what is missing, is claimed
// through NOTIFY (started_at at claim) and never dials anything.
func TestResolutionFailureIsFailedWithReason(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	lxc := fleettest.InsertEntity(t, v.db.Pool, "lxc", "orphan", "", map[string]any{"vmid": 150})
	cfg, err := pgx.ParseConfig(v.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: zerolog.Nop()})
	e := New(Options{Pool: v.db.Pool, SSH: v.ssh, Fleet: v.g, Notifier: notifier, SchedulerID: "s1",
		Poll: time.Hour, Logger: zerolog.Nop()})
	t.Cleanup(e.Stop)
	ctx := context.Background()
	if err := notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(notifier.Stop)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := insertExecution(t, v.db.Pool, lxc, "lxc:orphan", "run", "uptime", "approved", nil)
	r := waitStatus(t, v.db, id, StatusFailed, 10*time.Second)
	if !strings.Contains(r.Error, "target resolution failed") || !strings.Contains(r.Error, "no owning Proxmox host") ||
		!strings.Contains(r.Error, "lxc:orphan") {
		t.Errorf("error = %q", r.Error)
	}
	if r.Started == nil || r.Finished == nil || r.ClaimedBy != "s1" || r.ExitCode != nil {
		t.Errorf("row = %+v", r)
	}
	if got := strings.Join(eventTypes(t, v.db.Pool, id), ","); got != "execution.started,execution.failed" {
		t.Errorf("events = %s", got)
	}
	if v.ssh.DialCount("127.0.10.1:2222") != 0 || v.ssh.OpenConnections() != 0 {
		t.Error("a resolution failure dialled")
	}
	e.Stop()
	e.Stop()
}

// Without any NOTIFY, the poll finds approved work; an unknown action fails clearly.
func TestPollFindsApprovedWork(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	host := fleettest.InsertEntity(t, v.db.Pool, "host", "hermes", "", map[string]any{"lan_ipv4": "127.0.11.1", "ssh_port": 2222})
	id := insertExecution(t, v.db.Pool, host, "host:hermes", "reboot_everything", "reboot", "approved", nil)
	e := v.executor(t, nil, "s1")
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := waitStatus(t, v.db, id, StatusFailed, 10*time.Second)
	if !strings.Contains(r.Error, `unknown action "reboot_everything"`) || !strings.Contains(r.Error, "pct_create") {
		t.Errorf("error = %q", r.Error)
	}
}

// Orphans: every running row claimed by a scheduler with no live lease is interrupted at
// start with the output it logged, and is never run again; a row whose claimant holds a live
// lease is left alone.
func TestOrphansInterruptedNeverRerun(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ctx := context.Background()
	p := v.db.Pool
	host := fleettest.InsertEntity(t, p, "host", "hermes", "", map[string]any{"lan_ipv4": "127.0.11.1", "ssh_port": 2222})
	orphan := insertExecution(t, p, host, "host:hermes", "run", "echo a; sleep 100", "pending_approval", nil)
	alive := insertExecution(t, p, host, "host:hermes", "run", "sleep 100", "pending_approval", nil)
	for id, by := range map[string]string{orphan: "dead-scheduler", alive: "live-scheduler"} {
		if _, err := p.Exec(ctx, `UPDATE executions SET status = 'running', claimed_by = $2, started_at = now() WHERE id = $1`, id, by); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Exec(ctx, `INSERT INTO scheduler_leases (resource, holder, expires_at) VALUES ('host:x', 'live-scheduler', now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	for seq, chunk := range []string{"first\x00", "\xffsecond"} {
		if _, err := p.Exec(ctx, `INSERT INTO execution_logs (execution_id, seq, stream, data) VALUES ($1, $2, 'stdout', $3)`,
			orphan, seq+1, []byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	e := v.executor(t, nil, "s2")
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r := readRow(t, p, orphan)
	if r.Status != StatusInterrupted || r.Finished == nil || !bytes.Equal(r.Output, []byte("first\x00\xffsecond")) ||
		!strings.Contains(r.Error, "dead-scheduler") || !strings.Contains(r.Error, "not re-run") {
		t.Errorf("orphan = %+v", r)
	}
	if got := strings.Join(eventTypes(t, p, orphan), ","); got != "execution.interrupted" {
		t.Errorf("orphan events = %s", got)
	}
	if r := readRow(t, p, alive); r.Status != StatusRunning {
		t.Errorf("row of a live scheduler = %s", r.Status)
	}
	// A later poll must not pick the interrupted one up: make a fresh approved row and wait
	// for it to be processed, then look again.
	later := insertExecution(t, p, host, "host:hermes", "no_such_action", "x", "approved", nil)
	waitStatus(t, v.db, later, StatusFailed, 10*time.Second)
	if got := strings.Join(eventTypes(t, p, orphan), ","); got != "execution.interrupted" || readRow(t, p, orphan).Status != StatusInterrupted {
		t.Errorf("orphan touched again: %s", got)
	}
}

func TestSweepStuck(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ctx := context.Background()
	p := v.db.Pool
	host := fleettest.InsertEntity(t, p, "host", "hermes", "", map[string]any{"lan_ipv4": "127.0.11.1"})
	stuck := insertExecution(t, p, host, "host:hermes", "run", "sleep 100", "pending_approval", nil)
	young := insertExecution(t, p, host, "host:hermes", "run", "sleep 100", "pending_approval", nil)
	if _, err := p.Exec(ctx, `UPDATE executions SET status = 'running', claimed_by = 'other', started_at = now() - interval '1 hour'
		WHERE id = $1`, stuck); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `UPDATE executions SET status = 'running', claimed_by = 'other', started_at = now() WHERE id = $1`, young); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Pool: p, SSH: v.ssh, Fleet: v.g, SchedulerID: "s3", StuckAfter: time.Minute, Logger: zerolog.Nop()})
	n, err := e.SweepStuck(ctx)
	if err != nil || n != 1 {
		t.Fatalf("SweepStuck = %d, %v", n, err)
	}
	if r := readRow(t, p, stuck); r.Status != StatusInterrupted || !strings.Contains(r.Error, "swept by s3") {
		t.Errorf("stuck = %+v", r)
	}
	if r := readRow(t, p, young); r.Status != StatusRunning {
		t.Errorf("young = %s", r.Status)
	}
}

// The sink stores bytes exactly (NUL, invalid UTF-8, quotes, backslashes), in seq order,
// batches small writes, announces each batch with a JSON NOTIFY and keeps the tail.
func TestSinkRoundTrip(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := v.db.Pool
	host := fleettest.InsertEntity(t, p, "host", "hermes", "", map[string]any{"lan_ipv4": "127.0.11.1"})
	id := insertExecution(t, p, host, "host:hermes", "run", "x", "pending_approval", nil)
	conn, err := pgx.Connect(ctx, v.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN oikos_exec_log"); err != nil {
		t.Fatal(err)
	}

	s := newSink(ctx, p, id, 20*time.Millisecond, 64, 16, nil, zerolog.Nop())
	var want []byte
	pieces := [][]byte{[]byte(`say "hi" \ back\slash`), {0, 0xff, 0xfe, '\n'}, bytes.Repeat([]byte("x"), 100), []byte("end")}
	for _, piece := range pieces {
		if _, err := s.Write(piece); err != nil {
			t.Fatal(err)
		}
		want = append(want, piece...)
	}
	// The first NOTIFY proves batches are announced while the run is still going.
	note, err := conn.WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var hint struct {
		ExecutionID string `json:"execution_id"`
		Seq         int    `json:"seq"`
	}
	if err := json.Unmarshal([]byte(note.Payload), &hint); err != nil || hint.ExecutionID != id || hint.Seq < 1 {
		t.Errorf("notify payload %q: %v", note.Payload, err)
	}
	s.System("done")
	tail, truncated := s.Close()
	if !truncated || !bytes.Equal(tail, want[len(want)-16:]) {
		t.Errorf("tail = %q truncated %v", tail, truncated)
	}
	rows, err := p.Query(ctx, `SELECT seq, stream, data FROM execution_logs WHERE execution_id = $1 ORDER BY seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got, system []byte
	prev := 0
	for rows.Next() {
		var seq int
		var stream string
		var data []byte
		if err := rows.Scan(&seq, &stream, &data); err != nil {
			t.Fatal(err)
		}
		if seq != prev+1 {
			t.Errorf("seq %d after %d", seq, prev)
		}
		prev = seq
		if stream == streamSystem {
			system = append(system, data...)
		} else {
			got = append(got, data...)
		}
	}
	if !bytes.Equal(got, want) {
		t.Errorf("stored output differs:\n got %q\nwant %q", got, want)
	}
	if string(system) != "[oikos] done\n" {
		t.Errorf("system = %q", system)
	}
	if prev < 2 {
		t.Errorf("only %d rows; writes past FlushBytes should have been split into batches", prev)
	}
}

// Ends recorded as one batch: each row gets its own answer, and a row that is no longer ours
// is left alone without failing the others.
func TestRecordEndsBatch(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ctx := context.Background()
	p := v.db.Pool
	host := fleettest.InsertEntity(t, p, "host", "hermes", "", map[string]any{"lan_ipv4": "127.0.11.1"})
	mine := insertExecution(t, p, host, "host:hermes", "run", "true", "pending_approval", nil)
	swept := insertExecution(t, p, host, "host:hermes", "run", "true", "pending_approval", nil)
	if _, err := p.Exec(ctx, `UPDATE executions SET status = 'running', claimed_by = 's1', started_at = now() WHERE id = ANY($1)`,
		[]string{mine, swept}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exec(ctx, `UPDATE executions SET status = 'interrupted' WHERE id = $1`, swept); err != nil {
		t.Fatal(err)
	}
	e := New(Options{Pool: p, SSH: v.ssh, Fleet: v.g, SchedulerID: "s1", Logger: zerolog.Nop()})
	code := 0
	mineJob := job{ID: mine, TargetID: host, TargetSlug: "host:hermes", Action: "run", RiskClass: "read_only"}
	ends := []*end{
		newEnd(mineJob, outcome{Status: StatusFailed, ExitCode: &code, Err: "bad \x00 \xff byte",
			Result: map[string]any{"k": "v \" \\ \x00"}}, []byte("out\x00\xff"), false),
		newEnd(job{ID: swept, TargetID: host, TargetSlug: "host:hermes", Action: "run", RiskClass: "read_only"},
			outcome{Status: StatusCompleted, ExitCode: &code}, nil, false),
	}
	e.recordEnds(ctx, ends)
	if err := <-ends[0].done; err != nil {
		t.Errorf("mine: %v", err)
	}
	if err := <-ends[1].done; !errors.Is(err, errNotOurs) {
		t.Errorf("swept: %v, want errNotOurs", err)
	}
	if r := readRow(t, p, mine); r.Status != StatusFailed || !bytes.Equal(r.Output, []byte("out\x00\xff")) || r.Finished == nil ||
		r.Error != "bad \uFFFD \uFFFD byte" {
		t.Errorf("mine = %+v", r)
	}
	var k string
	if err := p.QueryRow(ctx, `SELECT result->>'k' FROM executions WHERE id = $1`, mine).Scan(&k); err != nil || k != "v \" \\ \uFFFD" {
		t.Errorf("result.k = %q, %v", k, err)
	}
	if r := readRow(t, p, swept); r.Status != StatusInterrupted {
		t.Errorf("swept = %+v", r)
	}
	if got := strings.Join(eventTypes(t, p, mine), ","); got != "execution.failed" {
		t.Errorf("events of mine = %s", got)
	}
	if got := eventTypes(t, p, swept); len(got) != 0 {
		t.Errorf("events of swept = %v", got)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/auth"
	"github.com/oikos-hq/oikos/api/internal/execapi"
	execsvc "github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/decision"
	"github.com/oikos-hq/oikos/api/internal/graph"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/policy"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// execAPI is an api serving the execution routes over a fresh database with two containers,
// and the environment of a CLI pointed at it with an operator token.
type execAPI struct {
	t    *testing.T
	url  string
	pool *pgxpool.Pool
	env  map[string]string
	ts   *httptest.Server
}

func newExecAPI(t *testing.T) *execAPI {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New(graph.Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.SyncOntology(ctx, o); err != nil {
		t.Fatal(err)
	}
	for _, in := range []graph.CreateEntityInput{
		{Type: "proxmox-host", Name: "atlas", Attributes: map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1"}},
		{Type: "lxc", Name: "web", Attributes: map[string]any{"vmid": 101, "host": "atlas"}},
		{Type: "lxc", Name: "db", Attributes: map[string]any{"vmid": 102, "host": "atlas"}},
	} {
		if _, _, err := g.CreateEntity(ctx, graph.Meta{Actor: "seed"}, in); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := execsvc.New(execsvc.Options{Pool: db.Pool, Policy: policy.Default(), Graph: g, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := decision.New(decision.Options{Pool: db.Pool, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	store := auth.NewStore(db.Pool)
	tok, err := store.Create(ctx, "op", auth.RoleOperator)
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	execapi.Register(e.Group("/api/v1"), execapi.Deps{Service: svc, Decisions: dec, Auth: store, Logger: zerolog.Nop(), StreamPoll: 20 * time.Millisecond})
	ts := httptest.NewServer(e)
	t.Cleanup(func() {
		ts.CloseClientConnections()
		ts.Close()
	})
	return &execAPI{t: t, url: db.URL, pool: db.Pool, ts: ts,
		env: map[string]string{"OIKOS_API_URL": ts.URL, "OIKOS_TOKEN": tok}}
}

// cli runs one subcommand against the api with stdin.
func (a *execAPI) cli(run func(context.Context, *cliEnv, []string) int, stdin string, args ...string) (int, string, string) {
	a.t.Helper()
	var out, errOut bytes.Buffer
	client := a.ts.Client()
	client.Timeout = 30 * time.Second
	e := &cliEnv{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return a.env[k] }, HTTP: client}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, e, args)
	return code, out.String(), errOut.String()
}

// scheduler plays the scheduler for the next runnable execution, as
// docs/execution-contract.md says: it waits for the NOTIFY, claims, writes output chunks, and
// finishes with exitCode.
// logChunk is one execution_logs row the fake scheduler writes.
type logChunk struct {
	stream string
	data   []byte
}

func (a *execAPI) scheduler(chunks []logChunk, exitCode int) <-chan error {
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	conn, err := pgx.Connect(ctx, a.url)
	if err != nil {
		cancel()
		done <- err
		return done
	}
	if _, err := conn.Exec(ctx, `LISTEN oikos_exec`); err != nil {
		cancel()
		done <- err
		return done
	}
	go func() {
		defer cancel()
		defer conn.Close(context.Background())
		done <- func() error {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return err
			}
			id := n.Payload
			if _, err := a.pool.Exec(ctx, `UPDATE executions SET status = 'running', started_at = now() WHERE id = $1`, id); err != nil {
				return err
			}
			var out []byte
			for i, c := range chunks {
				err := pg.InTx(ctx, a.pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, `INSERT INTO execution_logs (execution_id, seq, stream, data) VALUES ($1, $2, $3, $4)`, id, i+1, c.stream, c.data); err != nil {
						return err
					}
					p, _ := json.Marshal(map[string]any{"execution_id": id, "seq": i + 1})
					return eventbus.Notify(ctx, tx, eventbus.ChannelExecLog, string(p))
				})
				if err != nil {
					return err
				}
				out = append(out, c.data...)
			}
			status := "completed"
			if exitCode != 0 {
				status = "failed"
			}
			_, err = a.pool.Exec(ctx, `UPDATE executions SET status = $2, exit_code = $3, output = $4, finished_at = now() WHERE id = $1`,
				id, status, exitCode, append([]byte{}, out...))
			return err
		}()
	}()
	return done
}

var approvalRe = regexp.MustCompile(`waits for approval ([0-9a-f-]{36})`)

func TestCLIRunFollowsReadOnly(t *testing.T) {
	t.Parallel()
	a := newExecAPI(t)
	chunks := []logChunk{{"stdout", []byte("line one\n")}, {"stderr", []byte("warning: on stderr\n")}, {"system", []byte("[oikos] executor note\n")}, {"stdout", []byte{'b', 0x00, 0xff, '\n'}}}
	stdout := "line one\nb\x00\xff\n"
	done := a.scheduler(chunks, 3)
	code, out, errOut := a.cli(runRun, "", "lxc:web", "--", "cat", "/etc/hostname")
	if err := <-done; err != nil {
		t.Fatalf("scheduler: %v", err)
	}
	if code != 3 {
		t.Fatalf("exit %d, want the command's 3; stderr %s", code, errOut)
	}
	if out != stdout {
		t.Fatalf("stdout %q, want the exact output bytes", out)
	}
	// The command's stderr goes to the CLI's stderr, as it would run locally.
	if !strings.Contains(errOut, "warning: on stderr\n") || !strings.Contains(errOut, "[oikos] executor note\n") || !strings.Contains(errOut, "read_only") || !strings.Contains(errOut, "failed (exit 3)") {
		t.Fatalf("stderr: %s", errOut)
	}
	// executions list and tail of a finished execution.
	code, out, _ = a.cli(runExecutions, "", "list")
	if code != 0 || !strings.Contains(out, "lxc:web") || !strings.Contains(out, "cat /etc/hostname") || !strings.Contains(out, "failed") {
		t.Fatalf("executions list: %d %s", code, out)
	}
	code, out, _ = a.cli(runExecutions, "", "list", "--json", "--status", "failed")
	var p page[execution]
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || len(p.Items) != 1 {
		t.Fatalf("executions list --json: %d %s", code, out)
	}
	code, out, _ = a.cli(runExecutions, "", "tail", p.Items[0].Id.String())
	if code != 3 || out != stdout {
		t.Fatalf("tail: %d %q", code, out)
	}
	if code, _, errOut := a.cli(runExecutions, "", "tail", "0190b7a4-0000-7000-8000-000000000000"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("tail of an unknown execution: %d %s", code, errOut)
	}
}

func TestCLIApproveAndDeny(t *testing.T) {
	t.Parallel()
	a := newExecAPI(t)
	code, out, errOut := a.cli(runRun, "", "--session", "s1", "lxc:web", "--", "touch /srv/flag")
	m := approvalRe.FindStringSubmatch(out)
	if code != 0 || m == nil || !strings.Contains(out, "config_mutation") {
		t.Fatalf("queued run: %d %q %q", code, out, errOut)
	}
	id := m[1]
	code, out, _ = a.cli(runApprovals, "", "list")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "touch /srv/flag") {
		t.Fatalf("approvals list: %d %s", code, out)
	}
	// The same request again is reported as already queued.
	if code, out, _ := a.cli(runRun, "", "--session", "s1", "lxc:web", "--", "touch /srv/flag"); code != 0 || !strings.Contains(out, "already queued") {
		t.Fatalf("duplicate run: %d %s", code, out)
	}
	code, out, errOut = a.cli(runApprove, "", id)
	if code != 0 || !strings.Contains(out, "approved (config_mutation)") || !strings.Contains(out, "assent window open") {
		t.Fatalf("approve: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := a.cli(runApprove, "", id); code != 1 || !strings.Contains(errOut, "409") || !strings.Contains(errOut, "already approved") {
		t.Fatalf("second approve: %d %s", code, errOut)
	}
	// Deny.
	_, out, _ = a.cli(runRun, "", "lxc:db", "--", "touch /srv/other")
	id = approvalRe.FindStringSubmatch(out)[1]
	if code, out, _ := a.cli(runDeny, "", "--reason", "not today", id); code != 0 || !strings.Contains(out, "denied") {
		t.Fatalf("deny: %d %s", code, out)
	}
	// A destructive step needs its target typed out.
	_, out, _ = a.cli(runRun, "", "lxc:db", "--", "rm -rf /var/lib/old")
	id = approvalRe.FindStringSubmatch(out)[1]
	if code, _, errOut := a.cli(runApprove, "", "--confirm", "lxc:web", id); code != 1 || !strings.Contains(errOut, "nothing approved") {
		t.Fatalf("wrong confirmation: %d %s", code, errOut)
	}
	if code, _, errOut := a.cli(runApprove, "", id); code != 1 || !strings.Contains(errOut, "nothing approved") {
		t.Fatalf("no confirmation: %d %s", code, errOut)
	}
	code, out, errOut = a.cli(runApprove, "lxc:db\n", id)
	if code != 0 || !strings.Contains(out, "approved (destructive)") || !strings.Contains(errOut, "rm -rf /var/lib/old") {
		t.Fatalf("typed confirmation: %d %s %s", code, out, errOut)
	}
	var via string
	if err := a.pool.QueryRow(context.Background(), `SELECT via FROM approvals WHERE id = $1`, id).Scan(&via); err != nil || via != "typed_confirmation" {
		t.Fatalf("recorded via %q %v", via, err)
	}
	if code, out, _ := a.cli(runApprovals, "", "list"); code != 0 || !strings.Contains(out, "no pending approvals") {
		t.Fatalf("empty approvals list: %d %s", code, out)
	}
}

func TestCLIUsageAndRefusals(t *testing.T) {
	t.Parallel()
	a := newExecAPI(t)
	for _, c := range []struct {
		run  func(context.Context, *cliEnv, []string) int
		args []string
	}{
		{runRun, nil},
		{runRun, []string{"lxc:web"}},
		{runRun, []string{"lxc:web", "uptime"}},
		{runRun, []string{"lxc:web", "--", " "}},
		{runApprove, nil},
		{runDeny, []string{"a", "b"}},
		{runApprovals, nil},
		{runApprovals, []string{"show"}},
		{runExecutions, nil},
		{runExecutions, []string{"rm"}},
		{runExecutions, []string{"tail"}},
		{runExecutions, []string{"list", "--limit", "0"}},
	} {
		if code, _, _ := a.cli(c.run, "", c.args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", c.args, code)
		}
	}
	code, _, errOut := a.cli(runRun, "", "lxc:web", "--", "head", "-", "n", "3", "/etc/passwd")
	if code != 1 || !strings.Contains(errOut, "422") || !strings.Contains(errOut, "-n") {
		t.Fatalf("syntax refusal: %d %s", code, errOut)
	}
	if code, _, errOut := a.cli(runRun, "", "lxc:nope", "--", "uptime"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("unknown target: %d %s", code, errOut)
	}
}

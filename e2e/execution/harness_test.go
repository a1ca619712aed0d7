package execution_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/ssh"

	"github.com/oikos-hq/oikos/scheduler/app"
	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/shared/remote"
	"github.com/oikos-hq/oikos/shared/seedfile"
	"github.com/oikos-hq/oikos/testkit/labsim"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// dialTimeout is the SSH pool's dial timeout in these tests: a host that is down must fail
// within it.
const dialTimeout = 10 * time.Second

type labOptions struct {
	fleet      func(*labsim.Fleet) // adjust the simulated fleet before it starts
	noSim      bool                // no simulator: the pool dials the real (loopback) network
	noExecutor bool                // start no executor (the test starts its own)
	concurrent int
}

// lab is one test's world: a database seeded with the inventory, the lab simulator serving
// it over SSH, the scheduler's SSH pool and an executor wired as the daemon wires them.
type lab struct {
	t       testing.TB
	db      *pgtest.DB
	ids     map[string]string // entity id by slug
	sim     *labsim.Sim
	signer  ssh.Signer
	keyFile string // the client key in OpenSSH format, for a helper process
	ssh     *remote.Pool
	log     zerolog.Logger
}

func newLab(t testing.TB, o labOptions) *lab {
	t.Helper()
	l := &lab{t: t, db: pgtest.New(t), log: zerolog.Nop()}
	if testing.Verbose() {
		l.log = zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	}
	l.ids = seedInventory(t, l.db.Pool)

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if l.signer, err = ssh.NewSignerFromKey(priv); err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	l.keyFile = filepath.Join(t.TempDir(), "id_ed25519")
	if err := os.WriteFile(l.keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}

	popts := remote.PoolOptions{Signer: l.signer, HostKeys: app.NewHostKeys(l.db.Pool, l.log), DialTimeout: dialTimeout, Logger: l.log}
	if !o.noSim {
		fleet, err := labsim.FleetFromInventory(seeds.Inventory())
		if err != nil {
			t.Fatal(err)
		}
		if o.fleet != nil {
			o.fleet(&fleet)
		}
		l.sim, err = labsim.New(fleet, labsim.Options{
			StateDir:       t.TempDir(),
			Listen:         func(string) string { return "127.0.0.1:0" },
			AuthorizedKeys: []ssh.PublicKey{l.signer.PublicKey()},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.sim.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.sim.Stop)
		popts.Dial = l.sim.DialContext
	}
	l.ssh = remote.NewPool(popts)
	t.Cleanup(l.ssh.Close)
	if !o.noExecutor {
		l.startExecutor("scheduler-a", o.concurrent)
	}
	return l
}

// startExecutor wires a notifier and an executor as the scheduler daemon does and starts
// them; both stop when the test ends.
func (l *lab) startExecutor(id string, concurrency int) *app.Executor {
	l.t.Helper()
	cfg, err := pgx.ParseConfig(l.db.URL)
	if err != nil {
		l.t.Fatal(err)
	}
	notifier := eventbus.NewNotifier(eventbus.NotifierOptions{ConnConfig: cfg, Logger: l.log})
	ex := app.NewExecutor(app.ExecutorOptions{
		Pool: l.db.Pool, SSH: l.ssh, Fleet: app.NewFleet(l.db.Pool, app.FleetOptions{Logger: l.log}),
		Notifier: notifier, Logger: l.log, SchedulerID: id, Concurrency: concurrency,
	})
	ctx := context.Background()
	if err := notifier.Start(ctx); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(notifier.Stop)
	if err := ex.Start(ctx); err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(ex.Stop)
	return ex
}

// seedInventory writes the seeded ontology's types and the inventory's entities and edges
// with plain SQL — what the api's ingest leaves in the database — and returns ids by slug.
func seedInventory(t testing.TB, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	ctx := context.Background()
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatal(err)
	}
	inv, err := seedfile.ParseInventory(seeds.Inventory())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, et := range o.Types() {
		var parent *string
		if et.Parent != "" {
			parent = &et.Parent
		}
		if _, err := tx.Exec(ctx, `INSERT INTO entity_types (name, parent, abstract, states, default_state) VALUES ($1, $2, $3, $4, $5)`,
			et.Name, parent, et.Abstract, et.States, et.DefaultState); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range o.RelationshipTypes() {
		if _, err := tx.Exec(ctx, `INSERT INTO relationship_types (name, sources, targets) VALUES ($1, $2, $3)`,
			r.Name, r.Sources, r.Targets); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range inv.Entities {
		state := e.State
		if et, ok := o.Type(e.Type); ok && state == "" {
			state = et.DefaultState
		}
		id := uuid.Must(uuid.NewV7()).String()
		if _, err := tx.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state, attributes) VALUES ($1, $2, $3, $4, $5, $6)`,
			id, e.Slug(), e.Type, e.Name, state, e.Attributes); err != nil {
			t.Fatalf("insert %s: %v", e.Slug(), err)
		}
		ids[e.Slug()] = id
	}
	for _, r := range inv.Relationships {
		if _, err := tx.Exec(ctx, `INSERT INTO relationships (id, type, source_id, target_id) VALUES ($1, $2, $3, $4)`,
			uuid.Must(uuid.NewV7()).String(), r.Type, ids[r.Source], ids[r.Target]); err != nil {
			t.Fatalf("insert %s: %v", r, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return ids
}

// execSpec is what the api would have decided: a runnable execution of an action.
type execSpec struct {
	target  string
	action  string // default run
	command string
	params  map[string]any
	timeout int // seconds; default 600 (the column default)
	session string
}

// submit inserts an approved execution and NOTIFYs oikos_exec in the same transaction, as the
// api's gate does for a run_now decision (docs/execution-contract.md), and returns its id.
func (l *lab) submit(s execSpec) string {
	l.t.Helper()
	ctx := context.Background()
	id := uuid.Must(uuid.NewV7()).String()
	if err := pgx.BeginFunc(ctx, l.db.Pool, func(tx pgx.Tx) error {
		if err := insertExecution(ctx, tx, l.ids, id, s); err != nil {
			return err
		}
		return eventbus.Notify(ctx, tx, eventbus.ChannelExec, id)
	}); err != nil {
		l.t.Fatalf("submit %+v: %v", s, err)
	}
	return id
}

func insertExecution(ctx context.Context, tx pgx.Tx, ids map[string]string, id string, s execSpec) error {
	if s.action == "" {
		s.action = "run"
	}
	if s.params == nil {
		s.params = map[string]any{}
	}
	if s.timeout == 0 {
		s.timeout = 600
	}
	if s.command == "" {
		s.command = s.action
	}
	var session *string
	if s.session != "" {
		session = &s.session
	}
	targetID, ok := ids[s.target]
	if !ok {
		return os.ErrNotExist
	}
	_, err := tx.Exec(ctx, `INSERT INTO executions (id, target_id, target_slug, action, command, params, purpose, risk_class,
		status, authorised_by, session_id, correlation_id, requested_by, dedup_key, timeout_seconds)
		VALUES ($1, $2, $3, $4, $5, $6, 'e2e', 'read_only', 'approved', 'auto', $7, coalesce($7, ''), 'e2e', $8, $9)`,
		id, targetID, s.target, s.action, s.command, s.params, session, "e2e:"+id, s.timeout)
	return err
}

// execRow is the executions row as the api would answer it.
type execRow struct {
	Status, Error, ClaimedBy string
	ExitCode                 *int
	Output                   []byte
	Truncated                bool
	Result                   map[string]any
	Started, Finished        *time.Time
}

func (l *lab) row(id string) execRow {
	l.t.Helper()
	var r execRow
	if err := l.db.Pool.QueryRow(context.Background(), `SELECT status, error, coalesce(claimed_by, ''), exit_code, output,
		output_truncated, result, started_at, finished_at FROM executions WHERE id = $1`, id).
		Scan(&r.Status, &r.Error, &r.ClaimedBy, &r.ExitCode, &r.Output, &r.Truncated, &r.Result, &r.Started, &r.Finished); err != nil {
		l.t.Fatal(err)
	}
	return r
}

// wait blocks (on oikos_events notifications, with a deadline) until the execution has left
// approved/running, and returns the row.
func (l *lab) wait(id string, within time.Duration) execRow {
	l.t.Helper()
	return l.waitFor(id, within, func(r execRow) bool { return r.Status != "approved" && r.Status != "running" })
}

func (l *lab) waitFor(id string, within time.Duration, done func(execRow) bool) execRow {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	conn, err := pgx.Connect(ctx, l.db.URL)
	if err != nil {
		l.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "LISTEN oikos_events; LISTEN oikos_exec_log"); err != nil {
		l.t.Fatal(err)
	}
	for {
		r := l.row(id)
		if done(r) {
			return r
		}
		wctx, wcancel := context.WithTimeout(ctx, 250*time.Millisecond)
		_, _ = conn.WaitForNotification(wctx)
		wcancel()
		if ctx.Err() != nil {
			l.t.Fatalf("execution %s still %s after %s (error %q)", id, r.Status, within, r.Error)
		}
	}
}

// logs returns the execution's logged command output (stdout stream rows, in seq order)
// and what the executor itself logged.
func (l *lab) logs(id string) (output, system []byte) {
	l.t.Helper()
	rows, err := l.db.Pool.Query(context.Background(), `SELECT stream, data FROM execution_logs WHERE execution_id = $1 ORDER BY seq`, id)
	if err != nil {
		l.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var stream string
		var data []byte
		if err := rows.Scan(&stream, &data); err != nil {
			l.t.Fatal(err)
		}
		if stream == "system" {
			system = append(system, data...)
		} else {
			output = append(output, data...)
		}
	}
	return output, system
}

// events lists the execution.* event types recorded for an execution, in order, and checks
// each payload is the contract's JSON.
func (l *lab) events(id string) []string {
	l.t.Helper()
	rows, err := l.db.Pool.Query(context.Background(), `SELECT type, payload FROM events WHERE payload->>'execution_id' = $1 ORDER BY id`, id)
	if err != nil {
		l.t.Fatal(err)
	}
	defer rows.Close()
	var types []string
	for rows.Next() {
		var typ string
		var payload json.RawMessage
		if err := rows.Scan(&typ, &payload); err != nil {
			l.t.Fatal(err)
		}
		var p map[string]any
		if err := json.Unmarshal(payload, &p); err != nil {
			l.t.Errorf("%s payload is not JSON: %v", typ, err)
		}
		for _, k := range []string{"execution_id", "status", "target", "action", "risk_class"} {
			if _, ok := p[k]; !ok {
				l.t.Errorf("%s payload lacks %s: %s", typ, k, payload)
			}
		}
		types = append(types, typ)
	}
	return types
}

// runOnce submits an execution and waits for its end.
func (l *lab) runOnce(s execSpec, within time.Duration) (string, execRow) {
	l.t.Helper()
	id := l.submit(s)
	return id, l.wait(id, within)
}

func joined(s []string) string { return strings.Join(s, ",") }

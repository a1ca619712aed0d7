package signals

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func setup(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	db := pgtest.New(t).Pool
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO entity_types (name) VALUES ('host')`); err != nil {
		t.Fatal(err)
	}
	id := "0190a000-0000-7000-8000-000000000001"
	if _, err := db.Exec(ctx, `INSERT INTO entities (id, slug, type, name, state) VALUES ($1, 'host:a', 'host', 'a', 'active')`, id); err != nil {
		t.Fatal(err)
	}
	return db, id
}

type row struct {
	id, status  string
	occurrences int64
	ackBy       *string
}

func rowsOf(t *testing.T, db *pgxpool.Pool, key string) []row {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id::text, status, occurrences, acknowledged_by FROM signals WHERE dedup_key = $1 ORDER BY first_seen, id`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.id, &r.status, &r.occurrences, &r.ackBy); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

func countEvents(t *testing.T, db *pgxpool.Pool, typ string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM events WHERE type = $1`, typ).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A cause raised again is one signal with a growing occurrence count and one event; when
// the cause clears the signal resolves (acknowledged or not) with an event; the cause coming
// back opens a fresh, unacknowledged signal.
func TestDedupAndAutoResolve(t *testing.T) {
	t.Parallel()
	db, entity := setup(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	st := New(c.now)
	sig := Signal{Kind: "unmonitored", DedupKey: "unmonitored:" + entity, EntityID: entity, Summary: "no checks"}

	first, err := st.Raise(ctx, db, sig)
	if err != nil || !first.Created || first.Occurrences != 1 {
		t.Fatalf("first raise: %+v %v", first, err)
	}
	for i := 0; i < 4; i++ {
		c.add(time.Minute)
		r, err := st.Raise(ctx, db, sig)
		if err != nil || r.Created || r.ID != first.ID {
			t.Fatalf("repeat raise: %+v %v", r, err)
		}
	}
	got := rowsOf(t, db, sig.DedupKey)
	if len(got) != 1 || got[0].occurrences != 5 || got[0].status != "open" {
		t.Fatalf("rows %+v", got)
	}
	if n := countEvents(t, db, EventRaised); n != 1 {
		t.Errorf("%d signal.raised events, want 1 (occurrences do not emit)", n)
	}
	// The operator acknowledges (as the api does).
	if _, err := db.Exec(ctx, `UPDATE signals SET status = 'acknowledged', acknowledged_by = 'dana', acknowledged_at = now() WHERE id = $1`, first.ID); err != nil {
		t.Fatal(err)
	}
	r, err := st.Raise(ctx, db, sig)
	if err != nil || r.Created || r.ID != first.ID {
		t.Fatalf("raise while acknowledged: %+v %v", r, err)
	}
	if got := rowsOf(t, db, sig.DedupKey); got[0].status != "acknowledged" {
		t.Errorf("a raise reopened an acknowledged signal: %+v", got)
	}
	// The cause clears: the acknowledged signal resolves with it.
	ok, err := st.Resolve(ctx, db, sig.DedupKey, "now monitored")
	if err != nil || !ok {
		t.Fatalf("resolve: %v %v", ok, err)
	}
	if ok, err := st.Resolve(ctx, db, sig.DedupKey, "again"); err != nil || ok {
		t.Fatalf("second resolve: %v %v", ok, err)
	}
	if n := countEvents(t, db, EventResolved); n != 1 {
		t.Errorf("%d signal.resolved events, want 1", n)
	}
	var payload map[string]any
	if err := db.QueryRow(ctx, `SELECT payload FROM events WHERE type = $1`, EventResolved).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	if payload["previous_status"] != "acknowledged" || payload["reason"] != "now monitored" || payload["occurrences"] != float64(6) {
		t.Errorf("resolved payload %v", payload)
	}
	// The cause returns: a new signal, open, without the old acknowledgement.
	again, err := st.Raise(ctx, db, sig)
	if err != nil || !again.Created || again.ID == first.ID || again.Occurrences != 1 {
		t.Fatalf("raise after resolve: %+v %v", again, err)
	}
	got = rowsOf(t, db, sig.DedupKey)
	if len(got) != 2 || got[0].status != "resolved" || got[1].status != "open" || got[1].ackBy != nil {
		t.Fatalf("rows %+v", got)
	}
}

// A mute that has run out is reopened by the next occurrence; a running mute is kept.
func TestExpiredMuteReopens(t *testing.T) {
	t.Parallel()
	db, entity := setup(t)
	ctx := context.Background()
	c := &clock{t: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	st := New(c.now)
	sig := Signal{Kind: "probe_stuck", DedupKey: "probe_stuck:x", EntityID: entity, Severity: SeverityCritical}
	r, err := st.Raise(ctx, db, sig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE signals SET status = 'muted', muted_until = $2 WHERE id = $1`, r.ID, c.now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	c.add(30 * time.Minute)
	if _, err := st.Raise(ctx, db, sig); err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, db, sig.DedupKey); got[0].status != "muted" {
		t.Fatalf("muted signal changed before its mute ran out: %+v", got)
	}
	c.add(time.Hour)
	if _, err := st.Raise(ctx, db, sig); err != nil {
		t.Fatal(err)
	}
	if got := rowsOf(t, db, sig.DedupKey); got[0].status != "open" || got[0].occurrences != 3 {
		t.Fatalf("expired mute not reopened: %+v", got)
	}
}

// Sync raises what is wanted and resolves every other unresolved signal of its kind — and
// only of its kind.
func TestSync(t *testing.T) {
	t.Parallel()
	db, entity := setup(t)
	ctx := context.Background()
	st := New(nil)
	mk := func(kind, key string) Signal { return Signal{Kind: kind, DedupKey: key, EntityID: entity} }
	if _, err := st.Raise(ctx, db, mk("other", "other:1")); err != nil {
		t.Fatal(err)
	}
	raised, created, resolved, err := st.Sync(ctx, db, "k", []Signal{mk("k", "k:1"), mk("k", "k:2")}, "gone")
	if err != nil || raised != 2 || created != 2 || resolved != 0 {
		t.Fatalf("first sync: %d %d %d %v", raised, created, resolved, err)
	}
	raised, created, resolved, err = st.Sync(ctx, db, "k", []Signal{mk("k", "k:2"), mk("k", "k:3")}, "gone")
	if err != nil || raised != 2 || created != 1 || resolved != 1 {
		t.Fatalf("second sync: %d %d %d %v", raised, created, resolved, err)
	}
	open, err := st.Open(ctx, db, "k")
	if err != nil || len(open) != 2 || open[0] != "k:2" || open[1] != "k:3" {
		t.Fatalf("open %v %v", open, err)
	}
	if got := rowsOf(t, db, "k:2"); got[0].occurrences != 2 {
		t.Errorf("k:2 %+v", got)
	}
	if other, _ := st.Open(ctx, db, "other"); len(other) != 1 {
		t.Errorf("another kind's signal was touched: %v", other)
	}
	if _, _, _, err := st.Sync(ctx, db, "k", []Signal{mk("x", "x:1")}, "gone"); !errors.Is(err, ErrInvalid) {
		t.Errorf("foreign kind accepted: %v", err)
	}
	if _, err := st.Raise(ctx, db, Signal{Kind: "k"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("signal without key accepted: %v", err)
	}
}

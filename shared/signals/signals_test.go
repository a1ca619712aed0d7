package signals

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
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

func countAudit(t *testing.T, db *pgxpool.Pool, action string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = $1`, action).Scan(&n); err != nil {
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
	if n := countAudit(t, db, ActionRaise); n != 1 {
		t.Errorf("%d signal.raise audit rows, want 1 (occurrences are not audited)", n)
	}
	var actor, entityID string
	var before, after *string
	if err := db.QueryRow(ctx, `SELECT actor, entity_id::text, before::text, after->>'status' FROM audit_log WHERE action = $1`, ActionRaise).
		Scan(&actor, &entityID, &before, &after); err != nil || actor != Actor || entityID != entity || before != nil || after == nil || *after != "open" {
		t.Errorf("raise audit row: %s %s %v %v (%v)", actor, entityID, before, after, err)
	}
	// The operator acknowledges (as the api does).
	if _, err := st.Decide(ctx, db, first.ID, DecisionAck, nil, By{Name: "dana"}); err != nil {
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
	var prev, now string
	if err := db.QueryRow(ctx, `SELECT before->>'status', after->>'status' FROM audit_log WHERE action = $1 AND actor = $2`, ActionResolve, Actor).
		Scan(&prev, &now); err != nil || prev != "acknowledged" || now != "resolved" {
		t.Errorf("resolve audit row: %s -> %s (%v)", prev, now, err)
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

// A mute that has run out is reopened by the next occurrence, which is an opening: one
// signal.raised (marked reopened) and one audit row; a running mute is kept, and the raises
// after the reopening are plain occurrences again.
func TestExpiredMuteReopens(t *testing.T) {
	t.Parallel()
	db, entity := setup(t)
	ctx := context.Background()
	c := &clock{t: time.Now().UTC()}
	st := New(c.now)
	sig := Signal{Kind: "probe_stuck", DedupKey: "probe_stuck:x", EntityID: entity, Severity: SeverityCritical}
	r, err := st.Raise(ctx, db, sig)
	if err != nil {
		t.Fatal(err)
	}
	until := c.now().Add(time.Hour)
	if _, err := st.Decide(ctx, db, r.ID, DecisionMute, &until, By{Name: "dana"}); err != nil {
		t.Fatal(err)
	}
	c.add(30 * time.Minute)
	if r, err := st.Raise(ctx, db, sig); err != nil || r.Reopened || r.Created {
		t.Fatalf("raise during the mute: %+v %v", r, err)
	}
	if got := rowsOf(t, db, sig.DedupKey); got[0].status != "muted" {
		t.Fatalf("muted signal changed before its mute ran out: %+v", got)
	}
	if n := countEvents(t, db, EventRaised); n != 1 {
		t.Fatalf("%d signal.raised events during the mute, want 1", n)
	}
	c.add(time.Hour)
	again, err := st.Raise(ctx, db, sig)
	if err != nil || !again.Reopened || again.Created || again.ID != r.ID {
		t.Fatalf("raise after the mute: %+v %v", again, err)
	}
	if got := rowsOf(t, db, sig.DedupKey); len(got) != 1 || got[0].status != "open" || got[0].occurrences != 3 {
		t.Fatalf("expired mute not reopened: %+v", got)
	}
	var mutedUntil *time.Time
	if err := db.QueryRow(ctx, `SELECT muted_until FROM signals WHERE id = $1`, r.ID).Scan(&mutedUntil); err != nil || mutedUntil != nil {
		t.Errorf("reopened signal keeps muted_until %v (%v)", mutedUntil, err)
	}
	if n := countEvents(t, db, EventRaised); n != 2 {
		t.Errorf("%d signal.raised events, want 2 (the opening and the reopening)", n)
	}
	var reopened bool
	if err := db.QueryRow(ctx, `SELECT (payload->>'reopened')::bool FROM events WHERE type = $1 ORDER BY id DESC LIMIT 1`, EventRaised).
		Scan(&reopened); err != nil || !reopened {
		t.Errorf("reopening event not marked: %v %v", reopened, err)
	}
	var prev, now string
	if err := db.QueryRow(ctx, `SELECT before->>'status', after->>'status' FROM audit_log WHERE action = $1`, ActionReopen).
		Scan(&prev, &now); err != nil || prev != "muted" || now != "open" {
		t.Errorf("reopen audit row: %s -> %s (%v)", prev, now, err)
	}
	c.add(time.Minute)
	if r, err := st.Raise(ctx, db, sig); err != nil || r.Reopened || r.Created || r.Occurrences != 4 {
		t.Fatalf("raise after the reopening: %+v %v", r, err)
	}
	if n := countEvents(t, db, EventRaised); n != 2 {
		t.Errorf("%d signal.raised events after a further occurrence, want 2", n)
	}
}

// Decisions as the api takes them: each applies from the statuses it allows, writes its audit
// row (who, through which request, before and after) and its event in the same transaction,
// and a rolled-back transaction leaves neither.
func TestDecide(t *testing.T) {
	t.Parallel()
	db, entity := setup(t)
	ctx := context.Background()
	st := New(nil)
	r, err := st.Raise(ctx, db, Signal{Kind: "unmonitored", DedupKey: "unmonitored:" + entity, EntityID: entity})
	if err != nil {
		t.Fatal(err)
	}
	by := By{Name: "dana", Method: "POST", Path: "/api/v1/signals/" + r.ID + "/ack", CorrelationID: "ack-1"}

	// Rolled back with the caller's transaction.
	boom := errors.New("later step failed")
	err = pg.InTx(ctx, db, func(tx pgx.Tx) error {
		if _, err := st.Decide(ctx, tx, r.ID, DecisionAck, nil, by); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if got := rowsOf(t, db, "unmonitored:"+entity); got[0].status != "open" || countAudit(t, db, ActionAck) != 0 || countEvents(t, db, EventAcknowledged) != 0 {
		t.Fatalf("a rolled-back decision left traces: %+v", got)
	}

	acked, err := Decide(ctx, db, r.ID, DecisionAck, nil, by)
	if err != nil {
		t.Fatal(err)
	}
	if acked.Status != "acknowledged" || acked.AcknowledgedBy == nil || *acked.AcknowledgedBy != "dana" ||
		acked.Entity == nil || *acked.Entity != "host:a" || acked.AcknowledgedAt == nil {
		t.Errorf("acknowledged row %+v", acked)
	}
	var actor, method, path, corr, prev, now string
	if err := db.QueryRow(ctx, `SELECT actor, method, path, correlation_id, before->>'status', after->>'status' FROM audit_log
		WHERE action = $1 AND entity_id = $2`, ActionAck, entity).Scan(&actor, &method, &path, &corr, &prev, &now); err != nil ||
		actor != "dana" || method != "POST" || path != by.Path || corr != "ack-1" || prev != "open" || now != "acknowledged" {
		t.Errorf("ack audit row: %s %s %s %s %s -> %s (%v)", actor, method, path, corr, prev, now, err)
	}
	var payload map[string]any
	if err := db.QueryRow(ctx, `SELECT payload FROM events WHERE type = $1 AND correlation_id = 'ack-1' AND actor = 'dana' AND entity_id = $2`,
		EventAcknowledged, entity).Scan(&payload); err != nil ||
		payload["signal_id"] != r.ID || payload["status"] != "acknowledged" || payload["previous_status"] != "open" || payload["entity"] != "host:a" {
		t.Errorf("ack event payload %v (%v)", payload, err)
	}
	if _, err := Decide(ctx, db, r.ID, DecisionAck, nil, by); !errors.Is(err, ErrConflict) {
		t.Errorf("second ack: %v", err)
	}

	past := time.Now().Add(-time.Minute)
	var fe *FieldError
	if _, err := Decide(ctx, db, r.ID, DecisionMute, &past, by); !errors.As(err, &fe) || fe.Field != "until" {
		t.Errorf("mute into the past: %v", err)
	}
	if _, err := Decide(ctx, db, r.ID, DecisionMute, nil, by); !errors.As(err, &fe) || fe.Field != "until" {
		t.Errorf("mute without until: %v", err)
	}
	if _, err := Decide(ctx, db, r.ID, "snooze", nil, by); !errors.As(err, &fe) || fe.Field != "decision" {
		t.Errorf("unknown decision: %v", err)
	}
	if _, err := Decide(ctx, db, "0191d2a4-0000-7000-8000-000000000000", DecisionResolve, nil, by); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown signal: %v", err)
	}
	if _, err := Decide(ctx, db, "not-a-uuid", DecisionResolve, nil, by); !errors.Is(err, ErrNotFound) {
		t.Errorf("malformed id: %v", err)
	}

	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	muted, err := Decide(ctx, db, r.ID, DecisionMute, &until, by)
	if err != nil || muted.Status != "muted" || muted.MutedUntil == nil || !muted.MutedUntil.Equal(until) {
		t.Fatalf("mute: %+v %v", muted, err)
	}
	resolved, err := Decide(ctx, db, r.ID, DecisionResolve, nil, By{Name: "erin"})
	if err != nil || resolved.Status != "resolved" || resolved.ResolvedBy == nil || *resolved.ResolvedBy != "erin" || resolved.MutedUntil != nil {
		t.Fatalf("resolve: %+v %v", resolved, err)
	}
	if _, err := Decide(ctx, db, r.ID, DecisionResolve, nil, by); !errors.Is(err, ErrConflict) {
		t.Errorf("second resolve: %v", err)
	}
	if n := countAudit(t, db, ActionMute) + countAudit(t, db, ActionResolve); n != 2 {
		t.Errorf("%d mute and resolve audit rows, want 2", n)
	}
	if n := countEvents(t, db, EventMuted) + countEvents(t, db, EventResolved); n != 2 {
		t.Errorf("%d mute and resolve events, want 2", n)
	}
	// The cause comes back: a new signal, as after an automatic resolution.
	if again, err := st.Raise(ctx, db, Signal{Kind: "unmonitored", DedupKey: "unmonitored:" + entity, EntityID: entity}); err != nil ||
		!again.Created || again.ID == r.ID {
		t.Errorf("raise after a manual resolve: %+v %v", again, err)
	}
}

// A signal raised without an entity is attached to the one a later occurrence names.
func TestRepeatAttachesEntity(t *testing.T) {
	t.Parallel()
	db, entity := setup(t)
	ctx := context.Background()
	st := New(nil)
	sig := Signal{Kind: "host_key_changed", DedupKey: "host_key_changed:127.0.0.1:22"}
	if _, err := st.Raise(ctx, db, sig); err != nil {
		t.Fatal(err)
	}
	sig.EntityID = entity
	r, err := st.Raise(ctx, db, sig)
	if err != nil || r.Created {
		t.Fatalf("%+v %v", r, err)
	}
	var got *string
	if err := db.QueryRow(ctx, `SELECT entity_id::text FROM signals WHERE id = $1`, r.ID).Scan(&got); err != nil || got == nil || *got != entity {
		t.Errorf("entity %v (%v)", got, err)
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

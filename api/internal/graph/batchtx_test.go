package graph

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestBatchTxReleasesCleanly: PATCHes that stop after the first round trip (not found,
// version conflict, invalid, no-op) roll back their own transaction, so the pooled
// connection comes back idle and is reused, and nothing is written.
func TestBatchTxReleasesCleanly(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	e := mustCreate(t, s, "service", "api", map[string]any{"unit": "api.service"})
	before := snapshotDB(t, pool)
	stale := e.Version + 1
	created := pool.Stat().NewConnsCount()
	for range 10 {
		for _, tc := range []struct {
			attrs   map[string]any
			ref     string
			version *int64
			want    error
		}{
			{map[string]any{"unit": "x"}, "service:nope", nil, ErrNotFound},
			{map[string]any{"unit": "x"}, e.Slug, &stale, ErrVersionConflict},
			{map[string]any{"port": "many"}, e.Slug, nil, ErrInvalid},
			{map[string]any{"unit": "api.service"}, e.ID, nil, nil},
		} {
			got, err := s.UpdateAttributes(ctx, op, tc.ref, tc.attrs, tc.version)
			var ve *ValidationError
			switch {
			case tc.want == ErrInvalid && errors.As(err, &ve):
			case tc.want != nil && errors.Is(err, tc.want):
			case tc.want == nil && err == nil && got.Version == e.Version:
			default:
				t.Fatalf("PATCH %s %v: %v (version %d), want %v", tc.ref, tc.attrs, err, got.Version, tc.want)
			}
		}
	}
	sameDB(t, before, snapshotDB(t, pool))
	var open int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND state LIKE 'idle in transaction%'`).Scan(&open); err != nil || open != 0 {
		t.Errorf("%d connections left inside a transaction (%v)", open, err)
	}
	if n := pool.Stat().NewConnsCount() - created; n > 1 {
		t.Errorf("%d new connections for 40 sequential PATCHes: failed transactions' connections were discarded", n)
	}
}

// TestUpdateAttributesTxInCallersTransaction: inside a caller's transaction the update
// commits or rolls back with it, events included.
func TestUpdateAttributesTxInCallersTransaction(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	e := mustCreate(t, s, "service", "api", map[string]any{"unit": "api.service"})
	before := snapshotDB(t, pool)
	last := maxID(t, pool, "events")
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.UpdateAttributesTx(ctx, tx, op, e.Slug, map[string]any{"unit": "other.service"}, &e.Version)
	if err != nil || got.Version != e.Version+1 {
		t.Fatalf("update in tx: %v (version %d)", err, got.Version)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	sameDB(t, before, snapshotDB(t, pool))
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateAttributesTx(ctx, tx, op, e.Slug, map[string]any{"unit": "other.service"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	read, err := s.GetEntity(ctx, e.Slug)
	if err != nil || read.Attributes["unit"] != "other.service" {
		t.Fatalf("after commit: %v %v", read.Attributes, err)
	}
	var cfg json.RawMessage
	if err := pool.QueryRow(ctx, `SELECT config FROM check_defs WHERE slug = 'check:service.api.ssh-script.process'`).Scan(&cfg); err != nil ||
		!strings.Contains(string(cfg), "other.service") {
		t.Errorf("process check config %s (%v)", cfg, err)
	}
	if types := eventTypesSince(t, pool, last); len(types) != 2 || types[0] != "entity.updated|corr-tester|tester" || types[1] != "checks.changed|corr-tester|tester" {
		t.Errorf("events %v, want entity.updated and checks.changed", types)
	}
}

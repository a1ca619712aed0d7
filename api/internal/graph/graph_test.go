package graph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/seeds"
	"github.com/oikos-hq/oikos/shared/ontology"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

var ctx = context.Background()

func parseOntology(t testing.TB) *ontology.Ontology {
	t.Helper()
	o, err := ontology.Parse(seeds.Ontology())
	if err != nil {
		t.Fatalf("parse ontology: %v", err)
	}
	return o
}

// newService returns a service over a fresh database with the seeded ontology stored.
func newService(t testing.TB) (*Service, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.New(t)
	o := parseOntology(t)
	s, err := New(Options{Pool: db.Pool, Ontology: o, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncOntology(ctx, o); err != nil {
		t.Fatalf("sync ontology: %v", err)
	}
	return s, db.Pool
}

func meta(actor string) Meta {
	return Meta{Actor: actor, Role: "operator", Method: "POST", Path: "/api/v1/test", CorrelationID: "corr-" + actor}
}

var op = meta("tester")

func mustCreate(t testing.TB, s *Service, typ, name string, attrs map[string]any) Entity {
	t.Helper()
	e, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: typ, Name: name, Attributes: attrs})
	if err != nil {
		t.Fatalf("create %s:%s: %v", typ, name, err)
	}
	return e
}

func mustEdge(t testing.TB, s *Service, typ, src, dst string) Relationship {
	t.Helper()
	r, _, err := s.CreateRelationship(ctx, op, typ, src, dst, nil)
	if err != nil {
		t.Fatalf("edge %s -%s-> %s: %v", src, typ, dst, err)
	}
	return r
}

var tables = []string{"entity_types", "relationship_types", "entities", "relationships", "entity_status",
	"check_defs", "knowledge_entities", "events", "audit_log", "idempotency_keys"}

// snapshotDB counts every table and sums versions, so any write shows up.
func snapshotDB(t testing.TB, pool *pgxpool.Pool) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, tb := range tables {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+tb).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", tb, err)
		}
		out[tb] = n
	}
	queries := map[string]string{
		"versions":       `SELECT coalesce(sum(version), 0) FROM entities`,
		"ended edges":    `SELECT count(*) FROM relationships WHERE valid_to IS NOT NULL`,
		"enabled checks": `SELECT count(*) FROM check_defs WHERE enabled`,
	}
	for k, q := range queries {
		var n int64
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		out[k] = n
	}
	return out
}

func sameDB(t testing.TB, before, after map[string]int64) {
	t.Helper()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed: %d -> %d", k, v, after[k])
		}
	}
}

type auditRow struct {
	Actor, Action, Method, Path, Corr string
	Entity                            *string
	Before, After                     json.RawMessage
}

func lastAudit(t testing.TB, pool *pgxpool.Pool) auditRow {
	t.Helper()
	var a auditRow
	err := pool.QueryRow(ctx, `SELECT actor, action, method, path, correlation_id, entity_id::text, before, after
		FROM audit_log ORDER BY id DESC LIMIT 1`).Scan(&a.Actor, &a.Action, &a.Method, &a.Path, &a.Corr, &a.Entity, &a.Before, &a.After)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// eventTypesSince returns the types of events with id > after, in order.
func eventTypesSince(t testing.TB, pool *pgxpool.Pool, after int64) []string {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT type, correlation_id, actor FROM events WHERE id > $1 ORDER BY id`, after)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var typ, corr, actor string
		if err := rows.Scan(&typ, &corr, &actor); err != nil {
			t.Fatal(err)
		}
		out = append(out, typ+"|"+corr+"|"+actor)
	}
	return out
}

func maxID(t testing.TB, pool *pgxpool.Pool, table string) int64 {
	t.Helper()
	var n int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestEveryMutationAuditsAndEmitsOnce checks that each mutation writes exactly one audit
// row and one event of its own type (plus checks.changed exactly when it changed checks),
// carrying the actor, method, path and correlation id, in the same transaction.
func TestEveryMutationAuditsAndEmitsOnce(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	mustCreate(t, s, "proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1", "ssh_port": 2222})
	mustCreate(t, s, "site", "home", nil)
	var relID string

	cases := []struct {
		name, action, event string
		checks              bool // the mutation changes check definitions
		do                  func(m Meta) error
	}{
		{"create", "entity.create", "entity.created", true, func(m Meta) error {
			_, _, err := s.CreateEntity(ctx, m, CreateEntityInput{Type: "lxc", Name: "web", Attributes: map[string]any{"vmid": 101, "host": "atlas"}})
			return err
		}},
		{"create unmonitored", "entity.create", "entity.created", false, func(m Meta) error {
			_, _, err := s.CreateEntity(ctx, m, CreateEntityInput{Type: "site", Name: "cloud"})
			return err
		}},
		{"update", "entity.update", "entity.updated", false, func(m Meta) error {
			_, err := s.UpdateAttributes(ctx, m, "lxc:web", map[string]any{"cores": 2}, nil)
			return err
		}},
		{"update changing checks", "entity.update", "entity.updated", true, func(m Meta) error {
			_, err := s.UpdateAttributes(ctx, m, "lxc:web", map[string]any{"monitoring": "none"}, nil)
			return err
		}},
		{"state", "entity.state", "entity.state_changed", false, func(m Meta) error {
			_, err := s.SetState(ctx, m, "site:cloud", "deprecated", nil)
			return err
		}},
		{"relationship create", "relationship.create", "relationship.created", false, func(m Meta) error {
			r, _, err := s.CreateRelationship(ctx, m, "member-of", "lxc:web", "site:home", nil)
			relID = r.ID
			return err
		}},
		{"relationship end", "relationship.end", "relationship.ended", false, func(m Meta) error {
			_, err := s.EndRelationship(ctx, m, relID)
			return err
		}},
		{"knowledge create", "knowledge.upsert", "knowledge.upserted", false, func(m Meta) error {
			_, _, err := s.UpsertKnowledge(ctx, m, KnowledgeInput{Slug: "runbook:restart", Kind: "runbook", Title: "Restart", Body: "Do it."})
			return err
		}},
		{"knowledge retitle", "knowledge.upsert", "knowledge.upserted", false, func(m Meta) error {
			_, _, err := s.UpsertKnowledge(ctx, m, KnowledgeInput{Slug: "runbook:restart", Kind: "runbook", Title: "Restart safely", Body: "Do it."})
			return err
		}},
	}
	for _, c := range cases {
		m := Meta{Actor: "actor-" + c.name, Method: "PATCH", Path: "/api/v1/x/" + c.name, CorrelationID: "corr-" + c.name}
		auditBefore, eventBefore := snapshotDB(t, pool)["audit_log"], maxID(t, pool, "events")
		if err := c.do(m); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n := snapshotDB(t, pool)["audit_log"] - auditBefore; n != 1 {
			t.Errorf("%s: %d audit rows, want 1", c.name, n)
		}
		a := lastAudit(t, pool)
		if a.Action != c.action || a.Actor != m.Actor || a.Method != m.Method || a.Path != m.Path || a.Corr != m.CorrelationID || a.Entity == nil {
			t.Errorf("%s: audit row %+v does not carry the request", c.name, a)
		}
		if creates := strings.HasSuffix(c.action, "create") || c.name == "knowledge create"; creates != (len(a.Before) == 0) {
			t.Errorf("%s: audit before = %s; want one exactly when something existed before", c.name, a.Before)
		}
		if len(a.After) == 0 {
			t.Errorf("%s: audit row has no after", c.name)
		}
		want := []string{c.event + "|" + m.CorrelationID + "|" + m.Actor}
		if c.checks {
			want = append(want, "checks.changed|"+m.CorrelationID+"|"+m.Actor)
		}
		if got := eventTypesSince(t, pool, eventBefore); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: events %v, want %v", c.name, got, want)
		}
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	mustCreate(t, s, "proxmox-host", "atlas", map[string]any{"node": "atlas"})
	lxc := mustCreate(t, s, "lxc", "web", map[string]any{"vmid": 101, "host": "atlas"})
	mustCreate(t, s, "service", "nginx", map[string]any{"unit": "nginx.service"})
	mustEdge(t, s, "runs-on", "service:nginx", "lxc:web")
	mustCreate(t, s, "certificate", "web", nil)
	if _, err := s.SetState(ctx, op, "certificate:web", "planned", nil); err == nil {
		t.Fatal("active -> planned should be illegal for a certificate")
	}
	if _, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "certificate", Name: "planned", State: "planned"}); err != nil {
		t.Fatal(err)
	}
	keyed := op
	keyed.IdempotencyKey = "key-1"
	if _, _, err := s.CreateEntity(ctx, keyed, CreateEntityInput{Type: "site", Name: "home"}); err != nil {
		t.Fatal(err)
	}
	stale := lxc.Version - 1 + 100
	cases := []struct {
		name  string
		want  error
		field string
		do    func() error
	}{
		{"unknown type", ontology.ErrUnknownType, "type", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "spaceship", Name: "x"})
			return err
		}},
		{"abstract type", ontology.ErrAbstractType, "type", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "guest", Name: "x", Attributes: map[string]any{"vmid": 1}})
			return err
		}},
		{"undeclared state", ontology.ErrUndeclaredState, "state", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "site", Name: "x", State: "flying"})
			return err
		}},
		{"wrong attribute type", ontology.ErrInvalidAttribute, "attributes.vmid", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "lxc", Name: "x", Attributes: map[string]any{"vmid": "one"}})
			return err
		}},
		{"missing required attribute", ontology.ErrInvalidAttribute, "attributes.vmid", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "lxc", Name: "x"})
			return err
		}},
		{"patch wrong type", ontology.ErrInvalidAttribute, "attributes.cores", func() error {
			_, err := s.UpdateAttributes(ctx, op, "lxc:web", map[string]any{"cores": "many"}, nil)
			return err
		}},
		{"patch removes required", ontology.ErrInvalidAttribute, "attributes.vmid", func() error {
			_, err := s.UpdateAttributes(ctx, op, "lxc:web", map[string]any{"vmid": nil}, nil)
			return err
		}},
		{"bad name", ErrInvalid, "name", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "site", Name: "a b/c"})
			return err
		}},
		{"check created by hand", ErrInvalid, "type", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "check", Name: "x"})
			return err
		}},
		{"illegal transition", ontology.ErrIllegalTransition, "state", func() error {
			_, err := s.SetState(ctx, op, "certificate:web", "planned", nil)
			return err
		}},
		{"transition to undeclared state", ontology.ErrUndeclaredState, "state", func() error {
			_, err := s.SetState(ctx, op, "lxc:web", "flying", nil)
			return err
		}},
		{"precondition no_live_dependents", ErrPreconditionFailed, "state", func() error {
			_, err := s.SetState(ctx, op, "lxc:web", "destroyed", nil)
			return err
		}},
		{"precondition has_attribute", ErrPreconditionFailed, "state", func() error {
			_, err := s.SetState(ctx, op, "certificate:planned", "active", nil)
			return err
		}},
		{"forbidden edge", ontology.ErrEdgeNotAllowed, "type", func() error {
			_, _, err := s.CreateRelationship(ctx, op, "hosts", "service:nginx", "lxc:web", nil)
			return err
		}},
		{"unknown relationship type", ontology.ErrUnknownRelationshipType, "type", func() error {
			_, _, err := s.CreateRelationship(ctx, op, "loves", "service:nginx", "lxc:web", nil)
			return err
		}},
		{"self edge", ErrInvalid, "target", func() error {
			_, _, err := s.CreateRelationship(ctx, op, "depends-on", "lxc:web", "lxc:web", nil)
			return err
		}},
		{"version conflict patch", ErrVersionConflict, "", func() error {
			_, err := s.UpdateAttributes(ctx, op, "lxc:web", map[string]any{"cores": 4}, &stale)
			return err
		}},
		{"version conflict state", ErrVersionConflict, "", func() error {
			_, err := s.SetState(ctx, op, "lxc:web", "maintenance", &stale)
			return err
		}},
		{"duplicate slug", ErrDuplicate, "name", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "lxc", Name: "web", Attributes: map[string]any{"vmid": 7}})
			return err
		}},
		{"idempotency mismatch", ErrIdempotencyMismatch, "Idempotency-Key", func() error {
			_, _, err := s.CreateEntity(ctx, keyed, CreateEntityInput{Type: "site", Name: "elsewhere"})
			return err
		}},
		{"unknown slug patch", ErrNotFound, "", func() error {
			_, err := s.UpdateAttributes(ctx, op, "lxc:nope", map[string]any{"cores": 1}, nil)
			return err
		}},
		{"unknown slug state", ErrNotFound, "", func() error {
			_, err := s.SetState(ctx, op, "lxc:nope", "maintenance", nil)
			return err
		}},
		{"unknown edge source", ErrNotFound, "source", func() error {
			_, _, err := s.CreateRelationship(ctx, op, "runs-on", "service:nope", "lxc:web", nil)
			return err
		}},
		{"unknown relationship id", ErrNotFound, "", func() error {
			_, err := s.EndRelationship(ctx, op, "0190f5d2-0000-7000-8000-000000000000")
			return err
		}},
		{"unknown about", ErrNotFound, "about", func() error {
			_, _, err := s.UpsertKnowledge(ctx, op, KnowledgeInput{Slug: "document:x", Kind: "document", Title: "X", About: "lxc:nope"})
			return err
		}},
		{"knowledge kind mismatch", ErrInvalid, "slug", func() error {
			_, _, err := s.UpsertKnowledge(ctx, op, KnowledgeInput{Slug: "document:x", Kind: "runbook", Title: "X"})
			return err
		}},
		{"scheduler-owned on patch", ErrSchedulerOwned, "attributes.health", func() error {
			_, err := s.UpdateAttributes(ctx, op, "lxc:web", map[string]any{"health": "up"}, nil)
			return err
		}},
		{"scheduler-owned on create", ErrSchedulerOwned, "attributes.last_check_at", func() error {
			_, _, err := s.CreateEntity(ctx, op, CreateEntityInput{Type: "site", Name: "x", Attributes: map[string]any{"last_check_at": "now"}})
			return err
		}},
		{"missing actor", nil, "", func() error {
			_, err := s.UpdateAttributes(ctx, Meta{}, "lxc:web", map[string]any{"cores": 1}, nil)
			return err
		}},
	}
	for _, c := range cases {
		before := snapshotDB(t, pool)
		err := c.do()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: error %v does not match %v", c.name, err, c.want)
		}
		if c.field != "" {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != c.field {
				t.Errorf("%s: error %v does not name field %q", c.name, err, c.field)
			}
		}
		sameDB(t, before, snapshotDB(t, pool))
	}
	// The scheduler-owned refusal says where health comes from.
	_, err := s.UpdateAttributes(ctx, op, "lxc:web", map[string]any{"last_check": "x"}, nil)
	if err == nil || !strings.Contains(err.Error(), "/health/summary") {
		t.Errorf("scheduler-owned error %v does not say where health comes from", err)
	}
}

func TestConcurrentPatchSameVersionOneWins(t *testing.T) {
	t.Parallel()
	s, _ := newService(t)
	e := mustCreate(t, s, "site", "home", nil)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := e.Version
			_, errs[i] = s.UpdateAttributes(ctx, op, e.Slug, map[string]any{"writer": i}, &v)
		}()
	}
	wg.Wait()
	wins, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, ErrVersionConflict):
			conflicts++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if wins != 1 || conflicts != n-1 {
		t.Fatalf("%d wins and %d conflicts, want 1 and %d", wins, conflicts, n-1)
	}
	got, err := s.GetEntity(ctx, e.Slug)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != e.Version+1 {
		t.Errorf("version %d, want %d", got.Version, e.Version+1)
	}
	// Without an expected version the merges serialise and all land.
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.UpdateAttributes(ctx, op, e.Slug, map[string]any{fmt.Sprintf("k%d", i): i}, nil); err != nil {
				t.Errorf("patch %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	got, _ = s.GetEntity(ctx, e.Slug)
	for i := range n {
		if _, ok := got.Attributes[fmt.Sprintf("k%d", i)]; !ok {
			t.Errorf("k%d lost: %v", i, got.Attributes)
		}
	}
}

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	m := op
	m.IdempotencyKey = "abc"
	in := CreateEntityInput{Type: "site", Name: "home", Attributes: map[string]any{"location": "basement"}}
	e, replay, err := s.CreateEntity(ctx, m, in)
	if err != nil || replay != nil {
		t.Fatalf("first create: %v %v", replay, err)
	}
	before := snapshotDB(t, pool)
	_, replay, err = s.CreateEntity(ctx, m, in)
	if err != nil || replay == nil {
		t.Fatalf("replay: %v %v", replay, err)
	}
	if replay.Status != 201 {
		t.Errorf("replay status %d", replay.Status)
	}
	var got Entity
	if err := json.Unmarshal(replay.Body, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != e.ID || got.Slug != e.Slug || got.Version != e.Version {
		t.Errorf("replayed %+v, created %+v", got, e)
	}
	sameDB(t, before, snapshotDB(t, pool))

	// The same key with another body is refused; another actor's key is another scope.
	other := in
	other.Attributes = map[string]any{"location": "attic"}
	if _, _, err := s.CreateEntity(ctx, m, other); !errors.Is(err, ErrIdempotencyMismatch) {
		t.Fatalf("mismatch: %v", err)
	}
	m2 := m
	m2.Actor = "someone-else"
	if _, _, err := s.CreateEntity(ctx, m2, CreateEntityInput{Type: "site", Name: "cloud"}); err != nil {
		t.Fatalf("other scope: %v", err)
	}

	// Concurrent first uses of one key: one creates, the others replay it.
	m3 := op
	m3.IdempotencyKey = "race"
	var wg sync.WaitGroup
	ids := make([]string, 6)
	replays := make([]bool, 6)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, r, err := s.CreateEntity(ctx, m3, CreateEntityInput{Type: "site", Name: "raced"})
			if err != nil {
				t.Errorf("racer %d: %v", i, err)
				return
			}
			if r != nil {
				replays[i] = true
				var x Entity
				_ = json.Unmarshal(r.Body, &x)
				ids[i] = x.ID
			} else {
				ids[i] = e.ID
			}
		}()
	}
	wg.Wait()
	created := 0
	for i := range ids {
		if !replays[i] {
			created++
		}
		if ids[i] != ids[0] {
			t.Errorf("racer %d saw id %s, racer 0 %s", i, ids[i], ids[0])
		}
	}
	if created != 1 {
		t.Errorf("%d racers created, want 1", created)
	}
}

func TestRelationshipIdempotentAndEnd(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	mustCreate(t, s, "lxc", "web", map[string]any{"vmid": 1})
	mustCreate(t, s, "site", "home", nil)
	r1, created, err := s.CreateRelationship(ctx, op, "member-of", "lxc:web", "site:home", nil)
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	before := snapshotDB(t, pool)
	r2, created, err := s.CreateRelationship(ctx, op, "member-of", "lxc:web", r1.TargetID, nil)
	if err != nil || created || r2.ID != r1.ID {
		t.Fatalf("repeat: created=%v id=%s (first %s) err=%v", created, r2.ID, r1.ID, err)
	}
	sameDB(t, before, snapshotDB(t, pool))

	ended, err := s.EndRelationship(ctx, op, r1.ID)
	if err != nil || ended.ValidTo == nil {
		t.Fatalf("end: %+v %v", ended, err)
	}
	before = snapshotDB(t, pool)
	again, err := s.EndRelationship(ctx, op, r1.ID)
	if err != nil || again.ValidTo == nil || !again.ValidTo.Equal(*ended.ValidTo) {
		t.Fatalf("end again: %+v %v", again, err)
	}
	sameDB(t, before, snapshotDB(t, pool))

	r3, created, err := s.CreateRelationship(ctx, op, "member-of", "lxc:web", "site:home", nil)
	if err != nil || !created || r3.ID == r1.ID {
		t.Fatalf("re-create after end: created=%v err=%v", created, err)
	}
	var current, total int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE valid_to IS NULL), count(*) FROM relationships`).Scan(&current, &total); err != nil {
		t.Fatal(err)
	}
	if current != 1 || total != 2 {
		t.Errorf("%d current of %d edges, want 1 of 2", current, total)
	}

	// Concurrent creates of one edge: exactly one is created.
	mustCreate(t, s, "service", "app", nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, c, err := s.CreateRelationship(ctx, op, "runs-on", "service:app", "lxc:web", nil)
			if err != nil {
				t.Errorf("concurrent create: %v", err)
			}
			if c {
				mu.Lock()
				n++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n != 1 {
		t.Errorf("%d concurrent creates reported created, want 1", n)
	}
}

func TestKnowledgeUpsert(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	mustCreate(t, s, "site", "home", nil)
	k1, created, err := s.UpsertKnowledge(ctx, op, KnowledgeInput{Slug: "runbook:nfs-hang", Kind: "runbook",
		Title: "NFS hang", Body: "killall first", Tags: []string{"nfs"}, About: "site:home"})
	if err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	if len(k1.About) != 1 || k1.About[0] != "site:home" || k1.State != "published" {
		t.Errorf("created %+v", k1)
	}
	k2, created, err := s.UpsertKnowledge(ctx, op, KnowledgeInput{Slug: "runbook:nfs-hang", Kind: "runbook",
		Title: "NFS export mutation hang", Body: "killall first", Tags: []string{"nfs"}, About: "site:home"})
	if err != nil || created {
		t.Fatalf("retitle: %v %v", created, err)
	}
	if k2.ID != k1.ID || k2.Title != "NFS export mutation hang" || k2.Version != k1.Version+1 {
		t.Errorf("retitle did not update in place: %+v vs %+v", k2, k1)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM entities WHERE type = 'runbook'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d runbooks (%v), want 1", n, err)
	}
	before := snapshotDB(t, pool)
	if _, created, err := s.UpsertKnowledge(ctx, op, KnowledgeInput{Slug: "runbook:nfs-hang", Kind: "runbook",
		Title: "NFS export mutation hang", Body: "killall first", Tags: []string{"nfs"}, About: "site:home"}); err != nil || created {
		t.Fatalf("unchanged upsert: %v %v", created, err)
	}
	sameDB(t, before, snapshotDB(t, pool))
	var search int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM knowledge_entities WHERE search @@ plainto_tsquery('english', 'mutation')`).Scan(&search); err != nil || search != 1 {
		t.Errorf("search finds %d (%v), want 1", search, err)
	}
}

// checkRows returns the check slugs targeting the entity, sorted, with their enabled flag.
func checkRows(t testing.TB, pool *pgxpool.Pool, slug string) map[string]bool {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT d.slug, d.enabled FROM check_defs d JOIN entities t ON t.id = d.target_id WHERE t.slug = $1`, slug)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var s string
		var en bool
		if err := rows.Scan(&s, &en); err != nil {
			t.Fatal(err)
		}
		out[s] = en
	}
	return out
}

func enabled(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func TestChecksFollowMutations(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	mustCreate(t, s, "proxmox-host", "atlas", map[string]any{"node": "atlas", "lan_ipv4": "127.0.10.1"})

	// A guest without host attribute or hosts edge gets no guest checks; the edge brings them.
	mustCreate(t, s, "lxc", "orphan", map[string]any{"vmid": 100})
	if got := enabled(checkRows(t, pool, "lxc:orphan")); len(got) != 0 {
		t.Errorf("guest without host has checks %v", got)
	}
	mustEdge(t, s, "hosts", "proxmox-host:atlas", "lxc:orphan")
	if got := enabled(checkRows(t, pool, "lxc:orphan")); len(got) != 4 {
		t.Errorf("guest with a hosts edge has checks %v, want 4", got)
	}
	// The host attribute works as a bare name and as a full slug.
	for name, host := range map[string]string{"bare": "atlas", "slug": "proxmox-host:atlas"} {
		mustCreate(t, s, "lxc", name, map[string]any{"vmid": 200, "host": host})
		var cfg map[string]any
		if err := pool.QueryRow(ctx, `SELECT config FROM check_defs WHERE slug = $1`, "check:lxc."+name+".proxmox-guest").Scan(&cfg); err != nil {
			t.Fatalf("%s: proxmox-guest check: %v", name, err)
		}
		if cfg["host"] != "proxmox-host:atlas" {
			t.Errorf("%s: proxmox-guest config %v", name, cfg)
		}
	}

	// A vm without guest agent gets only proxmox-guest; enabling the agent adds the probes,
	// disabling it disables them again (never deleting, never duplicating).
	vm := mustCreate(t, s, "vm", "ha", map[string]any{"vmid": 300, "host": "atlas"})
	if got := enabled(checkRows(t, pool, vm.Slug)); len(got) != 1 {
		t.Errorf("vm without agent: %v", got)
	}
	if _, err := s.UpdateAttributes(ctx, op, vm.Slug, map[string]any{"qemu_guest_agent": true}, nil); err != nil {
		t.Fatal(err)
	}
	if got := enabled(checkRows(t, pool, vm.Slug)); len(got) != 4 {
		t.Errorf("vm with agent: %v", got)
	}
	if _, err := s.UpdateAttributes(ctx, op, vm.Slug, map[string]any{"qemu_guest_agent": false}, nil); err != nil {
		t.Fatal(err)
	}
	all := checkRows(t, pool, vm.Slug)
	if got := enabled(all); len(got) != 1 || len(all) != 4 {
		t.Errorf("vm after disabling agent: enabled %v of %v", got, all)
	}
	var state string
	if err := pool.QueryRow(ctx, `SELECT state FROM entities WHERE slug = 'check:vm.ha.ssh-script.cpu'`).Scan(&state); err != nil || state != "disabled" {
		t.Errorf("disabled check entity state %q (%v)", state, err)
	}
	if _, err := s.UpdateAttributes(ctx, op, vm.Slug, map[string]any{"qemu_guest_agent": true}, nil); err != nil {
		t.Fatal(err)
	}
	if all := checkRows(t, pool, vm.Slug); len(enabled(all)) != 4 || len(all) != 4 {
		t.Errorf("vm after re-enabling agent: %v", all)
	}

	// Destroying an entity disables its checks.
	if _, err := s.SetState(ctx, op, "lxc:bare", "destroyed", nil); err != nil {
		t.Fatal(err)
	}
	if got := enabled(checkRows(t, pool, "lxc:bare")); len(got) != 0 {
		t.Errorf("destroyed guest still has enabled checks %v", got)
	}

	// Every check row targets the monitored entity; no check entity has a status row, and
	// every check entity has exactly one definition.
	var bad int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM check_defs d JOIN entities c ON c.id = d.entity_id JOIN entities t ON t.id = d.target_id
			WHERE c.type <> 'check' OR t.type = 'check' OR c.slug <> d.slug) +
		(SELECT count(*) FROM entity_status st JOIN entities e ON e.id = st.entity_id WHERE e.type = 'check') +
		(SELECT count(*) FROM entities c WHERE c.type = 'check' AND NOT EXISTS (SELECT 1 FROM check_defs d WHERE d.entity_id = c.id))`).Scan(&bad); err != nil {
		t.Fatal(err)
	}
	if bad != 0 {
		t.Errorf("%d check rows violate target / status / orphan invariants", bad)
	}
	var status int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM entity_status st JOIN entities e ON e.id = st.entity_id WHERE e.slug = 'vm:ha'`).Scan(&status); err != nil || status != 1 {
		t.Errorf("monitored vm has %d status rows (%v)", status, err)
	}
	got, err := s.GetEntity(ctx, vm.Slug)
	if err != nil || got.Health != "unknown" {
		t.Errorf("new monitored entity health %q (%v), want unknown", got.Health, err)
	}
}

func TestChecksNotifyOnlyWhenChanged(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	mustCreate(t, s, "proxmox-host", "atlas", map[string]any{"node": "atlas"})
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `LISTEN oikos_checks`); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.Conn().WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		return n.Payload
	}
	// A change of checks notifies at commit.
	mustCreate(t, s, "lxc", "web", map[string]any{"vmid": 1, "host": "atlas"})
	if p := next(); !strings.Contains(p, `"changed":4`) {
		t.Errorf("payload %s", p)
	}
	// A mutation that leaves checks alone does not: the next notification is our marker.
	if _, err := s.UpdateAttributes(ctx, op, "lxc:web", map[string]any{"cores": 2}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT pg_notify('oikos_checks', 'marker')`); err != nil {
		t.Fatal(err)
	}
	if p := next(); p != "marker" {
		t.Errorf("a mutation without check changes notified %q", p)
	}
}

func TestSyncOntologyStoresSchemaAndIsIdempotent(t *testing.T) {
	t.Parallel()
	s, pool := newService(t)
	var schema map[string]any
	var monitoring []any
	if err := pool.QueryRow(ctx, `SELECT attribute_schema, monitoring FROM entity_types WHERE name = 'lxc'`).Scan(&schema, &monitoring); err != nil {
		t.Fatal(err)
	}
	if _, ok := schema["vmid"]; !ok {
		t.Errorf("lxc attribute_schema lacks inherited vmid: %v", schema)
	}
	if len(monitoring) == 0 {
		t.Error("lxc monitoring not stored")
	}
	var nulls int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM entity_types WHERE attribute_schema IS NULL OR attribute_schema = 'null'::jsonb`).Scan(&nulls); err != nil || nulls != 0 {
		t.Errorf("%d types with a null schema (%v)", nulls, err)
	}
	var stamp time.Time
	if err := pool.QueryRow(ctx, `SELECT max(updated_at) FROM entity_types`).Scan(&stamp); err != nil {
		t.Fatal(err)
	}
	changed, err := s.SyncOntology(ctx, parseOntology(t))
	if err != nil || changed {
		t.Fatalf("second sync changed=%v err=%v", changed, err)
	}
	var again time.Time
	if err := pool.QueryRow(ctx, `SELECT max(updated_at) FROM entity_types`).Scan(&again); err != nil || !again.Equal(stamp) {
		t.Errorf("second sync rewrote rows: %v -> %v (%v)", stamp, again, err)
	}
}

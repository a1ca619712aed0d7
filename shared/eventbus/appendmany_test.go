package eventbus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// TestAppendManyOrderAndIDs: AppendMany stores every event as given, in order, with the ids
// it returns, between events appended one at a time before and after it in the same
// transaction; an event without a type writes nothing.
func TestAppendManyOrderAndIDs(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	entity := "0192f3a4-0000-7000-8000-000000000002"
	if _, err := db.Pool.Exec(ctx, `INSERT INTO entity_types (name) VALUES ('thing');
		INSERT INTO entities (id, slug, type, name, state) VALUES ('`+entity+`', 'thing:a', 'thing', 'a', 'active')`); err != nil {
		t.Fatal(err)
	}
	var in []eventbus.Event
	for i := range 50 {
		e := eventbus.Event{Type: fmt.Sprintf("test.many.%d", i%3), CorrelationID: fmt.Sprintf("c%d", i), Actor: "seed",
			Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i))}
		if i%2 == 0 {
			e.EntityID = entity
		}
		in = append(in, e)
	}
	in[7].Payload = nil // stored as {}
	var first, last int64
	var ids []int64
	err := pg.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
		var err error
		if first, err = eventbus.Append(ctx, tx, eventbus.Event{Type: "test.before"}, nil); err != nil {
			return err
		}
		if ids, err = eventbus.AppendMany(ctx, tx, in); err != nil {
			return err
		}
		last, err = eventbus.Append(ctx, tx, eventbus.Event{Type: "test.after"}, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(in) {
		t.Fatalf("%d ids for %d events", len(ids), len(in))
	}
	if ids[0] <= first || last <= ids[len(ids)-1] {
		t.Errorf("ids %d..%d not between the appends around them (%d, %d)", ids[0], ids[len(ids)-1], first, last)
	}
	got, err := eventbus.ReadAfter(ctx, db.Pool, first, 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(in)+1 {
		t.Fatalf("read %d events after the first, want %d", len(got), len(in)+1)
	}
	for i, e := range in {
		g := got[i]
		if g.ID != ids[i] || g.Type != e.Type || g.EntityID != e.EntityID || g.CorrelationID != e.CorrelationID || g.Actor != "seed" {
			t.Errorf("event %d: stored %+v, appended %+v with id %d", i, g, e, ids[i])
		}
		if i > 0 && ids[i] <= ids[i-1] {
			t.Errorf("ids not ascending: %v", ids)
		}
		var p map[string]int
		if err := json.Unmarshal(g.Payload, &p); err != nil {
			t.Fatalf("event %d payload %s: %v", i, g.Payload, err)
		}
		if (i == 7 && len(p) != 0) || (i != 7 && p["n"] != i) {
			t.Errorf("event %d payload %s", i, g.Payload)
		}
	}
	if got[len(in)].ID != last {
		t.Errorf("last event %+v, want id %d", got[len(in)], last)
	}

	before, err := eventbus.LastID(ctx, db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err := eventbus.AppendMany(ctx, db.Pool, []eventbus.Event{{Type: "test.ok"}, {}}); err == nil {
		t.Errorf("an event without a type was appended (ids %v)", ids)
	}
	if ids, err := eventbus.AppendMany(ctx, db.Pool, []eventbus.Event{{Type: "test.bad", EntityID: "not-a-uuid"}}); err == nil {
		t.Errorf("an event with a malformed entity id was appended (ids %v)", ids)
	}
	if ids, err := eventbus.AppendMany(ctx, db.Pool, nil); err != nil || ids != nil {
		t.Errorf("no events: %v %v", ids, err)
	}
	if after, _ := eventbus.LastID(ctx, db.Pool); after != before {
		t.Errorf("refused appends wrote events: last id %d, was %d", after, before)
	}
}

// TestAppendManyKeepsCommitOrder: bulk appends racing single appends, with a reader following
// `WHERE id > cursor` as the bus does: the reader sees every event once, so no id committed
// below one it had already read (ADR 0002).
func TestAppendManyKeepsCommitOrder(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, rounds, perBulk = 4, 40, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				err := pg.InTx(ctx, db.Pool, func(tx pgx.Tx) error {
					if w%2 == 1 {
						_, err := eventbus.Append(ctx, tx, eventbus.Event{Type: "test.order"}, nil)
						return err
					}
					batch := make([]eventbus.Event, perBulk)
					for i := range batch {
						batch[i] = eventbus.Event{Type: "test.order"}
					}
					_, err := eventbus.AppendMany(ctx, tx, batch)
					return err
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[int64]bool{}
	var cursor int64
	read := func() {
		events, err := eventbus.ReadAfter(ctx, db.Pool, cursor, 1000, []string{"test.order"})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			if seen[e.ID] {
				t.Fatalf("event %d read twice", e.ID)
			}
			seen[e.ID] = true
			cursor = e.ID
		}
	}
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case err := <-errs:
			t.Fatal(err)
		default:
		}
		read()
	}
	read()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	want := writers / 2 * rounds * (perBulk + 1)
	if len(seen) != want {
		t.Fatalf("the cursor reader saw %d events, %d were committed: an id committed below the cursor", len(seen), want)
	}
}

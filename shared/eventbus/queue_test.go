package eventbus_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

// queueCommit appends events with Queue in one batch that also begins and commits the
// transaction, the way a pipelined mutation does.
func queueCommit(ctx context.Context, pool *pgxpool.Pool, events []eventbus.Event, ids []int64) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	for i, e := range events {
		var id *int64
		if ids != nil {
			id = &ids[i]
		}
		if err := eventbus.Queue(b, e, map[string]int{"n": i}, id); err != nil {
			return err
		}
	}
	eventbus.QueueNotify(b, "queue_test", "done")
	b.Queue("commit")
	return conn.SendBatch(ctx, b).Close()
}

// TestQueueKeepsCommitOrder: with appends and COMMIT pipelined in one batch per transaction,
// four writers racing and a reader following `WHERE id > cursor` as the bus does, the reader
// sees every event: no id ever commits below one it has already read (ADR 0002).
func TestQueueKeepsCommitOrder(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const writers, perWriter = 4, 150
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range perWriter {
				if err := queueCommit(ctx, db.Pool, []eventbus.Event{{Type: "test.queue"}, {Type: "test.queue"}}, nil); err != nil {
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
		events, err := eventbus.ReadAfter(ctx, db.Pool, cursor, 1000, []string{"test.queue"})
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
	var total int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE type = 'test.queue'`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != writers*perWriter*2 || len(seen) != total {
		t.Fatalf("%d events committed, the cursor reader saw %d: an id committed below the cursor", total, len(seen))
	}
}

// TestQueueWritesTheEvent: Queue stores what Append stores and reports the id.
func TestQueueWritesTheEvent(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	entity := "0192f3a4-0000-7000-8000-000000000001"
	if _, err := db.Pool.Exec(ctx, `INSERT INTO entity_types (name) VALUES ('thing');
		INSERT INTO entities (id, slug, type, name, state) VALUES ('`+entity+`', 'thing:a', 'thing', 'a', 'active')`); err != nil {
		t.Fatal(err)
	}
	ids := make([]int64, 2)
	in := []eventbus.Event{
		{Type: "test.one", EntityID: entity, CorrelationID: "corr-1", Actor: "tester"},
		{Type: "test.two"},
	}
	if err := queueCommit(ctx, db.Pool, in, ids); err != nil {
		t.Fatal(err)
	}
	if ids[0] == 0 || ids[1] != ids[0]+1 {
		t.Fatalf("ids %v", ids)
	}
	got, err := eventbus.ReadAfter(ctx, db.Pool, 0, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d events", len(got))
	}
	var p map[string]int
	if err := json.Unmarshal(got[1].Payload, &p); err != nil || p["n"] != 1 {
		t.Errorf("payload %s (%v)", got[1].Payload, err)
	}
	e := got[0]
	if e.ID != ids[0] || e.Type != "test.one" || e.EntityID != entity || e.CorrelationID != "corr-1" || e.Actor != "tester" {
		t.Errorf("stored %+v", e)
	}
	if got[1].EntityID != "" {
		t.Errorf("an event without entity stored entity %q", got[1].EntityID)
	}
	b := &pgx.Batch{}
	if err := eventbus.Queue(b, eventbus.Event{}, nil, nil); err == nil || b.Len() != 0 {
		t.Errorf("an event without a type was queued (err %v, %d queued)", err, b.Len())
	}
}

package eventbus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/safego"
)

// Event is one row of the outbox.
type Event struct {
	ID            int64           `json:"id"`
	At            time.Time       `json:"at"`
	Type          string          `json:"type"`
	EntityID      string          `json:"entity_id,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	Actor         string          `json:"actor,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

// appendLockKey serialises outbox appends from the INSERT to the commit. With it, ids become
// visible in commit order, so a reader that has seen id N can never later find a committed id
// below N: `WHERE id > last_seen` is then a gap-free cursor. Appends happen at the end of a
// transaction, so the lock is held only for the commit.
const appendLockKey = 0x6f696b6f73 // "oikos"

// Append writes an event in the caller's transaction; the AFTER INSERT trigger NOTIFYs
// oikos_events when that transaction commits. payload is marshalled here; nil becomes {}.
func Append(ctx context.Context, tx pg.Querier, e Event, payload any) (int64, error) {
	raw, entity, err := encode(e, payload)
	if err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, lockSQL, int64(appendLockKey)); err != nil {
		return 0, fmt.Errorf("eventbus: lock outbox: %w", err)
	}
	var id int64
	err = tx.QueryRow(ctx, insertSQL, e.Type, entity, e.CorrelationID, e.Actor, raw).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("eventbus: append %s: %w", e.Type, err)
	}
	return id, nil
}

// Queue is Append for a caller that pipelines its last statements: it queues the outbox lock
// and the INSERT, in that order, into b. Queue COMMIT after it in the same batch and the lock
// is held only while the server runs the rest of the batch, never across a round trip to the
// client, so concurrent writers serialise on server time alone. As with Append, only other
// appends (and NOTIFYs) may follow it before COMMIT. When id is not nil it receives the
// event's id as the batch's results are read.
func Queue(b *pgx.Batch, e Event, payload any, id *int64) error {
	raw, entity, err := encode(e, payload)
	if err != nil {
		return err
	}
	b.Queue(lockSQL, int64(appendLockKey))
	b.Queue(insertSQL, e.Type, entity, e.CorrelationID, e.Actor, raw).QueryRow(func(row pgx.Row) error {
		var got int64
		if err := row.Scan(&got); err != nil {
			return fmt.Errorf("eventbus: append %s: %w", e.Type, err)
		}
		if id != nil {
			*id = got
		}
		return nil
	})
	return nil
}

// AppendMany is Append for many events (the seed ingest writes tens of thousands): in the
// caller's transaction it takes the outbox lock and reserves the events' ids in one round
// trip, then writes the rows with COPY, so ids still become visible in commit order (ADR
// 0002). It returns the ids, ascending in the order of events. Each event's Payload is
// stored as given (an empty one as {}); as with Append, only other appends (and NOTIFYs)
// should follow it before COMMIT.
func AppendMany(ctx context.Context, q pg.Querier, events []Event) ([]int64, error) {
	if len(events) == 0 {
		return nil, nil
	}
	rows := make([][]any, len(events))
	for i, e := range events {
		if e.Type == "" {
			return nil, errors.New("eventbus: event type is required")
		}
		raw := []byte(e.Payload)
		if len(raw) == 0 {
			raw = []byte(`{}`)
		}
		// COPY is binary: the entity id goes as a uuid value.
		var eid any
		if e.EntityID != "" {
			u, err := uuid.Parse(e.EntityID)
			if err != nil {
				return nil, fmt.Errorf("eventbus: append %s: entity id %q: %w", e.Type, e.EntityID, err)
			}
			eid = pgtype.UUID{Bytes: u, Valid: true}
		}
		// rows[i][0], the id, is filled in below.
		rows[i] = []any{nil, e.Type, eid, e.CorrelationID, e.Actor, raw}
	}
	ids := make([]int64, 0, len(events))
	b := &pgx.Batch{}
	b.Queue(lockSQL, int64(appendLockKey))
	b.Queue(reserveSQL, len(events)).Query(func(r pgx.Rows) error {
		var id int64
		_, err := pgx.ForEachRow(r, []any{&id}, func() error {
			ids = append(ids, id)
			return nil
		})
		return err
	})
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("eventbus: append %d events: %w", len(events), err)
	}
	if len(ids) != len(events) {
		return nil, fmt.Errorf("eventbus: append %d events: reserved %d ids", len(events), len(ids))
	}
	slices.Sort(ids)
	for i := range rows {
		rows[i][0] = ids[i]
	}
	if _, err := q.CopyFrom(ctx, pgx.Identifier{"events"}, []string{"id", "type", "entity_id", "correlation_id", "actor", "payload"},
		pgx.CopyFromRows(rows)); err != nil {
		return nil, fmt.Errorf("eventbus: append %d events: %w", len(events), err)
	}
	return ids, nil
}

// QueueNotify is Notify for a batch: the NOTIFY is delivered only if the transaction the
// batch runs in commits.
func QueueNotify(b *pgx.Batch, channel, payload string) {
	b.Queue(notifySQL, channel, payload)
}

const (
	lockSQL   = `SELECT pg_advisory_xact_lock($1)`
	insertSQL = `INSERT INTO events (type, entity_id, correlation_id, actor, payload)
		VALUES ($1, $2, $3, $4, $5) RETURNING id`
	notifySQL = `SELECT pg_notify($1, $2)`
	// reserveSQL draws $1 ids from the sequence of events.id (a bigserial, 00001_foundation)
	// for AppendMany, under the lock.
	reserveSQL = `SELECT nextval('events_id_seq') FROM generate_series(1, $1::int)`
)

// encode checks e and returns its payload as JSON ({} for none) and its entity id (nil for
// none).
func encode(e Event, payload any) (json.RawMessage, *string, error) {
	if e.Type == "" {
		return nil, nil, errors.New("eventbus: event type is required")
	}
	raw := e.Payload
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return nil, nil, fmt.Errorf("eventbus: marshal %s payload: %w", e.Type, err)
		}
		raw = b
	}
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	var entity *string
	if e.EntityID != "" {
		entity = &e.EntityID
	}
	return raw, entity, nil
}

const eventColumns = `id, at, type, coalesce(entity_id::text, ''), correlation_id, actor, payload`

// ReadAfter returns up to limit events with id > after, in id order, optionally only of the
// given types. SSE resumption and the listener's catch-up both read through it.
func ReadAfter(ctx context.Context, q pg.Querier, after int64, limit int, types []string) ([]Event, error) {
	var rows pgx.Rows
	var err error
	if len(types) == 0 {
		rows, err = q.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE id > $1 ORDER BY id LIMIT $2`, after, limit)
	} else {
		rows, err = q.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE id > $1 AND type = ANY($3) ORDER BY id LIMIT $2`,
			after, limit, types)
	}
	if err != nil {
		return nil, fmt.Errorf("read events: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		err := r.Scan(&e.ID, &e.At, &e.Type, &e.EntityID, &e.CorrelationID, &e.Actor, &e.Payload)
		return e, err
	})
}

// LastID returns the newest event id (0 for an empty outbox).
func LastID(ctx context.Context, q pg.Querier) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM events`).Scan(&id)
	return id, err
}

// Subscription receives the events of the types it asked for, in id order, each once.
type Subscription struct {
	C      <-chan Event
	c      chan Event
	types  map[string]bool
	prefix []string
	bus    *Bus
	closed chan struct{}
	once   sync.Once
}

// Close stops delivery to this subscription.
func (s *Subscription) Close() {
	s.once.Do(func() {
		close(s.closed)
		s.bus.remove(s)
	})
}

func (s *Subscription) wants(t string) bool {
	if len(s.types) == 0 && len(s.prefix) == 0 {
		return true
	}
	if s.types[t] {
		return true
	}
	for _, p := range s.prefix {
		if len(t) >= len(p) && t[:len(p)] == p {
			return true
		}
	}
	return false
}

// BusOptions configure a Bus.
type BusOptions struct {
	Pool     *pgxpool.Pool
	Notifier *Notifier
	Logger   zerolog.Logger
	// From is the id after which delivery starts; nil means "from now" (the newest id at Start).
	From *int64
	// Poll is the safety-net interval at which the outbox is read even without a NOTIFY
	// (default 2 s).
	Poll time.Duration
	// Batch is how many events one read fetches (default 1000).
	Batch int
}

// Bus delivers outbox events to in-process subscribers. Delivery blocks on a full
// subscriber: order and completeness matter more than a slow subscriber's latency, and the
// subscribers (the SSE hub, the scheduler's reloaders, the agent's resumer) hand work off.
type Bus struct {
	opts BusOptions

	mu   sync.Mutex
	subs []*Subscription
	last int64

	wake     chan struct{}
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewBus builds a bus; it registers its handlers on the notifier, so create it before the
// notifier starts.
func NewBus(opts BusOptions) *Bus {
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.Batch <= 0 {
		opts.Batch = 1000
	}
	b := &Bus{opts: opts, wake: make(chan struct{}, 1)}
	if opts.Notifier != nil {
		opts.Notifier.Listen(ChannelEvents, func(string) { b.poke() })
		opts.Notifier.OnConnect(b.poke)
	}
	return b
}

func (b *Bus) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Subscribe returns a subscription to events whose type is listed, or begins with a listed
// prefix ending in "." (for example "health."). No types means every event. buffer sizes the
// channel (default 256).
func (b *Bus) Subscribe(buffer int, types ...string) *Subscription {
	if buffer <= 0 {
		buffer = 256
	}
	c := make(chan Event, buffer)
	s := &Subscription{C: c, c: c, types: map[string]bool{}, bus: b, closed: make(chan struct{})}
	for _, t := range types {
		if len(t) > 0 && t[len(t)-1] == '.' {
			s.prefix = append(s.prefix, t)
		} else if t != "" {
			s.types[t] = true
		}
	}
	b.mu.Lock()
	b.subs = append(b.subs, s)
	b.mu.Unlock()
	return s
}

func (b *Bus) remove(s *Subscription) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.subs {
		if x == s {
			b.subs = append(b.subs[:i], b.subs[i+1:]...)
			return
		}
	}
}

// LastDelivered is the id of the newest event handed to subscribers.
func (b *Bus) LastDelivered() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.last
}

// Start positions the cursor and runs the delivery loop.
func (b *Bus) Start(ctx context.Context) error {
	if b.opts.From != nil {
		b.last = *b.opts.From
	} else {
		id, err := LastID(ctx, b.opts.Pool)
		if err != nil {
			return fmt.Errorf("eventbus: position cursor: %w", err)
		}
		b.last = id
	}
	ctx, b.cancel = context.WithCancel(ctx)
	b.done = make(chan struct{})
	safego.Go(b.opts.Logger, "eventbus", func() {
		defer close(b.done)
		b.loop(ctx)
	})
	return nil
}

// Stop ends delivery. Safe to call twice.
func (b *Bus) Stop() {
	b.stopOnce.Do(func() {
		if b.cancel != nil {
			b.cancel()
			<-b.done
		}
	})
}

func (b *Bus) loop(ctx context.Context) {
	ticker := time.NewTicker(b.opts.Poll)
	defer ticker.Stop()
	for {
		for {
			n, err := b.drain(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				b.opts.Logger.Warn().Err(err).Msg("read outbox; retrying on the next wake-up")
				break
			}
			if n < b.opts.Batch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		case <-ticker.C:
		}
	}
}

// drain reads one batch after the cursor and delivers it.
func (b *Bus) drain(ctx context.Context) (int, error) {
	b.mu.Lock()
	after := b.last
	b.mu.Unlock()
	events, err := ReadAfter(ctx, b.opts.Pool, after, b.opts.Batch, nil)
	if err != nil {
		return 0, err
	}
	for _, e := range events {
		b.mu.Lock()
		subs := append([]*Subscription(nil), b.subs...)
		b.mu.Unlock()
		for _, s := range subs {
			if !s.wants(e.Type) {
				continue
			}
			select {
			case s.c <- e:
			case <-s.closed:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		b.mu.Lock()
		b.last = e.ID
		b.mu.Unlock()
	}
	return len(events), nil
}

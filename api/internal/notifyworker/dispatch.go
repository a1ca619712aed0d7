package notifyworker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifyrender"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/api/internal/storage/notifystore"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/startstop"
)

// DefaultCursor names the dispatcher's row in notification_cursor.
const DefaultCursor = "notify"

// DispatcherOptions configure a Dispatcher.
type DispatcherOptions struct {
	Pool *storage.Pool
	// Bus wakes the dispatcher when an event it reads is committed; nil: it polls only.
	Bus    *eventbus.Bus
	Logger zerolog.Logger
	// PublicURL is where the dashboard is, for the messages' links.
	PublicURL string
	// IsA matches a rule's entity types against subtypes (the ontology's is-a); nil: names.
	IsA notify.IsA
	// Now stamps deliveries (time.Now when nil): a new delivery is due at once.
	Now func() time.Time
	// Poll is the safety net: the outbox is read this often without a wake-up (default 5 s).
	Poll time.Duration
	// Batch is how many events one transaction handles (default 200).
	Batch int
	// Cursor names the cursor row (default DefaultCursor).
	Cursor string
	// Queued is called after deliveries were committed (the worker's wake-up).
	Queued func()
}

// Dispatcher turns outbox events into deliveries. It reads the events after its persisted
// cursor, of the types notifications come from, and in one transaction per batch inserts a
// delivery for each channel one of whose rules matches (the first matching rule is named)
// and moves the cursor past the batch. The idempotency key "<event id>:<channel id>" is
// unique, so reading an event again (two apis, a crash between reads) adds nothing; and the
// cursor moves only with the deliveries it stands for, so a restart loses nothing.
type Dispatcher struct {
	o    DispatcherOptions
	db   *notifystore.Store
	life startstop.Lifecycle
	wake chan struct{}

	mu     sync.Mutex
	cond   *sync.Cond
	cursor int64
}

// NewDispatcher builds a dispatcher.
func NewDispatcher(o DispatcherOptions) (*Dispatcher, error) {
	if o.Pool == nil {
		return nil, errors.New("notify: the dispatcher needs a pool")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Second
	}
	if o.Batch <= 0 {
		o.Batch = 200
	}
	if o.Cursor == "" {
		o.Cursor = DefaultCursor
	}
	d := &Dispatcher{o: o, db: notifystore.New(o.Pool), wake: make(chan struct{}, 1)}
	d.cond = sync.NewCond(&d.mu)
	return d, nil
}

// Start positions the cursor (on the first start ever at the newest event: history is not
// notified) and runs the loop until Stop.
func (d *Dispatcher) Start(ctx context.Context) error {
	cursor, err := d.db.PositionCursor(ctx, d.o.Cursor)
	if err != nil {
		return fmt.Errorf("notify: position cursor: %w", err)
	}
	d.setCursor(cursor)
	var sub *eventbus.Subscription
	if d.o.Bus != nil {
		sub = d.o.Bus.Subscribe(64, notifyrender.SourceEvents...)
	}
	err = d.life.Start(ctx, d.o.Logger, "notify-dispatcher", func(ctx context.Context) {
		if sub != nil {
			defer sub.Close()
			// The bus blocks on a full subscriber, and everyone shares its loop: the events
			// are only wake-ups here (the rows are read after the cursor), so take them at
			// once on a goroutine of their own.
			d.life.Go("notify-dispatcher-wake", func(ctx context.Context) {
				for {
					select {
					case <-ctx.Done():
						return
					case <-sub.C:
						d.Wake()
					}
				}
			})
		}
		d.loop(ctx)
	})
	if err != nil && sub != nil {
		sub.Close()
	}
	return err
}

// Stop ends the loop. Safe twice.
func (d *Dispatcher) Stop() { d.life.Stop() }

// Wake makes the loop read the outbox now.
func (d *Dispatcher) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *Dispatcher) loop(ctx context.Context) {
	t := time.NewTicker(d.o.Poll)
	defer t.Stop()
	for {
		for {
			n, err := d.Drain(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				d.o.Logger.Warn().Err(err).Msg("notifications: reading the outbox failed; retrying at the next wake-up")
				break
			}
			if n < d.o.Batch {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C:
		}
	}
}

// Drain handles one batch of events after the cursor and returns how many it read.
func (d *Dispatcher) Drain(ctx context.Context) (int, error) {
	var n, queued int
	var last int64
	err := d.db.InTx(ctx, func(tx *notifystore.Store) error {
		n, queued, last = 0, 0, 0
		// The row lock serialises two apis' dispatchers: each batch is read once.
		cursor, err := tx.LockCursor(ctx, d.o.Cursor)
		if err != nil {
			return err
		}
		events, err := tx.EventsAfter(ctx, cursor, d.o.Batch, notifyrender.SourceEvents)
		if err != nil || len(events) == 0 {
			last = cursor
			return err
		}
		n, last = len(events), events[len(events)-1].ID
		rules, err := tx.EnabledRules(ctx)
		if err != nil {
			return err
		}
		var batch []notifystore.NewDelivery
		now := d.o.Now()
		for _, e := range events {
			if e.Type == notify.EventTargetFailing || e.Type == notify.EventTargetRecovered {
				note, ok := notifyrender.FromEvent(e, d.o.PublicURL, "")
				if !ok {
					continue
				}
				others, err := tx.HealthyChannels(ctx, note.Subject)
				if err != nil {
					return err
				}
				for _, ch := range others {
					batch = append(batch, notifystore.NewDelivery{Key: fmt.Sprintf("%d:%s", e.ID, ch), ChannelID: ch,
						Event: e, Kind: note.Kind, Severity: note.Severity, Title: note.Title, Body: note.Body,
						Link: note.Link, Due: now})
					queued++
				}
				continue
			}
			if len(rules) == 0 {
				continue
			}
			entityType, err := d.entityType(ctx, tx, e)
			if err != nil {
				return err
			}
			note, ok := notifyrender.FromEvent(e, d.o.PublicURL, entityType)
			if !ok {
				continue
			}
			// The first matching rule of each channel is named.
			seen := map[string]bool{}
			for _, r := range rules {
				if seen[r.ChannelID] || !notify.Matches(r, note, d.o.IsA) {
					continue
				}
				seen[r.ChannelID] = true
				batch = append(batch, notifystore.NewDelivery{Key: fmt.Sprintf("%d:%s", e.ID, r.ChannelID),
					ChannelID: r.ChannelID, RuleID: r.ID, Event: e, Kind: note.Kind, Severity: note.Severity,
					Title: note.Title, Body: note.Body, Link: note.Link, Due: now})
				queued++
			}
		}
		return tx.QueueDeliveries(ctx, batch, d.o.Cursor, last)
	})
	if err != nil {
		return 0, err
	}
	d.setCursor(last)
	if queued > 0 && d.o.Queued != nil {
		d.o.Queued()
	}
	return n, nil
}

// entityType is the type of a host key signal's machine, which the event carries only by id.
func (d *Dispatcher) entityType(ctx context.Context, tx *notifystore.Store, e eventbus.Event) (string, error) {
	if e.Type != notifyrender.EventSignalRaised || e.EntityID == "" {
		return "", nil
	}
	return tx.EntityType(ctx, e.EntityID)
}

func (d *Dispatcher) setCursor(id int64) {
	d.mu.Lock()
	if id > d.cursor {
		d.cursor = id
	}
	d.cond.Broadcast()
	d.mu.Unlock()
}

// Cursor is the id of the newest event handled.
func (d *Dispatcher) Cursor() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cursor
}

// WaitCursor blocks until the dispatcher has handled the event id (or one after it), or ctx
// ends: tests wait on it instead of sleeping.
func (d *Dispatcher) WaitCursor(ctx context.Context, id int64) error {
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.cursor < id {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.cond.Wait()
	}
	return nil
}

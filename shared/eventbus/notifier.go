// Package eventbus is how the daemons coordinate through PostgreSQL: the `events` outbox
// that every mutation appends to in its own transaction, and a listener that turns NOTIFY
// hints into an ordered, gap-free stream for subscribers.
//
// The design follows river's notifier: one dedicated connection LISTENs on every channel,
// pings when idle, reconnects with exponential backoff and re-LISTENs; payloads are tiny
// hints and receivers re-read rows; a slow poll is the safety net. Because every (re)connect
// catches up with `WHERE id > last_seen`, a restart of Postgres or of a daemon loses nothing.
package eventbus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/pg"
	"github.com/oikos-hq/oikos/shared/safego"
)

// Channels used between the daemons.
const (
	ChannelEvents  = "oikos_events"   // a row was appended to events
	ChannelExec    = "oikos_exec"     // an execution became runnable
	ChannelExecLog = "oikos_exec_log" // an execution wrote an output chunk
	ChannelChecks  = "oikos_checks"   // check definitions changed
	ChannelDrift   = "oikos_drift"    // a drift discovery was requested
	// ChannelDriftList: a scheduler running a drift report asks every scheduler to list the
	// Proxmox hosts it holds for it.
	ChannelDriftList = "oikos_drift_list"
)

// Handler receives a notification's payload. It runs on the notifier's goroutine and must
// not block: hand work to another goroutine.
type Handler func(payload string)

// NotifierOptions configure a Notifier.
type NotifierOptions struct {
	// ConnConfig is the dedicated connection's configuration (from the daemon's database URL).
	ConnConfig *pgx.ConnConfig
	Logger     zerolog.Logger
	// IdlePing is how long the connection may stay silent before it is pinged (default 15 s).
	IdlePing time.Duration
	// MaxBackoff caps the reconnect delay (default 5 s).
	MaxBackoff time.Duration
}

// Notifier holds one dedicated LISTEN connection for a process.
type Notifier struct {
	opts NotifierOptions

	mu          sync.Mutex
	handlers    map[string][]Handler
	onReconnect []func()
	connected   bool

	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// NewNotifier builds a notifier; Listen handlers before Start.
func NewNotifier(opts NotifierOptions) *Notifier {
	if opts.IdlePing <= 0 {
		opts.IdlePing = 15 * time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	return &Notifier{opts: opts, handlers: map[string][]Handler{}}
}

// Listen registers a handler for a channel. Register before Start.
func (n *Notifier) Listen(channel string, h Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[channel] = append(n.handlers[channel], h)
}

// OnConnect registers a callback run after every (re)connect, once LISTEN is in place: the
// place to catch up on what was missed while disconnected.
func (n *Notifier) OnConnect(fn func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.onReconnect = append(n.onReconnect, fn)
}

// Connected reports whether the dedicated connection is currently up (for /readyz).
func (n *Notifier) Connected() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.connected
}

// Start runs the connection loop until Stop or ctx ends.
func (n *Notifier) Start(ctx context.Context) error {
	if n.opts.ConnConfig == nil {
		return errors.New("eventbus: notifier needs a ConnConfig")
	}
	ctx, n.cancel = context.WithCancel(ctx)
	n.done = make(chan struct{})
	safego.Go(n.opts.Logger, "notifier", func() {
		defer close(n.done)
		n.loop(ctx)
	})
	return nil
}

// Stop ends the loop and closes the connection. Safe to call twice.
func (n *Notifier) Stop() {
	n.stopOnce.Do(func() {
		if n.cancel != nil {
			n.cancel()
			<-n.done
		}
	})
}

func (n *Notifier) setConnected(v bool) {
	n.mu.Lock()
	n.connected = v
	n.mu.Unlock()
}

func (n *Notifier) loop(ctx context.Context) {
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := n.session(ctx)
		n.setConnected(false)
		if ctx.Err() != nil {
			return
		}
		n.opts.Logger.Warn().Err(err).Dur("retry_in", backoff).Msg("listen connection lost; reconnecting")
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, n.opts.MaxBackoff)
	}
}

// session connects, LISTENs and dispatches until the connection fails.
func (n *Notifier) session(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, n.opts.ConnConfig.Copy())
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	n.mu.Lock()
	channels := make([]string, 0, len(n.handlers))
	for ch := range n.handlers {
		channels = append(channels, ch)
	}
	hooks := append([]func(){}, n.onReconnect...)
	n.mu.Unlock()
	for _, ch := range channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	n.setConnected(true)
	for _, h := range hooks {
		h()
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, n.opts.IdlePing)
		note, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, context.DeadlineExceeded) {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err = conn.Ping(pctx)
				cancel()
				if err != nil {
					return fmt.Errorf("ping: %w", err)
				}
				continue
			}
			return err
		}
		n.mu.Lock()
		hs := n.handlers[note.Channel]
		n.mu.Unlock()
		for _, h := range hs {
			h(note.Payload)
		}
	}
}

// Notify sends a NOTIFY on channel from inside the caller's transaction, so it is delivered
// only if that transaction commits.
func Notify(ctx context.Context, q pg.Querier, channel, payload string) error {
	_, err := q.Exec(ctx, notifySQL, channel, payload)
	return err
}

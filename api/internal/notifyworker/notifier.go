package notifyworker

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/notify"
	"github.com/oikos-hq/oikos/api/internal/notifytarget"
	"github.com/oikos-hq/oikos/api/internal/storage"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// Options configure a Notifier: the dispatcher's and the worker's options in one.
type Options struct {
	Pool      *storage.Pool
	Bus       *eventbus.Bus
	Logger    zerolog.Logger
	PublicURL string
	IsA       notify.IsA
	Secrets   notify.Secrets
	Sender    notifytarget.Sender
	Retry     []time.Duration
	Backoff   Backoff
	Rand      func() float64
	// FailingAfter is the worker's (default DefaultFailingAfter).
	FailingAfter int
	Now          func() time.Time
	// Poll is both parts' safety-net interval (default 5 s).
	Poll    time.Duration
	Metrics prometheus.Registerer
	// Observe is the worker's (tests wait on it).
	Observe func(Outcome)
}

// Notifier is the dispatcher and the worker, started and stopped together: events become
// deliveries, deliveries are sent.
type Notifier struct {
	Dispatcher *Dispatcher
	Worker     *Worker
}

// New builds a notifier.
func New(o Options) (*Notifier, error) {
	log := o.Logger.With().Str("component", "notify").Logger()
	w, err := NewWorker(WorkerOptions{Pool: o.Pool, Logger: log, Sender: o.Sender, Secrets: o.Secrets, Retry: o.Retry,
		Backoff: o.Backoff, Rand: o.Rand, FailingAfter: o.FailingAfter, Now: o.Now, Poll: o.Poll, Metrics: o.Metrics, Observe: o.Observe})
	if err != nil {
		return nil, err
	}
	d, err := NewDispatcher(DispatcherOptions{Pool: o.Pool, Bus: o.Bus, Logger: log, PublicURL: o.PublicURL, IsA: o.IsA,
		Now: o.Now, Poll: o.Poll, Queued: w.Wake})
	if err != nil {
		return nil, err
	}
	return &Notifier{Dispatcher: d, Worker: w}, nil
}

// Start starts the worker, then the dispatcher.
func (n *Notifier) Start(ctx context.Context) error {
	if err := n.Worker.Start(ctx); err != nil {
		return err
	}
	if err := n.Dispatcher.Start(ctx); err != nil {
		n.Worker.Stop()
		return err
	}
	return nil
}

// Stop stops the dispatcher, then the worker. Safe twice.
func (n *Notifier) Stop() {
	n.Dispatcher.Stop()
	n.Worker.Stop()
}

// Wake makes both parts look for work now.
func (n *Notifier) Wake() {
	n.Dispatcher.Wake()
	n.Worker.Wake()
}

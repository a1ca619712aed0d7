package httpapi

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/api/internal/storage/readmodel"
	"github.com/oikos-hq/oikos/shared/daemon"
	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/metrics"
	"github.com/oikos-hq/oikos/shared/safego"
)

// The SSE stream (G6). One hub subscribes once to the process's event bus and fans every
// event out to the connected clients. Each client has a bounded buffer and the hub never
// waits for a client: when a buffer is full the client is dropped (its stream ends) and it
// resumes with Last-Event-ID from the outbox. So a slow browser can never delay the others,
// and the bus (which blocks on a full subscriber to stay gap-free) never waits for a browser.

// hubBuffer is the hub's own subscription buffer; the hub only does non-blocking sends, so
// it drains far faster than the bus delivers.
const hubBuffer = 4096

// replayBatch is how many outbox rows one resumption read fetches.
const replayBatch = 500

// sseRetry is the reconnection delay the stream asks EventSource clients to use.
const sseRetry = 2 * time.Second

type hub struct {
	log     zerolog.Logger
	sub     *eventbus.Subscription
	dropped prometheus.Counter // oikos_api_sse_dropped_total

	mu      sync.Mutex
	clients map[*streamClient]struct{}

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
}

// streamClient is one connected stream: a bounded buffer of the events it wants and a
// channel closed when the hub drops it.
type streamClient struct {
	ch       chan eventbus.Event
	dropped  chan struct{}
	dropOnce sync.Once
	types    readmodel.TypeMatcher
	entityID string
}

func (c *streamClient) wants(e eventbus.Event) bool {
	return c.types.Match(e.Type) && (c.entityID == "" || c.entityID == e.EntityID)
}

func (c *streamClient) drop() { c.dropOnce.Do(func() { close(c.dropped) }) }

func newHub(bus *eventbus.Bus, log zerolog.Logger, h *daemon.Health) *hub {
	ctx, cancel := context.WithCancel(context.Background())
	hb := &hub{log: log, sub: bus.Subscribe(hubBuffer), clients: map[*streamClient]struct{}{},
		cancel: cancel, done: make(chan struct{})}
	hb.dropped = metrics.Register(h.Metrics, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "oikos_api_sse_dropped_total", Help: "SSE clients dropped for falling behind.",
	}))
	metrics.Register(h.Metrics, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "oikos_api_sse_clients", Help: "Connected SSE stream clients.",
	}, func() float64 {
		hb.mu.Lock()
		defer hb.mu.Unlock()
		return float64(len(hb.clients))
	}))
	safego.Go(log, "sse-hub", func() {
		defer close(hb.done)
		hb.run(ctx)
	})
	return hb
}

func (h *hub) run(ctx context.Context) {
	defer h.sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-h.sub.C:
			h.fanOut(e)
		}
	}
}

// fanOut hands e to every client that wants it, without ever blocking.
func (h *hub) fanOut(e eventbus.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		if !c.wants(e) {
			continue
		}
		select {
		case c.ch <- e:
		default:
			delete(h.clients, c)
			c.drop()
			h.dropped.Inc()
		}
	}
}

func (h *hub) add(c *streamClient) {
	h.mu.Lock()
	h.clients[c] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) remove(c *streamClient) {
	h.mu.Lock()
	delete(h.clients, c)
	h.mu.Unlock()
}

// stop ends the hub and drops every client, which ends their streams.
func (h *hub) stop() {
	h.stopOnce.Do(func() {
		h.cancel()
		<-h.done
		h.mu.Lock()
		for c := range h.clients {
			delete(h.clients, c)
			c.drop()
		}
		h.mu.Unlock()
	})
}

// lastEventID reads the resumption point: the Last-Event-ID header (what EventSource sends
// on reconnect) or ?last_event_id= (for clients that cannot set headers). -1 means "live
// only".
func lastEventID(c echo.Context) (int64, error) {
	v := c.Request().Header.Get("Last-Event-ID")
	field := "Last-Event-ID"
	if v == "" {
		v, field = c.QueryParam("last_event_id"), "last_event_id"
	}
	if v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 || n == math.MaxInt64 {
		return 0, request.BadRequest(field, "must be the id of the last event received")
	}
	return n, nil
}

// stream serves GET /api/v1/stream?types=&entity= with optional Last-Event-ID resumption.
//
// Resumption without gaps or duplicates: the outbox is replayed after the client's id
// before the client is registered with the hub; once registered, the outbox is read once
// more from the last id sent, which covers every event committed between the first replay
// and the registration; from then on the hub's events arrive in id order and any id not
// above the last one sent is skipped.
func (s *Server) stream(c echo.Context) error {
	if s.hub == nil {
		return request.Unavailable("the event stream is not configured")
	}
	ctx := c.Request().Context()
	last, err := lastEventID(c)
	if err != nil {
		return err
	}
	if last < 0 {
		// Live only means "after the newest event now". Treating it as a resumption from
		// that id keeps the seam exact: the hub may still be delivering older events, which
		// are skipped, and anything committed before registration is replayed.
		if last, err = eventbus.LastID(ctx, s.deps.Pool); err != nil {
			return err
		}
	}
	cl := &streamClient{ch: make(chan eventbus.Event, s.deps.SSEClientBuffer), dropped: make(chan struct{}),
		types: readmodel.NewTypeMatcher(request.ListParam(c, "types"))}
	if cl.entityID, err = s.entityParam(c); err != nil {
		return err
	}
	// ?unnamed=true leaves the `event:` line out, so a browser's EventSource hands every
	// event to onmessage (a named frame reaches only a listener of that exact name, and the
	// dashboard wants them all); the type is in the data either way.
	unnamed, err := request.BoolParam(c, "unnamed")
	if err != nil {
		return err
	}
	name := func(t string) string {
		if unnamed {
			return ""
		}
		return t
	}
	// The api's one SSE writer: a deadline per write, a flush per event, Kill for a drop.
	w, err := request.StartStream(c, sseRetry)
	if err != nil {
		return nil
	}
	replay := func() error {
		for {
			p, err := s.reader.Events(ctx, readmodel.EventFilter{Types: cl.types, EntityID: cl.entityID, After: last, Limit: replayBatch})
			if err != nil {
				return err
			}
			for _, e := range p.Items {
				if err := w.EventID(e.ID, name(e.Type), e); err != nil {
					return err
				}
				last = e.ID
			}
			if p.Next == "" {
				return nil
			}
		}
	}
	if last >= 0 {
		if err := replay(); err != nil {
			return s.endStream(err)
		}
	}
	s.hub.add(cl)
	defer s.hub.remove(cl)
	// A dropped client may be stuck in a write to a full socket: expire the write at once so
	// its handler ends now rather than at the write timeout.
	handlerDone := make(chan struct{})
	defer close(handlerDone)
	safego.Go(s.log, "sse-drop-watch", func() {
		select {
		case <-cl.dropped:
			w.Kill()
		case <-handlerDone:
		}
	})
	if last >= 0 {
		if err := replay(); err != nil {
			return s.endStream(err)
		}
	}
	beat := time.NewTicker(s.deps.SSEHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-cl.dropped:
			return nil
		case <-beat.C:
			if err := w.Heartbeat(); err != nil {
				return nil
			}
		case e := <-cl.ch:
			if e.ID <= last {
				continue
			}
			if err := w.EventID(e.ID, name(e.Type), e); err != nil {
				return nil
			}
			last = e.ID
		}
	}
}

// endStream logs a failure after the stream has started (the status line is gone, so no
// problem can be sent) and ends it; the client reconnects with Last-Event-ID.
func (s *Server) endStream(err error) error {
	if !errors.Is(err, context.Canceled) {
		s.log.Warn().Err(err).Msg("event stream ended")
	}
	return nil
}

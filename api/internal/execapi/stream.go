package execapi

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/api/internal/request"
	"github.com/oikos-hq/oikos/shared/eventbus"
)

// logHub turns NOTIFY hints into wake-ups for the log streams: oikos_exec_log names the
// execution that wrote a chunk; an execution.* event on oikos_events may be a status change
// of any of them. A wake-up only makes a stream re-read; the rows are the truth, so a lost
// hint costs latency (the poll catches up), never data.
type logHub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

func newLogHub() *logHub { return &logHub{subs: map[string]map[chan struct{}]struct{}{}} }

// listen registers the hub's handlers on the notifier (before it starts).
func (h *logHub) listen(n *eventbus.Notifier) {
	n.Listen(eventbus.ChannelExecLog, func(payload string) {
		var p struct {
			ExecutionID string `json:"execution_id"`
		}
		if json.Unmarshal([]byte(payload), &p) == nil && p.ExecutionID != "" {
			h.wake(p.ExecutionID)
		}
	})
	n.Listen(eventbus.ChannelEvents, func(payload string) {
		var p struct {
			Type string `json:"type"`
		}
		if json.Unmarshal([]byte(payload), &p) == nil && strings.HasPrefix(p.Type, "execution.") {
			h.wakeAll()
		}
	})
	n.OnConnect(h.wakeAll)
}

// subscribe returns a channel woken when execution id may have changed, and its release.
func (h *logHub) subscribe(id string) (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs[id] == nil {
		h.subs[id] = map[chan struct{}]struct{}{}
	}
	h.subs[id][c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs[id], c)
		if len(h.subs[id]) == 0 {
			delete(h.subs, id)
		}
		h.mu.Unlock()
	}
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (h *logHub) wake(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs[id] {
		poke(c)
	}
}

func (h *logHub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, cs := range h.subs {
		for c := range cs {
			poke(c)
		}
	}
}

// streamBatch is how many chunks one read sends.
const streamBatch = 500

// endEvent is the last event of a stream: how the execution ended.
type endEvent struct {
	ExecutionID string     `json:"execution_id"`
	Status      string     `json:"status"`
	ExitCode    *int       `json:"exit_code"`
	Error       string     `json:"error"`
	FinishedAt  *time.Time `json:"finished_at"`
}

// stream tails an execution's output as server-sent events: every stored chunk after
// Last-Event-ID (or ?after=) as `event: chunk` with `id: <seq>`, then new chunks as they are
// written, and a final `event: end` once the execution is terminal and all its output has
// been sent. A reconnect with Last-Event-ID resumes without a gap or a repeat.
func (h *API) stream(c echo.Context) error {
	ctx := c.Request().Context()
	id := pathID(c)
	after := 0
	if v := c.Request().Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return request.BadRequest("Last-Event-ID", "must be the seq of the last chunk received")
		}
		after = n
	} else {
		n, err := request.IntParam(c, "after", 0, 0, maxSeq)
		if err != nil {
			return err
		}
		after = int(n)
	}
	// Subscribe before the first read, so a chunk written between the read and the wait
	// still wakes the stream.
	wake, release := h.hub.subscribe(id)
	defer release()
	first, err := h.d.Service.Logs(ctx, id, after, streamBatch)
	if err != nil {
		return err
	}
	// The api's one SSE writer: a deadline per write (a client that stops reading is
	// dropped), a flush per event.
	w, err := request.StartStream(c, 0)
	if err != nil {
		return nil
	}
	poll := time.NewTicker(h.d.StreamPoll)
	defer poll.Stop()
	beat := time.NewTicker(h.d.Heartbeat)
	defer beat.Stop()
	logs := first
	for {
		for _, ch := range logs.Chunks {
			if err := w.EventID(int64(ch.Seq), "chunk", ch); err != nil {
				return nil // the client went away
			}
		}
		after = logs.NextSeq
		if logs.Done {
			e, err := h.d.Service.Get(ctx, id)
			if err != nil {
				return nil
			}
			_ = w.Event("", "end", endEvent{ExecutionID: e.ID, Status: e.Status, ExitCode: e.ExitCode, Error: e.Error, FinishedAt: e.FinishedAt})
			return nil
		}
		if len(logs.Chunks) < streamBatch {
			if !h.waitForMore(c, w, wake, poll.C, beat.C) {
				return nil
			}
		}
		logs, err = h.d.Service.Logs(ctx, id, after, streamBatch)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn().Err(err).Str("execution", id).Msg("log stream read failed; closing the stream")
			}
			return nil
		}
	}
}

// waitForMore blocks until a wake-up or a poll tick, writing heartbeats meanwhile. It
// returns false when the client has gone.
func (h *API) waitForMore(c echo.Context, w *request.Stream, wake <-chan struct{}, poll, beat <-chan time.Time) bool {
	ctx := c.Request().Context()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-wake:
			return true
		case <-poll:
			return true
		case <-beat:
			if err := w.Heartbeat(); err != nil {
				return false
			}
		}
	}
}

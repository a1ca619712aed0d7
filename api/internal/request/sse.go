package request

import (
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oikos-hq/oikos/shared/sse"
)

// StreamWriteTimeout bounds one write to an event stream: a client whose socket stays full
// that long is gone, and its stream ends.
const StreamWriteTimeout = sse.DefaultWriteTimeout

// ErrStreamKilled is what every write returns after Kill.
var ErrStreamKilled = sse.ErrKilled

// Stream is the api's server-sent event writer (the event stream, an execution's log tail
// and the chat relay all write through it): shared/sse's Writer, with the api's JSON events.
// Every frame is written under StreamWriteTimeout and flushed at once, so a client sees each
// event as it is sent; Kill, from any goroutine, fails the write in progress and every later
// one, so a handler stuck on a client that stopped reading ends now. Writes themselves are
// not safe for concurrent use: one goroutine (the handler) writes.
type Stream struct {
	*sse.Writer
}

// StartStream answers 200 with the event-stream headers and flushes them. With retry > 0 it
// first sends a `: connected` comment and the reconnection delay EventSource should use.
func StartStream(c echo.Context, retry time.Duration) (*Stream, error) {
	w, err := sse.Start(c.Response(), c.Request(), sse.Options{Retry: retry, WriteTimeout: StreamWriteTimeout})
	return &Stream{w}, err
}

// Event writes one event: `id:` (left out when id is ""), `event:` (left out when event is
// "") and data marshalled as JSON on one `data:` line.
func (s *Stream) Event(id, event string, data any) error { return s.JSON(id, event, data) }

// EventID is Event with a numeric id.
func (s *Stream) EventID(id int64, event string, data any) error {
	return s.Event(strconv.FormatInt(id, 10), event, data)
}

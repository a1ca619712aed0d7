package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// StreamWriteTimeout bounds one write to an event stream: a client whose socket stays full
// that long is gone, and its stream ends.
const StreamWriteTimeout = 10 * time.Second

// ErrStreamKilled is what every write returns after Kill.
var ErrStreamKilled = errors.New("stream dropped")

// Stream is the api's one server-sent event writer (the event stream, an execution's log
// tail and the chat relay all write through it). Every frame is written under
// StreamWriteTimeout and flushed at once, so a client sees each event as it is sent; Kill,
// from any goroutine, fails the write in progress and every later one, so a handler stuck on a
// client that stopped reading ends now. Writes themselves are not safe for concurrent use: one
// goroutine (the handler) writes.
type Stream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte

	mu   sync.Mutex
	dead bool
}

// StartStream answers 200 with the event-stream headers and flushes them. With retry > 0 it
// first sends a `: connected` comment and the reconnection delay EventSource should use.
func StartStream(c echo.Context, retry time.Duration) (*Stream, error) {
	resp := c.Response()
	h := resp.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-cache")
	h.Set("X-Accel-Buffering", "no")
	resp.WriteHeader(http.StatusOK)
	s := &Stream{w: resp, rc: http.NewResponseController(resp)}
	if retry > 0 {
		return s, s.write(fmt.Appendf(s.buf[:0], ": connected\nretry: %d\n\n", retry.Milliseconds()))
	}
	return s, s.write(nil)
}

// Event writes one event: `id:` (left out when id is ""), `event:` (left out when event is
// "") and data marshalled as
// JSON on one `data:` line.
func (s *Stream) Event(id, event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("marshal %s event %s: %w", event, id, err)
	}
	f := s.buf[:0]
	if id != "" {
		f = append(append(append(f, "id: "...), id...), '\n')
	}
	if event != "" {
		f = append(append(append(f, "event: "...), event...), '\n')
	}
	f = append(f, "data: "...)
	f = append(append(f, b...), "\n\n"...)
	s.buf = f
	return s.write(f)
}

// EventID is Event with a numeric id.
func (s *Stream) EventID(id int64, event string, data any) error {
	return s.Event(strconv.FormatInt(id, 10), event, data)
}

// Frames writes frames as they are, one or more whole events already in the wire format (a
// relayed stream's, byte for byte), and flushes.
func (s *Stream) Frames(frames []byte) error { return s.write(frames) }

// Heartbeat writes the keep-alive comment every stream sends while it has nothing to say.
func (s *Stream) Heartbeat() error { return s.write([]byte(": heartbeat\n\n")) }

// Kill makes the write in progress and every later one fail at once.
func (s *Stream) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	_ = s.rc.SetWriteDeadline(time.Now())
}

// write sends frame (nothing when empty) and flushes.
func (s *Stream) write(frame []byte) error {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return ErrStreamKilled
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(StreamWriteTimeout))
	s.mu.Unlock()
	if len(frame) > 0 {
		if _, err := s.w.Write(frame); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

// Package sse is Oikos's one implementation of server-sent events
// (https://html.spec.whatwg.org/multipage/server-sent-events.html), both ends:
//
//   - Writer answers a request with an event stream: the headers, then events (id, event,
//     retry and data fields, multi-line data split into one data line per line), comments
//     and heartbeats, each flushed at once and written under a deadline. It honours the
//     request's context: once it ends (the client has gone), every write returns its
//     error. Kill, from any goroutine, fails the write in progress and every later one. The api's request.Stream, the agent's chat
//     endpoint and the model simulator write through it.
//   - Reader parses a stream: event, id, data and retry fields, multi-line data, comments,
//     LF, CRLF and CR line endings, with a bound on the length of a line and of an event.
//     Next returns io.EOF at the end of the stream (an event left without its blank line
//     is dropped, as the specification says). The agent's wait for an execution's end, the
//     CLI's log tail and the tests read through it.
package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Event is one server-sent event.
type Event struct {
	// ID is the event's `id:` field ("" when it has none).
	ID string
	// Name is the event's `event:` field ("" for the default type, "message").
	Name string
	// Data is the event's data; a data with several lines is sent as several `data:` lines
	// and read back joined by "\n".
	Data string
	// Retry is the reconnection delay sent with the event (`retry:`, in milliseconds); 0
	// sends none.
	Retry time.Duration
}

// DefaultWriteTimeout bounds one write to a stream: a client whose socket stays full that long
// is gone, and its stream ends.
const DefaultWriteTimeout = 10 * time.Second

// ErrKilled is what every write returns after Kill.
var ErrKilled = errors.New("stream dropped")

// Options adjust a Writer.
type Options struct {
	// Retry > 0 first sends a `: connected` comment and the reconnection delay an EventSource
	// should use.
	Retry time.Duration
	// WriteTimeout bounds each write; 0 is DefaultWriteTimeout.
	WriteTimeout time.Duration
	// Header is set on the response after the event-stream headers (a Content-Type with a
	// charset, say).
	Header http.Header
}

// Writer writes one response's event stream. Kill and the end of the request's context may
// come from any goroutine; the writes themselves are not safe for concurrent use: one
// goroutine (the handler) writes, or the caller serialises its writes.
type Writer struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	ctx     context.Context
	timeout time.Duration
	buf     []byte

	mu   sync.Mutex
	dead bool
}

// Start answers r with 200 and the event-stream headers (Content-Type text/event-stream,
// Cache-Control no-cache, X-Accel-Buffering no), and flushes them.
func Start(w http.ResponseWriter, r *http.Request, o Options) (*Writer, error) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	for k, vs := range o.Header {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	w.WriteHeader(http.StatusOK)
	s := &Writer{w: w, rc: http.NewResponseController(w), ctx: r.Context(), timeout: o.WriteTimeout}
	if s.timeout <= 0 {
		s.timeout = DefaultWriteTimeout
	}
	if o.Retry > 0 {
		return s, s.write(fmt.Appendf(s.buf[:0], ": connected\nretry: %d\n\n", o.Retry.Milliseconds()))
	}
	return s, s.write(nil)
}

// Send writes one event: `id:` (left out when ID is ""), `event:` (left out when Name is
// ""), `retry:` (when Retry > 0) and one `data: ` line per line of Data (a "\r\n", "\r" or
// "\n" ends a line), then the blank line. An id or name with a line break or NUL in it
// would break the framing and is refused.
func (s *Writer) Send(e Event) error {
	if strings.ContainsAny(e.ID, "\r\n\x00") {
		return fmt.Errorf("sse: event id %q has a line break or NUL", e.ID)
	}
	if strings.ContainsAny(e.Name, "\r\n") {
		return fmt.Errorf("sse: event name %q has a line break", e.Name)
	}
	f := s.buf[:0]
	if e.ID != "" {
		f = append(append(append(f, "id: "...), e.ID...), '\n')
	}
	if e.Name != "" {
		f = append(append(append(f, "event: "...), e.Name...), '\n')
	}
	if e.Retry > 0 {
		f = append(strconv.AppendInt(append(f, "retry: "...), e.Retry.Milliseconds(), 10), '\n')
	}
	data := e.Data
	for {
		i := strings.IndexAny(data, "\r\n")
		if i < 0 {
			f = append(append(append(f, "data: "...), data...), '\n')
			break
		}
		f = append(append(append(f, "data: "...), data[:i]...), '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	f = append(f, '\n')
	s.buf = f
	return s.write(f)
}

// JSON writes one event whose data is v marshalled as JSON (on one data line: JSON has no
// raw line breaks).
func (s *Writer) JSON(id, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("marshal %s event %s: %w", name, id, err)
	}
	return s.Send(Event{ID: id, Name: name, Data: string(b)})
}

// Comment writes a comment (": text", one comment line per line of text) and a blank line;
// readers ignore it.
func (s *Writer) Comment(text string) error {
	f := s.buf[:0]
	for line := range strings.Lines(strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")) {
		f = append(append(append(f, ": "...), strings.TrimSuffix(line, "\n")...), '\n')
	}
	if len(f) == 0 {
		f = append(f, ":\n"...)
	}
	f = append(f, '\n')
	s.buf = f
	return s.write(f)
}

// Heartbeat writes the keep-alive comment every stream sends while it has nothing to say.
func (s *Writer) Heartbeat() error { return s.write([]byte(": heartbeat\n\n")) }

// Frames writes frames as they are, one or more whole events already in the wire format (a
// relayed stream's, byte for byte), and flushes.
func (s *Writer) Frames(frames []byte) error { return s.write(frames) }

// Kill makes the write in progress and every later one fail at once.
func (s *Writer) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	_ = s.rc.SetWriteDeadline(time.Now())
}

// write sends frame (nothing when empty) and flushes.
func (s *Writer) write(frame []byte) error {
	s.mu.Lock()
	if err := s.ctx.Err(); err != nil {
		s.mu.Unlock()
		return err
	}
	if s.dead {
		s.mu.Unlock()
		return ErrKilled
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	s.mu.Unlock()
	if len(frame) > 0 {
		if _, err := s.w.Write(frame); err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxLine bounds one line of a stream a Reader accepts when the caller sets no bound.
const DefaultMaxLine = 1 << 20

// ErrTooLong is returned (wrapped) by Next for a line or an event over the Reader's bounds.
var ErrTooLong = errors.New("sse: line or event too long")

// Reader parses an event stream. Not safe for concurrent use.
type Reader struct {
	sc       *bufio.Scanner
	maxEvent int
	skipLF   bool // the last line ended with a CR at the end of the buffer: a LF next is its CRLF
	started  bool // the first line has been read (a byte order mark before it is dropped)

	lastID string
	retry  time.Duration
}

// NewReader reads events from r. maxLine bounds one line (0: DefaultMaxLine); an event's
// data is bounded by the same size.
func NewReader(r io.Reader, maxLine int) *Reader {
	if maxLine <= 0 {
		maxLine = DefaultMaxLine
	}
	rd := &Reader{maxEvent: maxLine}
	rd.sc = bufio.NewScanner(r)
	rd.sc.Buffer(make([]byte, 0, min(maxLine, 64<<10)), maxLine)
	rd.sc.Split(rd.splitLine)
	return rd
}

// splitLine splits lines ended by LF, CRLF or CR. A CR at the end of what has been read ends
// its line at once (a stream with CR line endings is not held up waiting for the next byte);
// a LF that then follows it is skipped.
func (r *Reader) splitLine(data []byte, atEOF bool) (int, []byte, error) {
	if r.skipLF && len(data) > 0 {
		r.skipLF = false
		if data[0] == '\n' {
			return 1, nil, nil
		}
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		switch {
		case data[i] == '\n':
			return i + 1, data[:i], nil
		case i+1 < len(data) && data[i+1] == '\n':
			return i + 2, data[:i], nil
		case i+1 == len(data) && !atEOF:
			r.skipLF = true
		}
		return i + 1, data[:i], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// Next returns the next event. It skips comments, unknown fields and blocks without data
// (a `retry:` alone), and returns io.EOF once the stream ends cleanly: an event the stream
// ends in before its blank line is dropped. A line or an event's data over the bound is
// ErrTooLong; a read error is returned as it is.
func (r *Reader) Next() (Event, error) {
	var (
		e       Event
		data    strings.Builder
		hasData bool
	)
	for r.sc.Scan() {
		line := r.sc.Bytes()
		if !r.started {
			r.started = true
			line = bytes.TrimPrefix(line, []byte("\xEF\xBB\xBF"))
		}
		if len(line) == 0 {
			if !hasData {
				e = Event{} // nothing to dispatch; an id or retry in it is kept (LastID, Retry)
				continue
			}
			e.Data = data.String()
			return e, nil
		}
		if line[0] == ':' {
			continue // a comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			e.Name = string(value)
		case "data":
			if data.Len()+len(value)+1 > r.maxEvent {
				return Event{}, fmt.Errorf("%w: an event's data is over %d bytes", ErrTooLong, r.maxEvent)
			}
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 { // the specification ignores an id with a NUL
				e.ID = string(value)
				r.lastID = e.ID
			}
		case "retry":
			if ms, err := strconv.ParseInt(string(value), 10, 64); err == nil && ms >= 0 && isDigits(value) {
				r.retry = time.Duration(ms) * time.Millisecond
				e.Retry = r.retry
			}
		}
	}
	if err := r.sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return Event{}, fmt.Errorf("%w: a line is over %d bytes", ErrTooLong, r.maxEvent)
		}
		return Event{}, err
	}
	return Event{}, io.EOF
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}

// LastID is the last event id the stream set (what a reconnection sends as Last-Event-ID).
func (r *Reader) LastID() string { return r.lastID }

// Retry is the last reconnection delay the stream asked for (0 when none).
func (r *Reader) Retry() time.Duration { return r.retry }

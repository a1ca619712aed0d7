package sse

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func start(t *testing.T, o Options) (*Writer, *httptest.ResponseRecorder) {
	t.Helper()
	rec := httptest.NewRecorder()
	w, err := Start(rec, httptest.NewRequest(http.MethodGet, "/", nil), o)
	if err != nil {
		t.Fatal(err)
	}
	return w, rec
}

func TestWriterWireBytes(t *testing.T) {
	w, rec := start(t, Options{Retry: 3 * time.Second})
	steps := []error{
		w.JSON("42", "entity.updated", map[string]int{"v": 1}),
		w.JSON("", "end", map[string]string{"status": "completed", "html": "<b>"}),
		w.Send(Event{Data: "one\ntwo\r\nthree\rfour"}),
		w.Send(Event{Name: "e", Retry: 1500 * time.Millisecond, Data: ""}),
		w.Heartbeat(),
		w.Comment("two\nlines"),
		w.Frames([]byte("event: relayed\r\ndata: x\r\n\r\n")),
	}
	for i, err := range steps {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := ": connected\nretry: 3000\n\n" +
		"id: 42\nevent: entity.updated\ndata: {\"v\":1}\n\n" +
		"event: end\ndata: {\"html\":\"\\u003cb\\u003e\",\"status\":\"completed\"}\n\n" +
		"data: one\ndata: two\ndata: three\ndata: four\n\n" +
		"event: e\nretry: 1500\ndata: \n\n" +
		": heartbeat\n\n" +
		": two\n: lines\n\n" +
		"event: relayed\r\ndata: x\r\n\r\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("wire bytes\n got %q\nwant %q", got, want)
	}
	h := rec.Header()
	if rec.Code != http.StatusOK || h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" || h.Get("X-Accel-Buffering") != "no" || !rec.Flushed {
		t.Errorf("response %d %v flushed %v", rec.Code, h, rec.Flushed)
	}
}

func TestWriterHeaderOverride(t *testing.T) {
	_, rec := start(t, Options{Header: http.Header{"Content-Type": {"text/event-stream; charset=utf-8"}, "Connection": {"keep-alive"}}})
	if rec.Header().Get("Content-Type") != "text/event-stream; charset=utf-8" || rec.Header().Get("Connection") != "keep-alive" {
		t.Errorf("headers %v", rec.Header())
	}
	if rec.Body.Len() != 0 {
		t.Errorf("body %q without Retry", rec.Body.String())
	}
}

func TestWriterRefusesBrokenFraming(t *testing.T) {
	w, rec := start(t, Options{})
	if err := w.Send(Event{ID: "1\nevent: forged", Data: "x"}); err == nil {
		t.Error("an id with a line break was written")
	}
	if err := w.Send(Event{Name: "a\rb", Data: "x"}); err == nil {
		t.Error("a name with a CR was written")
	}
	if err := w.JSON("", "bad", func() {}); err == nil {
		t.Error("an unmarshalable value was written")
	}
	if rec.Body.Len() != 0 {
		t.Errorf("wrote %q", rec.Body.String())
	}
}

func TestWriterKillAndContext(t *testing.T) {
	w, _ := start(t, Options{})
	w.Kill()
	if err := w.Heartbeat(); !errors.Is(err, ErrKilled) {
		t.Errorf("after Kill: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec := httptest.NewRecorder()
	w, err := Start(rec, httptest.NewRequest(http.MethodGet, "/", nil).WithContext(ctx), Options{})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := w.JSON("", "x", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("after the request ended: %v", err)
	}
	if strings.Contains(rec.Body.String(), "data") {
		t.Errorf("wrote after the request ended: %q", rec.Body.String())
	}
}

func readAll(t *testing.T, r *Reader) ([]Event, error) {
	t.Helper()
	var out []Event
	for {
		e, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

func TestRoundTrip(t *testing.T) {
	events := []Event{
		{ID: "1", Name: "chunk", Data: `{"stream":"stdout","data":"aGk="}`},
		{Name: "multi", Data: "line one\nline two\n\nline four"},
		{Data: "no name"},
		{ID: "7", Name: "retry", Retry: 2 * time.Second, Data: "r"},
		{Name: "empty", Data: ""},
		{Name: "spaces", Data: "  leading spaces kept after the one that follows the colon"},
		{Name: "colons", Data: "a: b: c"},
	}
	w, rec := start(t, Options{Retry: time.Second})
	for _, e := range events {
		if err := w.Send(e); err != nil {
			t.Fatal(err)
		}
		_ = w.Heartbeat()
	}
	r := NewReader(strings.NewReader(rec.Body.String()), 0)
	got, err := readAll(t, r)
	if err != io.EOF {
		t.Fatalf("end: %v", err)
	}
	if len(got) != len(events) {
		t.Fatalf("read %d events, want %d: %+v", len(got), len(events), got)
	}
	for i := range events {
		if got[i] != events[i] {
			t.Errorf("event %d: got %+v want %+v", i, got[i], events[i])
		}
	}
	if r.LastID() != "7" || r.Retry() != 2*time.Second {
		t.Errorf("last id %q retry %v", r.LastID(), r.Retry())
	}
}

func TestReaderLineEndings(t *testing.T) {
	want := []Event{{Name: "a", Data: "1\n2"}, {ID: "x", Data: "3"}}
	for name, in := range map[string]string{
		"LF":    "event: a\ndata: 1\ndata: 2\n\nid: x\ndata: 3\n\n",
		"CRLF":  "event: a\r\ndata: 1\r\ndata: 2\r\n\r\nid: x\r\ndata: 3\r\n\r\n",
		"CR":    "event: a\rdata: 1\rdata: 2\r\rid: x\rdata: 3\r\r",
		"mixed": "event: a\rdata: 1\r\ndata: 2\n\r\nid: x\ndata: 3\r\r",
		"BOM":   "\xEF\xBB\xBFevent: a\ndata: 1\ndata: 2\n\nid: x\ndata: 3\n\n",
	} {
		for _, split := range []bool{false, true} {
			var src io.Reader = strings.NewReader(in)
			if split {
				src = iotest.OneByteReader(src) // a CR at the end of every read
			}
			got, err := readAll(t, NewReader(src, 0))
			if err != io.EOF || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
				t.Errorf("%s (one byte at a time %v): %+v, %v", name, split, got, err)
			}
		}
	}
}

// A CR-only stream delivers an event as soon as its blank line arrives, without waiting for
// a byte after the last CR.
func TestReaderCRDoesNotWaitForTheNextByte(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	r := NewReader(pr, 0)
	got := make(chan Event, 1)
	go func() {
		e, _ := r.Next()
		got <- e
	}()
	if _, err := pw.Write([]byte("event: a\rdata: b\r\r")); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-got:
		if e.Name != "a" || e.Data != "b" {
			t.Errorf("event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event waited for a byte after its CR")
	}
}

func TestReaderFieldsAndComments(t *testing.T) {
	in := ": a comment\n" +
		":\n" +
		"retry: 5000\n\n" + // no data: not an event, the retry is kept
		"retry: 12x\n" + // not digits: ignored
		"unknown: field\n" +
		"data\n" + // a field without a colon has an empty value
		"data:no space\n" +
		"id: with\x00nul\n" + // ignored
		"event: e\n\n" +
		"id\n" + // an empty id resets the last id
		"data: x\n\n"
	r := NewReader(strings.NewReader(in), 0)
	got, err := readAll(t, r)
	if err != io.EOF || len(got) != 2 {
		t.Fatalf("%+v, %v", got, err)
	}
	if got[0] != (Event{Name: "e", Data: "\nno space"}) {
		t.Errorf("first %+v", got[0])
	}
	if got[1] != (Event{Data: "x"}) || r.LastID() != "" || r.Retry() != 5*time.Second {
		t.Errorf("second %+v last id %q retry %v", got[1], r.LastID(), r.Retry())
	}
}

func TestReaderHostile(t *testing.T) {
	t.Run("missing trailing blank line", func(t *testing.T) {
		got, err := readAll(t, NewReader(strings.NewReader("data: whole\n\nevent: cut\ndata: half"), 0))
		if err != io.EOF || len(got) != 1 || got[0].Data != "whole" {
			t.Errorf("%+v, %v", got, err)
		}
	})
	t.Run("missing blank line after a terminated line", func(t *testing.T) {
		got, err := readAll(t, NewReader(strings.NewReader("data: whole\n\ndata: half\n"), 0))
		if err != io.EOF || len(got) != 1 {
			t.Errorf("%+v, %v", got, err)
		}
	})
	t.Run("empty stream", func(t *testing.T) {
		if _, err := NewReader(strings.NewReader(""), 0).Next(); err != io.EOF {
			t.Errorf("%v", err)
		}
	})
	t.Run("very long line", func(t *testing.T) {
		r := NewReader(strings.NewReader("data: ok\n\ndata: "+strings.Repeat("x", 10<<10)+"\n\n"), 1<<10)
		if e, err := r.Next(); err != nil || e.Data != "ok" {
			t.Fatalf("first %+v, %v", e, err)
		}
		if _, err := r.Next(); !errors.Is(err, ErrTooLong) {
			t.Errorf("long line: %v", err)
		}
	})
	t.Run("very long line without any line ending", func(t *testing.T) {
		r := NewReader(io.MultiReader(strings.NewReader("data: "), neverEnding('x')), 1<<10)
		if _, err := r.Next(); !errors.Is(err, ErrTooLong) {
			t.Errorf("%v", err)
		}
	})
	t.Run("event over the bound in many short lines", func(t *testing.T) {
		r := NewReader(strings.NewReader(strings.Repeat("data: 0123456789\n", 200)+"\n"), 1<<10)
		if _, err := r.Next(); !errors.Is(err, ErrTooLong) {
			t.Errorf("%v", err)
		}
	})
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), 0)
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Next(); !errors.Is(err, boom) {
			t.Errorf("%v", err)
		}
	})
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

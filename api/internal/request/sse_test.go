package request

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The writer's frames are the SSE wire format both streams answer with.
func TestStreamFrames(t *testing.T) {
	t.Parallel()
	c := get("/api/v1/stream")
	rec := c.Response().Writer.(*httptest.ResponseRecorder)
	s, err := StartStream(c, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EventID(42, "entity.updated", map[string]int{"v": 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Event("", "end", map[string]string{"status": "completed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(); err != nil {
		t.Fatal(err)
	}
	want := ": connected\nretry: 2000\n\n" +
		"id: 42\nevent: entity.updated\ndata: {\"v\":1}\n\n" +
		"event: end\ndata: {\"status\":\"completed\"}\n\n" +
		": heartbeat\n\n"
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" ||
		rec.Header().Get("Cache-Control") != "no-cache" || rec.Body.String() != want || !rec.Flushed {
		t.Errorf("%d %v flushed %v\n%q", rec.Code, rec.Header(), rec.Flushed, rec.Body.String())
	}
	// Without a retry nothing but the headers is sent.
	c = get("/x")
	if _, err := StartStream(c, 0); err != nil || c.Response().Writer.(*httptest.ResponseRecorder).Body.Len() != 0 {
		t.Errorf("start without retry: %v", err)
	}
	s.Kill()
	if err := s.Heartbeat(); !errors.Is(err, ErrStreamKilled) {
		t.Errorf("write after Kill: %v", err)
	}
}

package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/shared/eventbus"
	"github.com/oikos-hq/oikos/shared/pg"
)

// frame is one parsed SSE frame; a comment line is a frame with only Comment set.
type frame struct {
	ID      int64
	Event   string
	Data    string
	Comment string
}

type stream struct {
	frames chan frame
	body   io.ReadCloser
	done   chan struct{} // closed when the server ends the stream
}

// openStream connects to /api/v1/stream. rcvbuf > 0 shrinks the client socket's receive
// buffer (a slow client); read=false never reads past the headers.
func (e *env) openStream(t *testing.T, query string, headers []string, rcvbuf int, read bool) *stream {
	t.Helper()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if rcvbuf > 0 {
		dialer.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf) })
			if err != nil {
				return err
			}
			return serr
		}
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, DisableCompression: true}}
	req, err := http.NewRequest("GET", e.ts.URL+"/api/v1/stream"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.readonly.token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Validate the status line and headers against the spec (the body is endless).
	head := *resp
	head.Body = io.NopCloser(strings.NewReader(""))
	checkResponse(t, req, &head, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	s := &stream{frames: make(chan frame, 100000), body: resp.Body, done: make(chan struct{})}
	t.Cleanup(func() { resp.Body.Close() })
	if read {
		go s.read()
	}
	return s
}

func (s *stream) read() {
	defer close(s.done)
	br := bufio.NewReaderSize(s.body, 1<<20)
	var f frame
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if f.ID != 0 || f.Comment != "" {
				s.frames <- f
			}
			f = frame{}
		case strings.HasPrefix(line, ":"):
			f.Comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "id: "):
			f.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			f.Event = line[7:]
		case strings.HasPrefix(line, "data: "):
			f.Data = line[6:]
		}
	}
}

// next returns the next event frame (skipping comments) or fails at the deadline.
func (s *stream) next(t *testing.T, within time.Duration) frame {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case f := <-s.frames:
			if f.ID != 0 {
				return f
			}
		case <-s.done:
			select {
			case f := <-s.frames:
				if f.ID != 0 {
					return f
				}
				continue
			default:
			}
			t.Fatal("stream ended")
		case <-deadline:
			t.Fatal("no event in time")
		}
	}
}

// appendEvents writes n events (one transaction each), returning their ids.
func (e *env) appendEvents(t *testing.T, typ, entityID string, n int, payload any) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for range n {
		err := pg.InTx(context.Background(), e.pool, func(tx pgx.Tx) error {
			id, err := eventbus.Append(context.Background(), tx, eventbus.Event{Type: typ, EntityID: entityID, Actor: "test"}, payload)
			ids = append(ids, id)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

func TestStreamResumesWithoutGapOrDuplicate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	early := e.appendEvents(t, "test.early", "", 5, nil)
	// Keep appending while the client connects and replays, so events land on both sides
	// of the seam between the outbox replay and the live feed.
	produced := make(chan []int64, 1)
	go func() {
		var ids []int64
		for range 60 {
			_ = pg.InTx(context.Background(), e.pool, func(tx pgx.Tx) error {
				id, err := eventbus.Append(context.Background(), tx, eventbus.Event{Type: "test.live"}, nil)
				ids = append(ids, id)
				return err
			})
		}
		produced <- ids
	}()
	s := e.openStream(t, "", []string{"Last-Event-ID", strconv.FormatInt(early[1], 10)}, 0, true)
	var live []int64
	select {
	case live = <-produced:
	case <-time.After(30 * time.Second):
		t.Fatal("producer stuck")
	}
	want := append(append([]int64{}, early[2:]...), live...)
	var got []int64
	for len(got) < len(want) {
		got = append(got, s.next(t, 10*time.Second).ID)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("event %d: got id %d, want %d\n got  %v\n want %v", i, got[i], want[i], got, want)
		}
	}
	// Nothing extra arrives (no duplicate of the seam).
	extra := e.appendEvents(t, "test.after", "", 1, nil)
	if f := s.next(t, 10*time.Second); f.ID != extra[0] || f.Event != "test.after" {
		t.Fatalf("after the seam: %+v, want id %d", f, extra[0])
	}
	// The query form of the resumption point works too, and an invalid one is a 400.
	q := e.openStream(t, "?last_event_id="+strconv.FormatInt(extra[0]-1, 10), nil, 0, true)
	if f := q.next(t, 10*time.Second); f.ID != extra[0] {
		t.Errorf("?last_event_id resume got %d", f.ID)
	}
	e.readonly.do("GET", "/api/v1/stream", nil, "Last-Event-ID", "yesterday").expect(t, http.StatusBadRequest)
	e.readonly.do("GET", "/api/v1/stream?entity=lxc:ghost", nil).expect(t, http.StatusNotFound)
}

func TestStreamFiltersAndHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{heartbeat: 50 * time.Millisecond})
	a := e.create("host", "a", nil)
	e.create("host", "b", nil)
	byEntity := e.openStream(t, "?entity=host:a&types=entity.", nil, 0, true)
	byType := e.openStream(t, "?types=relationship.created,entity.state_changed", nil, 0, true)
	e.operator.do("PATCH", "/api/v1/entities/host:b", map[string]any{"attributes": map[string]any{"user": "x"}}).expect(t, http.StatusOK)
	e.operator.do("PATCH", "/api/v1/entities/host:a", map[string]any{"attributes": map[string]any{"user": "y"}}).expect(t, http.StatusOK)
	e.operator.do("POST", "/api/v1/entities/host:a/state", map[string]any{"state": "maintenance"}).expect(t, http.StatusOK)
	f := byEntity.next(t, 10*time.Second)
	var ev eventbus.Event
	if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
		t.Fatal(err)
	}
	if f.Event != "entity.updated" || ev.EntityID != a.ID || ev.ID != f.ID || ev.Actor != "op" {
		t.Errorf("entity filter: %+v %+v", f, ev)
	}
	if f := byEntity.next(t, 10*time.Second); f.Event != "entity.state_changed" {
		t.Errorf("entity filter second event: %+v", f)
	}
	if f := byType.next(t, 10*time.Second); f.Event != "entity.state_changed" {
		t.Errorf("type filter skipped the updates: got %+v", f)
	}
	// Heartbeats are comment frames.
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f := <-byType.frames:
			if f.Comment == "heartbeat" {
				return
			}
		case <-deadline:
			t.Fatal("no heartbeat")
		}
	}
}

// TestStreamSlowClientIsDroppedWithoutDelayingOthers: a client that stops reading fills its
// socket and then its buffer, and is disconnected; a reading client meanwhile gets every
// event promptly (the producer waits for it after each event, so any stall would show as a
// timeout). The dropped client resumes from its Last-Event-ID.
func TestStreamSlowClientIsDroppedWithoutDelayingOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{buffer: 16, heartbeat: time.Hour})
	fast := e.openStream(t, "?types=test.big", nil, 0, true)
	slow := e.openStream(t, "?types=test.big", nil, 4096, false)
	payload := map[string]string{"blob": strings.Repeat("x", 64<<10)}
	const n = 160
	var ids []int64
	var worst time.Duration
	for i := range n {
		start := time.Now()
		id := e.appendEvents(t, "test.big", "", 1, payload)[0]
		ids = append(ids, id)
		if f := fast.next(t, 10*time.Second); f.ID != id {
			t.Fatalf("fast client: event %d is id %d, want %d", i, f.ID, id)
		}
		worst = max(worst, time.Since(start))
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Logf("event %d took %v (dropped %v)", i, d, e.health.Metrics.Value("oikos_api_sse_dropped_total"))
		}
	}
	t.Logf("fast client: worst commit-to-receive %v over %d events of 64 KiB", worst, n)
	if got := e.health.Metrics.Value("oikos_api_sse_dropped_total"); got < 1 {
		t.Fatalf("the slow client was never dropped (dropped_total %v)", got)
	}
	// The slow client now reads what reached its socket: a gap-free prefix, then the end of
	// the stream.
	go slow.read()
	var got []int64
	timeout := time.After(30 * time.Second)
	for done := false; !done; {
		select {
		case f := <-slow.frames:
			if f.ID != 0 {
				got = append(got, f.ID)
			}
		case <-slow.done:
			for len(slow.frames) > 0 {
				if f := <-slow.frames; f.ID != 0 {
					got = append(got, f.ID)
				}
			}
			done = true
		case <-timeout:
			t.Fatalf("slow client's stream was not closed (received %d)", len(got))
		}
	}
	if len(got) == 0 || len(got) >= n {
		t.Fatalf("slow client received %d of %d before being dropped", len(got), n)
	}
	for i, id := range got {
		if id != ids[i] {
			t.Fatalf("slow client's prefix has a gap at %d: %d, want %d", i, id, ids[i])
		}
	}
	// It resumes where it stopped and gets the rest.
	resumed := e.openStream(t, "?types=test.big", []string{"Last-Event-ID", strconv.FormatInt(got[len(got)-1], 10)}, 0, true)
	for _, want := range ids[len(got):] {
		if f := resumed.next(t, 10*time.Second); f.ID != want {
			t.Fatalf("resume: got %d, want %d", f.ID, want)
		}
	}
}

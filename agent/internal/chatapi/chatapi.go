// Package chatapi is the agent's side of chat: POST /internal/chat, which only the api calls
// (with the agent's own token) after it has recorded the operator's message, streams a turn's
// events as server-sent events. The api relays the stream to the client as it comes.
package chatapi

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/agent/internal/loop"
	"github.com/oikos-hq/oikos/shared/sse"
)

// maxBody bounds a forwarded turn.
const maxBody = 256 << 10

// streamWriteTimeout bounds one write of a turn's events to the api.
const streamWriteTimeout = time.Minute

var sessionRe = regexp.MustCompile(`^[A-Za-z0-9._:@/-]{1,128}$`)

// Handler serves /internal/chat.
type Handler struct {
	loop  *loop.Loop
	token string
	log   zerolog.Logger
}

// New returns the handler; token is the agent's own api token, which the api presents.
func New(l *loop.Loop, token string, log zerolog.Logger) *Handler {
	return &Handler{loop: l, token: token, log: log}
}

// Authorized reports whether r carries the agent's own token (only the api has it).
func Authorized(r *http.Request, token string) bool {
	h := r.Header.Get("Authorization")
	if token == "" || !strings.HasPrefix(h, "Bearer ") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimPrefix(h, "Bearer ")), []byte(token)) == 1
}

// Problem writes problem JSON.
func Problem(w http.ResponseWriter, status int, detail, field string) {
	p := map[string]any{"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail}
	if field != "" {
		p["field"] = field
	}
	b, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		Problem(w, http.StatusMethodNotAllowed, "POST a turn", "")
		return
	}
	if !Authorized(r, h.token) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="oikos-agent"`)
		Problem(w, http.StatusUnauthorized, "only the api may forward chat turns (with the agent's token)", "")
		return
	}
	var req loop.TurnRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		Problem(w, http.StatusBadRequest, "the turn is not valid JSON: "+err.Error(), "")
		return
	}
	switch {
	case !sessionRe.MatchString(req.SessionID):
		Problem(w, http.StatusUnprocessableEntity, "session_id must be 1 to 128 of A-Z a-z 0-9 . _ : @ / -", "session_id")
		return
	case strings.TrimSpace(req.Message) == "":
		Problem(w, http.StatusUnprocessableEntity, "message is empty", "message")
		return
	case req.MessageID == "":
		Problem(w, http.StatusUnprocessableEntity, "message_id (the api's record of the message) is required", "message_id")
		return
	}
	// The api reads the stream to its end even when its own client stops reading (its writes
	// give up after request.StreamWriteTimeout), so a write here waits longer than that
	// before the api counts as gone.
	stream, err := sse.Start(w, r, sse.Options{WriteTimeout: streamWriteTimeout})
	var mu sync.Mutex
	gone := err != nil
	ctx := r.Context()
	sink := func(e loop.Event) {
		mu.Lock()
		defer mu.Unlock()
		if gone {
			return // the client left: the turn goes on, its events are stored, not sent
		}
		b, err := json.Marshal(e.Data)
		if err != nil {
			b = []byte(`{}`)
		}
		if err := stream.Send(sse.Event{Name: e.Name, Data: string(b)}); err != nil {
			gone = true
		}
	}
	h.loop.Turn(ctx, req, sink)
}

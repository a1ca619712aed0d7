package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
)

// router is the api's OIKOS_AGENT_URL: it passes each request on to the agent started for its
// session (POST /internal/chat by the body's session_id, /internal/sessions/{id} by the path),
// so that one api serves agents with different scripts. The sessions list, which every agent
// answers alike from the shared database, goes to any agent still running. It adds nothing to
// what passes: headers, bodies and the event stream (flushed as it comes) are the agent's.
type router struct {
	url string
	tr  *http.Transport

	mu        sync.Mutex
	bySession map[string]*agentProc
	recent    []*agentProc
}

func startRouter(t *e2estack.PackageTB) (*router, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &router{url: "http://" + ln.Addr().String(), bySession: map[string]*agentProc{},
		tr: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		r.tr.CloseIdleConnections()
	})
	return r, nil
}

// assign sends session's requests to a from now on.
func (r *router) assign(session string, a *agentProc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bySession[session] = a
	r.recent = append(r.recent, a)
}

func (r *router) pick(session string) *agentProc {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.bySession[session]; ok {
		return a
	}
	for i := len(r.recent) - 1; i >= 0; i-- {
		if !r.recent[i].stopped() {
			return r.recent[i]
		}
	}
	return nil
}

func (r *router) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	session := ""
	switch {
	case req.URL.Path == "/internal/chat":
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var t struct {
			SessionID string `json:"session_id"`
		}
		_ = json.Unmarshal(body, &t)
		session = t.SessionID
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	case strings.HasPrefix(req.URL.Path, "/internal/sessions/"):
		rest := strings.TrimPrefix(req.URL.EscapedPath(), "/internal/sessions/")
		id, _, _ := strings.Cut(rest, "/")
		if v, err := url.PathUnescape(id); err == nil {
			session = v
		}
	}
	a := r.pick(session)
	if a == nil {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte(`{"type":"about:blank","title":"Bad Gateway","status":502,"detail":"the e2e router has no agent for this session"}`))
		return
	}
	target, _ := url.Parse(a.url)
	p := httputil.NewSingleHostReverseProxy(target)
	p.Transport = r.tr
	p.FlushInterval = -1
	p.ErrorLog = quietLog // a stream the agent cut (TestAgentRestartMidTurn) is expected
	p.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		if errors.Is(err, context.Canceled) {
			return
		}
		http.Error(w, "e2e router: "+err.Error(), http.StatusBadGateway)
	}
	p.ServeHTTP(w, req)
}

var quietLog = log.New(io.Discard, "", 0)

// stopped reports whether the agent's stop was called.
func (a *agentProc) stopped() bool {
	select {
	case <-a.gone:
		return true
	default:
		return false
	}
}

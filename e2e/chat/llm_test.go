package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/testkit/llmsim"
)

// llm is a scripted model (llmsim's handler) on a loopback port of its own, wrapped so the
// tests see what the agent asked (every chat completion request, decoded) and when the first
// piece of content left for the agent.
type llm struct {
	baseURL string
	model   string
	script  *llmsim.Script
	srv     *http.Server

	mu    sync.Mutex
	inner http.Handler
	reqs  []*llmRequest
}

// llmRequest is one chat completion request the model received.
type llmRequest struct {
	At       time.Time
	Body     []byte
	Model    string
	Messages []llmMessage
	Tools    []json.RawMessage
	// FirstContent is when the first chunk carrying content text was written to the agent
	// (zero when the answer had none); Done when the answer was written whole.
	FirstContent, Done time.Time
	// Status is the HTTP status answered (a wire mode's 429 or 503 refusal, or 200).
	Status int
	// Tokens is the prompt's size as llmsim's context window counts it (bytes / 3).
	Tokens int
}

// llmMessage is one message of a request; Text is its content as text.
type llmMessage struct {
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ToolCalls []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
	Text       string `json:"-"`
}

// lastUser is the text of the request's latest user message.
func (r *llmRequest) lastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text
		}
	}
	return ""
}

// system is the text of the request's system messages, joined.
func (r *llmRequest) system() string {
	var out []string
	for _, m := range r.Messages {
		if m.Role == "system" {
			out = append(out, m.Text)
		}
	}
	return strings.Join(out, "\n")
}

// startLLM serves script until the test ends.
func startLLM(tb testing.TB, script *llmsim.Script) *llm {
	tb.Helper()
	m, err := newLLM(script)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.close)
	return m
}

// newLLM serves script until close.
func newLLM(script *llmsim.Script) (*llm, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &llm{baseURL: "http://" + ln.Addr().String() + "/v1", model: script.Models()[0], script: script, inner: llmsim.NewServer(script, llmsim.Options{})}
	m.srv = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

// close stops the model at once, cutting the answers in flight (a provider gone away).
func (m *llm) close() { _ = m.srv.Close() }

// setWire serves the script from now on with the wire behaviour w (llmsim.Modes).
func (m *llm) setWire(w llmsim.Wire) {
	m.mu.Lock()
	m.inner = llmsim.NewServer(m.script, llmsim.Options{Wire: w})
	m.mu.Unlock()
}

// all is every request the model received, refused ones included.
func (m *llm) all() []*llmRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*llmRequest(nil), m.reqs...)
}

// requests is a copy of what the model answered so far: the requests a wire mode refused
// for now (429, 503) are left out, as the agent sent them again.
func (m *llm) requests() []*llmRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*llmRequest
	for _, r := range m.reqs {
		if r.Status == 0 || r.Status/100 == 2 {
			out = append(out, r)
		}
	}
	return out
}

// refused counts the requests a wire mode refused for now.
func (m *llm) refused() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.reqs {
		if r.Status != 0 && r.Status/100 != 2 {
			n++
		}
	}
	return n
}

func (m *llm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	inner := m.inner
	m.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		inner.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 32<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rec := &llmRequest{At: time.Now(), Body: body}
	rec.Tokens, _ = llmsim.ContextTokens(body)
	var req struct {
		Model    string            `json:"model"`
		Messages []llmMessage      `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &req) == nil {
		rec.Model, rec.Messages, rec.Tools = req.Model, req.Messages, req.Tools
		for i := range rec.Messages {
			rec.Messages[i].Text = contentText(rec.Messages[i].Content)
		}
	}
	m.mu.Lock()
	m.reqs = append(m.reqs, rec)
	m.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	sw := &stampWriter{ResponseWriter: w, m: m, rec: rec}
	inner.ServeHTTP(sw, r)
	m.mu.Lock()
	rec.Done = time.Now()
	m.mu.Unlock()
}

// contentText reads a message's content: a string or text parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		return b.String()
	}
	return ""
}

// stampWriter timestamps the first write of a chunk that carries content text.
type stampWriter struct {
	http.ResponseWriter
	m   *llm
	rec *llmRequest
}

var contentKey = []byte(`"content":"`)

func (w *stampWriter) WriteHeader(status int) {
	w.m.mu.Lock()
	w.rec.Status = status
	w.m.mu.Unlock()
	w.ResponseWriter.WriteHeader(status)
}

func (w *stampWriter) Write(b []byte) (int, error) {
	if i := bytes.Index(b, contentKey); i >= 0 && i+len(contentKey) < len(b) && b[i+len(contentKey)] != '"' {
		w.m.mu.Lock()
		if w.rec.FirstContent.IsZero() {
			w.rec.FirstContent = time.Now()
		}
		w.m.mu.Unlock()
	}
	return w.ResponseWriter.Write(b)
}

func (w *stampWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *stampWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// mustScript parses an llmsim script.
func mustScript(tb testing.TB, yaml string) *llmsim.Script {
	tb.Helper()
	s, err := llmsim.Parse([]byte(yaml))
	if err != nil {
		tb.Fatalf("script: %v", err)
	}
	return s
}

// waitRequests waits until the model received at least n requests.
func (m *llm) waitRequests(tb testing.TB, n int, within time.Duration) []*llmRequest {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		if r := m.requests(); len(r) >= n {
			return r
		}
		select {
		case <-ctx.Done():
			tb.Fatalf("the model received %d requests, want %d within %s", len(m.requests()), n, within)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

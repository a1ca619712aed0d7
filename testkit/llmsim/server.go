package llmsim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/oikos-hq/oikos/shared/sse"
)

// Options configure a server. The zero value serves without an API key, in chunks of
// DefaultChunkSize characters, without logging.
type Options struct {
	// APIKey, when set, is the bearer token every /v1 request must carry; a missing or wrong
	// one is answered 401 with an OpenAI error.
	APIKey string
	// ChunkSize is the streamed chunk size in characters for replies and scripts that do
	// not set chunk_size; 0 means DefaultChunkSize.
	ChunkSize int
	// Created is the "created" time of every answer (Unix seconds). It is a constant, not the
	// clock, so that the same request always gets the same bytes.
	Created int64
	// Logger receives one line per request (the rule that answered) and recovered panics.
	Logger zerolog.Logger
	// Wire is how the answers depart from OpenAI's wire format (wire.go, Modes); the zero
	// value is OpenAI's format.
	Wire Wire
	// Record, when set, is called with the size of every chat request that parsed, before
	// it is answered (a context window's refusal included): tests read what was sent.
	Record func(RequestSize)
}

// maxBody bounds a request body; a long agent conversation stays far below it.
const maxBody = 32 << 20

// fingerprint is the system_fingerprint of every answer.
const fingerprint = "llmsim"

type server struct {
	script *Script
	opts   Options
	log    zerolog.Logger
	flaky  flaky
}

// NewServer answers the OpenAI chat completions API from script:
// POST /v1/chat/completions (streamed with "stream": true), GET /v1/models,
// GET /v1/models/{model} and GET /healthz. The same routes also answer without the /v1
// prefix, so a base URL with or without it works.
func NewServer(script *Script, opts Options) http.Handler {
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	s := &server{script: script, opts: opts, log: opts.Logger}
	return http.HandlerFunc(s.serveHTTP)
}

func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error().Str("panic", fmt.Sprint(v)).Str("path", r.URL.Path).Msg("recovered panic in handler")
			writeError(w, http.StatusInternalServerError, "llmsim: internal error", "server_error", "", "")
		}
	}()
	path := r.URL.Path
	if path == "/healthz" {
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	}
	if s.identity(w, r) {
		return
	}
	path = strings.TrimPrefix(path, "/v1")
	switch {
	case path == "/chat/completions":
		if s.authorized(w, r) && allow(w, r, http.MethodPost) {
			s.chat(w, r)
		}
	case path == "/models":
		if s.authorized(w, r) && allow(w, r, http.MethodGet) {
			s.listModels(w)
		}
	case strings.HasPrefix(path, "/models/"):
		if s.authorized(w, r) && allow(w, r, http.MethodGet) {
			s.getModel(w, strings.TrimPrefix(path, "/models/"))
		}
	default:
		writeError(w, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", "", "")
	}
}

func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("Invalid method for %s: %s (want %s)", r.URL.Path, r.Method, strings.Join(methods, " or ")),
		"invalid_request_error", "", "")
	return false
}

func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.APIKey == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(s.opts.APIKey)) == 1 {
		return true
	}
	msg := "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
	if ok && strings.TrimSpace(got) != "" {
		msg = "Incorrect API key provided: " + maskKey(strings.TrimSpace(got)) + "."
	}
	writeError(w, http.StatusUnauthorized, msg, "invalid_request_error", "", "invalid_api_key")
	return false
}

// maskKey shows a key as the provider does: its ends only.
func maskKey(k string) string {
	if len(k) <= 8 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", 10) + k[len(k)-4:]
}

func (s *server) listModels(w http.ResponseWriter) {
	data := make([]modelObject, 0, len(s.script.models))
	for _, m := range s.script.models {
		data = append(data, s.modelObject(m))
	}
	writeJSON(w, http.StatusOK, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", data})
}

func (s *server) getModel(w http.ResponseWriter, name string) {
	if !s.script.modelSet[name] {
		writeModelNotFound(w, name)
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject(name))
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is vLLM's context window (--max-model-len) in its model cards.
	MaxModelLen int `json:"max_model_len,omitempty"`
}

func (s *server) modelObject(name string) modelObject {
	m := modelObject{ID: name, Object: "model", Created: s.opts.Created, OwnedBy: "llmsim"}
	if s.opts.Wire.Server == "vllm" {
		m.OwnedBy, m.MaxModelLen = "vllm", ServedContext
	}
	return m
}

func writeModelNotFound(w http.ResponseWriter, name string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", name),
		"invalid_request_error", "model", "model_not_found")
}

// answer is a reply expanded for one request.
type answer struct {
	content    string
	reasoning  string // a Reasoning mode's field, streamed before the content
	refusal    string
	hasRefusal bool
	calls      []answerCall
	finish     string
	err        *errSpec
	errMsg     string
	promptTok  int
	chunkSize  int
	delay      time.Duration
	chunkDelay time.Duration
}

type answerCall struct {
	id, name, args string
}

func (a *answer) completionTokens() int {
	n := utf8.RuneCountInString(a.content) + utf8.RuneCountInString(a.refusal)
	for _, c := range a.calls {
		n += utf8.RuneCountInString(c.name) + utf8.RuneCountInString(c.args)
	}
	return tokens(n)
}

func (a *answer) usage() usage {
	c := a.completionTokens()
	return usage{PromptTokens: a.promptTok, CompletionTokens: c, TotalTokens: a.promptTok + c}
}

func (s *server) chat(w http.ResponseWriter, r *http.Request) {
	body := http.MaxBytesReader(w, r.Body, maxBody)
	var req chatRequest
	dec := json.NewDecoder(body)
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", maxBody), "invalid_request_error", "", "")
			return
		}
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error(), "invalid_request_error", "", "")
		return
	}
	if req.Model == "" {
		writeError(w, http.StatusBadRequest, "you must provide a model parameter", "invalid_request_error", "model", "")
		return
	}
	if !s.script.modelSet[req.Model] {
		writeModelNotFound(w, req.Model)
		return
	}
	c, err := analyse(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "invalid_request_error", "messages", "")
		return
	}
	wire := s.opts.Wire
	if wire.ContextWindow > 0 || s.opts.Record != nil {
		n := windowTokens(&req, c)
		tools := 0
		if c.hasTools {
			tools = len(c.offered)
		}
		over := wire.ContextWindow > 0 && n > wire.ContextWindow
		if s.opts.Record != nil {
			s.opts.Record(RequestSize{Model: req.Model, Tokens: n, Messages: len(c.msgs), Tools: tools, Window: wire.ContextWindow, Refused: over})
		}
		if over {
			s.log.Info().Str("model", req.Model).Int("n_prompt_tokens", n).Int("n_ctx", wire.ContextWindow).Msg("request exceeds the context window")
			writeContextExceeded(w, n, wire.ContextWindow)
			return
		}
	}
	if wire.RefuseTools != "" && c.hasTools {
		refuseTools(w, wire.RefuseTools, req.Model)
		return
	}
	rl, env := s.script.choose(c)
	a := s.expand(rl, env, c)
	a.promptTok = promptTokens(&req, c)
	id := completionID(&req, c, rl)
	if wire.Flaky != 0 && s.flaky.first(id) {
		writeFlaky(w, wire.Flaky, wire.RetryAfter)
		return
	}
	if !wait(r.Context(), wire.FirstByteDelay) {
		return
	}
	if a.err == nil {
		wire.textCalls(a)
		if wire.Reasoning != "" {
			a.reasoning = fmt.Sprintf(Thought, c.lastUser)
			if wire.Reasoning == "think" {
				a.content = "<think>\n" + a.reasoning + "\n</think>\n\n" + a.content
				a.reasoning = ""
			}
		}
		if wire.FinishStop && a.finish == "tool_calls" {
			a.finish = "stop"
		}
		for i := range a.calls {
			a.calls[i].id = wire.callID(a.calls[i].id, id+a.calls[i].id)
		}
	}
	ev := s.log.Info().Str("model", req.Model).Str("rule", rl.name).Bool("stream", req.Stream).Int("messages", len(c.msgs))
	if a.err != nil {
		ev = ev.Int("error_status", a.err.status)
	} else {
		ev = ev.Str("finish_reason", a.finish).Int("tool_calls", len(a.calls))
	}
	ev.Msg("chat completion")
	for _, call := range a.calls {
		if !c.offered[call.name] {
			s.log.Warn().Str("rule", rl.name).Str("tool", call.name).Msg("the rule calls a tool the request did not offer")
		}
	}
	if !wait(r.Context(), a.delay) {
		return
	}
	if a.err != nil {
		if a.err.retryAfterS > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(a.err.retryAfterS))
		}
		typ, code := a.err.typ, a.err.code
		if typ == "" {
			typ = defaultErrorType(a.err.status)
		}
		if code == "" && a.err.status == http.StatusTooManyRequests {
			code = "rate_limit_exceeded"
		}
		writeError(w, a.err.status, a.errMsg, typ, "", code)
		return
	}
	if req.Stream {
		s.stream(w, r, &req, a, id)
		return
	}
	writeJSON(w, http.StatusOK, s.completion(&req, a, id))
}

func defaultErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "requests"
	case status == http.StatusForbidden:
		return "permission_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// expand turns the rule's reply into this request's answer.
func (s *server) expand(rl *rule, env *tmplEnv, c *convo) *answer {
	rep := rl.reply
	a := &answer{chunkSize: rep.chunkSize, delay: rep.delay, chunkDelay: rep.chunkDelay, finish: rep.finish}
	if a.chunkSize <= 0 {
		a.chunkSize = s.opts.ChunkSize
	}
	if rep.err != nil {
		a.err = rep.err
		a.errMsg = rep.err.message.expand(env)
		return a
	}
	if rep.empty {
		if a.finish == "" {
			a.finish = "stop"
		}
		return a
	}
	a.content = rep.content.expand(env)
	if rep.hasRefusal {
		a.hasRefusal, a.refusal = true, rep.refusal.expand(env)
	}
	for i, cs := range rep.calls {
		var args string
		switch {
		case cs.raw != nil:
			args = cs.raw.expand(env)
		case cs.args != nil:
			var b bytes.Buffer
			cs.args.render(&b, env)
			args = b.String()
		default:
			args = "{}"
		}
		a.calls = append(a.calls, answerCall{id: fmt.Sprintf("call_%s_%d_%d", rl.idName, len(c.msgs), i+1), name: cs.name, args: args})
	}
	if a.finish == "" {
		switch {
		case a.hasRefusal:
			a.finish = "content_filter"
		case len(a.calls) > 0:
			a.finish = "tool_calls"
		default:
			a.finish = "stop"
		}
	}
	return a
}

// completionID is a hash of the model, the rule and the messages, so equal requests get equal
// ids wherever the script was loaded from.
func completionID(req *chatRequest, c *convo, rl *rule) string {
	h := sha256.New()
	put := func(s string) {
		_, _ = fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	put(req.Model)
	put(rl.name)
	for _, m := range c.msgs {
		put(m.Role)
		put(m.text)
		put(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			put(tc.ID)
			put(tc.Function.Name)
			put(tc.Function.Arguments)
		}
	}
	return "chatcmpl-" + hex.EncodeToString(h.Sum(nil))[:29]
}

// ---- wire types ----

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	Choices           []completionChoice `json:"choices"`
	Usage             usage              `json:"usage"`
	SystemFingerprint string             `json:"system_fingerprint"`
}

type completionChoice struct {
	Index        int             `json:"index"`
	Message      responseMessage `json:"message"`
	Logprobs     *struct{}       `json:"logprobs"`
	FinishReason string          `json:"finish_reason"`
}

type responseMessage struct {
	Role             string             `json:"role"`
	Content          *string            `json:"content"`
	Refusal          *string            `json:"refusal"`
	ReasoningContent string             `json:"reasoning_content,omitempty"`
	Reasoning        string             `json:"reasoning,omitempty"`
	ToolCalls        []responseToolCall `json:"tool_calls,omitempty"`
}

type responseToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func (s *server) completion(req *chatRequest, a *answer, id string) completionResponse {
	msg := responseMessage{Role: "assistant"}
	if a.hasRefusal {
		msg.Refusal = &a.refusal
	} else if a.content != "" || len(a.calls) == 0 {
		msg.Content = &a.content
	}
	for _, c := range a.calls {
		msg.ToolCalls = append(msg.ToolCalls, responseToolCall{ID: c.id, Type: "function", Function: functionCall{Name: c.name, Arguments: c.args}})
	}
	if s.opts.Wire.Reasoning == "reasoning" {
		msg.Reasoning = a.reasoning
	} else {
		msg.ReasoningContent = a.reasoning
	}
	return completionResponse{
		ID: id, Object: "chat.completion", Created: s.opts.Created, Model: req.Model,
		Choices:           []completionChoice{{Index: 0, Message: msg, FinishReason: a.finish}},
		Usage:             a.usage(),
		SystemFingerprint: fingerprint,
	}
}

type chunk struct {
	ID                string          `json:"id"`
	Object            string          `json:"object"`
	Created           int64           `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []chunkChoice   `json:"choices"`
	Usage             json.RawMessage `json:"usage,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type delta struct {
	Role             string          `json:"role,omitempty"`
	Content          *string         `json:"content,omitempty"`
	Refusal          *string         `json:"refusal,omitempty"`
	ReasoningContent *string         `json:"reasoning_content,omitempty"`
	Reasoning        *string         `json:"reasoning,omitempty"`
	ToolCalls        []toolCallDelta `json:"tool_calls,omitempty"`
}

type toolCallDelta struct {
	Index    int            `json:"index"`
	ID       *string        `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function *functionDelta `json:"function,omitempty"`
}

type functionDelta struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// chunks is the answer as the stream's chunk objects, in order: the role, the content or
// refusal in pieces, each tool call (its id, type and name, then its arguments in pieces),
// the finish reason, and the usage when asked for.
func (s *server) chunks(req *chatRequest, a *answer, id string) []chunk {
	wire := s.opts.Wire
	withUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage && !wire.NoUsage
	var out []chunk
	add := func(d delta, finish *string) {
		c := chunk{ID: id, Object: "chat.completion.chunk", Created: s.opts.Created, Model: req.Model, SystemFingerprint: fingerprint,
			Choices: []chunkChoice{{Index: 0, Delta: d, FinishReason: finish}}}
		if withUsage {
			c.Usage = json.RawMessage("null")
		}
		out = append(out, c)
	}
	empty := ""
	if a.hasRefusal {
		add(delta{Role: "assistant", Refusal: &empty}, nil)
		for _, p := range split(a.refusal, a.chunkSize) {
			add(delta{Refusal: &p}, nil)
		}
	} else {
		add(delta{Role: "assistant", Content: &empty}, nil)
		for _, p := range split(a.reasoning, a.chunkSize) {
			if wire.Reasoning == "reasoning" {
				add(delta{Reasoning: &p}, nil)
			} else {
				add(delta{ReasoningContent: &p}, nil)
			}
		}
		for _, p := range split(a.content, a.chunkSize) {
			add(delta{Content: &p}, nil)
		}
	}
	for i, c := range a.calls {
		index := i
		if wire.IndexZero {
			index = 0
		}
		var first *string
		if c.id != "" {
			first = &c.id
		}
		var later *string
		if wire.IDs == "vllm" {
			later = &empty // vLLM sends "id": "" on the deltas after the first
		}
		switch wire.ToolCalls {
		case "whole":
			add(delta{ToolCalls: []toolCallDelta{{Index: index, ID: first, Type: "function", Function: &functionDelta{Name: c.name, Arguments: c.args}}}}, nil)
		case "fragments":
			add(delta{ToolCalls: []toolCallDelta{{Index: index, ID: first, Type: "function", Function: &functionDelta{Name: c.name}}}}, nil)
			for _, p := range split(c.args, 2) {
				add(delta{ToolCalls: []toolCallDelta{{Index: index, ID: later, Function: &functionDelta{Arguments: p}}}}, nil)
			}
		default:
			add(delta{ToolCalls: []toolCallDelta{{Index: index, ID: first, Type: "function", Function: &functionDelta{Name: c.name}}}}, nil)
			for _, p := range split(c.args, a.chunkSize) {
				add(delta{ToolCalls: []toolCallDelta{{Index: index, ID: later, Function: &functionDelta{Arguments: p}}}}, nil)
			}
		}
	}
	finish := a.finish
	add(delta{}, &finish)
	if withUsage {
		u, _ := json.Marshal(a.usage()) // plain ints always marshal
		out = append(out, chunk{ID: id, Object: "chat.completion.chunk", Created: s.opts.Created, Model: req.Model, SystemFingerprint: fingerprint,
			Choices: []chunkChoice{}, Usage: u})
	}
	return out
}

// split cuts s into pieces of n runes (the last may be shorter); "" has no pieces.
func split(s string, n int) []string {
	var out []string
	for s != "" {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

func (s *server) stream(w http.ResponseWriter, r *http.Request, req *chatRequest, a *answer, id string) {
	// OpenAI's wire format: unnamed events, one `data: {chunk}` line each, then `data: [DONE]`.
	out, err := sse.Start(w, r, sse.Options{Header: http.Header{
		"Content-Type": {"text/event-stream; charset=utf-8"},
		"Connection":   {"keep-alive"},
	}})
	if err != nil {
		return
	}
	send := func(data []byte) bool { return out.Send(sse.Event{Data: string(data)}) == nil }
	for i, c := range s.chunks(req, a, id) {
		if i > 0 && !wait(r.Context(), a.chunkDelay) {
			return
		}
		data, err := marshal(c)
		if err != nil || !send(data) {
			return
		}
	}
	send([]byte("[DONE]"))
}

// wait waits d unless ctx ends first; it says whether to go on.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeError answers an OpenAI-style error: {"error": {"message", "type", "param", "code"}}.
func writeError(w http.ResponseWriter, status int, msg, typ, param, code string) {
	e := errorObject{Message: msg, Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	writeJSON(w, status, errorBody{e})
}

// marshal is json.Marshal without HTML escaping (providers send <, > and & as they are).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	data = append(data, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

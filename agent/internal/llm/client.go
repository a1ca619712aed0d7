// Package llm is Nomos's side of the wire to an OpenAI-compatible model server: one streamed
// chat completion, read the way real servers send it rather than the way OpenAI documents it
// (docs/llm-providers.md records each behaviour and its source). It
//
//   - rebuilds streamed tool calls whether they arrive whole or in fragments, with or without
//     an index (Ollama sends every call at index 0) and with ids of any form or none;
//   - takes tool calls as tool calls whatever the finish reason;
//   - reads the tool calls a server without a tool parser leaves in the content (Hermes/Qwen
//     <tool_call> blocks, a bare JSON object), from the answer's own content only;
//   - keeps reasoning (<think> blocks, reasoning_content, reasoning) out of the answer;
//   - retries a 429 or 503 with capped exponential back-off and jitter, never sooner than the
//     server's Retry-After; only the model request is retried, never anything the caller did
//     with an earlier answer, and never once any of the answer was streamed;
//   - bounds the wait for the first byte separately (a local server loading a model), saying
//     it is waiting after StatusAfter;
//   - turns a server's refusal of tools into an error that names its message and the fix.
//
// The request and message types are go-openai's, so the loop builds its context as before;
// the HTTP exchange and the stream are read here because go-openai's stream drops the
// `reasoning` field, hides Retry-After and has no first-byte deadline.
package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	openai "github.com/sashabaranov/go-openai"

	"github.com/oikos-hq/oikos/shared/safego"
	"github.com/oikos-hq/oikos/shared/sse"
)

// Config configures a client.
type Config struct {
	BaseURL, APIKey, Model string
	// Provider is the preset the operator named (OIKOS_LLM_PROVIDER), for messages.
	Provider string
	// HTTP sends the requests (nil: a client without an overall timeout; the turn bounds it).
	HTTP *http.Client
	// FirstByte bounds the wait from sending a request to the stream's first event
	// (OIKOS_LLM_FIRST_BYTE_TIMEOUT; 0: DefaultFirstByte).
	FirstByte time.Duration
	// StatusAfter is how long without a first byte before Events.Status hears that Nomos is
	// waiting for the model (0: 3 s).
	StatusAfter time.Duration
	// Retries is how many times a transient refusal (429, 503) is retried (0: 4; <0: none).
	Retries int
	// RetryBase and RetryMax shape the back-off: RetryBase·2^n, at most RetryMax, half of it
	// jittered (0: 1 s and 30 s).
	RetryBase, RetryMax time.Duration
	// MaxRetryAfter is the longest Retry-After waited; a longer one fails at once, saying when
	// the server will take requests again (0: 2 min).
	MaxRetryAfter time.Duration
	Log           zerolog.Logger
}

// Client talks to one model.
type Client struct {
	cfg  Config
	http *http.Client
	url  string
}

// New builds a client.
func New(cfg Config) *Client {
	if cfg.FirstByte <= 0 {
		cfg.FirstByte = DefaultFirstByte
	}
	if cfg.StatusAfter <= 0 {
		cfg.StatusAfter = 3 * time.Second
	}
	if cfg.Retries == 0 {
		cfg.Retries = 4
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 30 * time.Second
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = 2 * time.Minute
	}
	hc := cfg.HTTP
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{cfg: cfg, http: hc, url: strings.TrimRight(cfg.BaseURL, "/") + "/chat/completions"}
}

// Model is the configured model's name.
func (c *Client) Model() string { return c.cfg.Model }

// Request is one completion's input.
type Request struct {
	Messages []openai.ChatCompletionMessage
	Tools    []openai.Tool // none: the model answers without tools
	// Callable are the further tool names a call written as text may name, besides the
	// offered ones: the context budget may offer fewer tools than the registry has, and a
	// model that learned a tool earlier in the session still calls it (a structured call to
	// it runs too). Still only registered tools, and still through the gate.
	Callable []string
}

// Status is what Nomos is waiting on while no answer streams.
type Status struct {
	// State is "waiting" (no first byte yet: the server may be loading the model) or
	// "retrying" (the server refused for now; the request is sent again after RetryIn).
	State   string
	Message string
	Attempt int
	RetryIn time.Duration
}

// Events receive a completion's progress on the caller's goroutine, in order.
type Events struct {
	Text   func(string) // answer text as it streams, reasoning and text calls left out
	Status func(Status)
}

// Call is one tool call of an answer.
type Call struct {
	// ID is the server's id, or one made up when it sent none (callers should use their own
	// ids for what they run: servers repeat and omit them).
	ID, Name, Arguments string
	// FromText says the call was written as text in the content (no tool parser).
	FromText bool
}

// Usage is the token count a server reported (nil in Answer when it sent none).
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Answer is one model answer.
type Answer struct {
	Content   string // the answer as the operator reads it: no reasoning, no text calls
	Reasoning string // the model's reasoning, kept apart (never fed back as the answer)
	Calls     []Call
	Finish    string // the server's finish reason ("stop" when it sent none)
	Refusal   string
	Usage     *Usage
	Attempts  int // requests sent (1 + retries)
}

// Empty says the answer has neither text nor calls.
func (a Answer) Empty() bool { return strings.TrimSpace(a.Content) == "" && len(a.Calls) == 0 }

// Stream sends one streamed completion and reads its answer, retrying transient refusals.
func (c *Client) Stream(ctx context.Context, req Request, ev Events) (Answer, error) {
	body, err := c.body(req)
	if err != nil {
		return Answer{}, err
	}
	for attempt := 1; ; attempt++ {
		a, err := c.once(ctx, body, req, ev)
		a.Attempts = attempt
		var ae *APIError
		if err == nil || !errors.As(err, &ae) {
			return a, err
		}
		if len(req.Tools) > 0 && toolsRefused(ae) {
			return a, &ToolsRefused{Server: c.cfg.Provider, Model: c.cfg.Model, Err: ae}
		}
		if !ae.Transient() || c.cfg.Retries < 0 || attempt > c.cfg.Retries {
			return a, err
		}
		if ae.RetryAfter > c.cfg.MaxRetryAfter {
			return a, fmt.Errorf("%w; it asks to wait %s (Retry-After), longer than Nomos waits within a turn", err, ae.RetryAfter.Round(time.Second))
		}
		wait := c.backoff(attempt, ae.RetryAfter)
		c.cfg.Log.Warn().Int("status", ae.Status).Dur("retry_in", wait).Int("attempt", attempt).Str("message", ae.Message).Msg("model server refused for now; retrying")
		if ev.Status != nil {
			ev.Status(Status{State: "retrying", Attempt: attempt, RetryIn: wait,
				Message: fmt.Sprintf("The model server answered %d (%s); retrying in %s.", ae.Status, ae.Message, wait.Round(100*time.Millisecond))})
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return a, ctx.Err()
		case <-t.C:
		}
	}
}

// backoff is the wait before retry n (1-based): RetryBase·2^(n-1) capped at RetryMax, its
// upper half jittered so that agents refused together do not come back together; never
// shorter than the server's Retry-After, plus a jitter of up to a tenth of it.
func (c *Client) backoff(n int, after time.Duration) time.Duration {
	d := c.cfg.RetryBase << (n - 1)
	if d > c.cfg.RetryMax || d <= 0 {
		d = c.cfg.RetryMax
	}
	d = d/2 + rand.N(d/2+1)
	if after > 0 {
		return after + rand.N(after/10+1)
	}
	return d
}

func (c *Client) body(req Request) ([]byte, error) {
	r := openai.ChatCompletionRequest{Model: c.cfg.Model, Messages: req.Messages, Stream: true,
		StreamOptions: &openai.StreamOptions{IncludeUsage: true}}
	if len(req.Tools) > 0 {
		r.Tools = req.Tools
	}
	return json.Marshal(r)
}

// opened is a response whose first event arrived (or the failure that came instead).
type opened struct {
	resp  *http.Response
	rd    *sse.Reader
	first sse.Event
	err   error
}

// once sends the request once and reads the answer.
func (c *Client) once(ctx context.Context, body []byte, req Request, ev Events) (Answer, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan opened, 1)
	// The request and the stream's first event are awaited on a goroutine so that this one
	// can tell the caller it is waiting, and give up at the first-byte deadline, while every
	// event still reaches the caller from here.
	safego.Go(c.cfg.Log, "llm-open", func() {
		var o opened
		defer func() { done <- o }()
		o.resp, o.rd, o.first, o.err = c.open(ctx, body)
	})
	deadline := time.NewTimer(c.cfg.FirstByte)
	defer deadline.Stop()
	status := time.NewTimer(c.cfg.StatusAfter)
	defer status.Stop()
	var o opened
wait:
	for {
		select {
		case o = <-done:
			break wait
		case <-status.C:
			if ev.Status != nil {
				ev.Status(Status{State: "waiting", Message: "Waiting for the model: the server has not answered yet (a local server may be loading the model)."})
			}
		case <-deadline.C:
			cancel(ErrFirstByte)
			o = <-done
			if o.resp != nil {
				o.resp.Body.Close()
			}
			return Answer{}, fmt.Errorf("%w within %s (OIKOS_LLM_FIRST_BYTE_TIMEOUT): the server may still be loading %s; raise the timeout or load the model first", ErrFirstByte, c.cfg.FirstByte, c.cfg.Model)
		}
	}
	if o.err != nil {
		return Answer{}, o.err
	}
	defer o.resp.Body.Close()
	offered := map[string]bool{}
	for _, t := range req.Tools {
		if t.Function != nil {
			offered[t.Function.Name] = true
		}
	}
	if len(req.Tools) > 0 {
		for _, n := range req.Callable {
			offered[n] = true
		}
	}
	r := newReader(len(req.Tools) > 0, offered, ev.Text)
	e := o.first
	for {
		stop, err := r.event(e)
		if err != nil || stop {
			if err != nil {
				return r.answer(), err
			}
			break
		}
		e, err = o.rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				err = cause
			}
			return r.answer(), fmt.Errorf("the model's stream broke: %w", err)
		}
	}
	return r.finish(), nil
}

// open sends the request and reads up to the first event.
func (c *Client) open(ctx context.Context, body []byte) (*http.Response, *sse.Reader, sse.Event, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, sse.Event{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Accept", "text/event-stream")
	if c.cfg.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, nil, sse.Event{}, fmt.Errorf("the model server at %s cannot be reached: %w", c.cfg.BaseURL, err)
	}
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, nil, sse.Event{}, parseAPIError(resp.StatusCode, resp.Header, data)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		// A server that ignores "stream" answers one chat.completion: read it as the only
		// event of a stream.
		data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if err != nil {
			return nil, nil, sse.Event{}, fmt.Errorf("read the model's answer: %w", err)
		}
		resp.Body = io.NopCloser(strings.NewReader(""))
		return resp, sse.NewReader(resp.Body, 0), sse.Event{Data: string(data)}, nil
	}
	rd := sse.NewReader(resp.Body, 0)
	first, err := rd.Next()
	if err != nil {
		resp.Body.Close()
		if errors.Is(err, io.EOF) {
			return nil, nil, sse.Event{}, errors.New("the model server ended its answer before sending anything")
		}
		return nil, nil, sse.Event{}, fmt.Errorf("the model's stream broke: %w", err)
	}
	return resp, rd, first, nil
}

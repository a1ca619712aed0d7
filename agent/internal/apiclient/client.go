// Package apiclient is the agent's only way to the api's data: every graph, knowledge,
// execution and metrics tool calls the api over HTTP with the caller's own bearer token (the
// agent's token for Nomos, the MCP client's token over /mcp), so the api's roles, gate and
// audit apply to whoever asked. The agent never writes the api's tables and never opens SSH.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	api "github.com/oikos-hq/oikos/shared/apiclient"
	"github.com/oikos-hq/oikos/shared/sse"
)

// maxBody bounds what the agent reads of one api answer.
const maxBody = 8 << 20

// Client calls one api: the generated client of api/openapi.yaml (API) for typed calls, and
// Do for the tools that pass an api answer on as it is. Both send through one transport and
// return one error type.
type Client struct {
	base string
	http *http.Client
	gen  *api.Client
}

// New returns a client for the api at base (OIKOS_API_URL). The transport keeps enough idle
// connections that concurrent tool calls reuse them instead of dialling per call.
func New(base string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OIKOS_API_URL %q: want http(s)://host:port", base)
	}
	tr := &http.Transport{
		Proxy:               nil, // the api is local; never route it through a proxy from the environment
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
	hc := &http.Client{Transport: tr}
	gen, err := api.New(u.String(), api.Options{HTTP: hc})
	if err != nil {
		return nil, fmt.Errorf("OIKOS_API_URL %q: %w", base, err)
	}
	return &Client{base: u.String(), http: hc, gen: gen}, nil
}

// API is the generated client; give each call its caller's token and session with As.
func (c *Client) API() *api.Client { return c.gen }

// As is the request editors of one call: the caller's bearer token and, as X-Correlation-ID,
// the session.
func As(token, correlation string) []api.RequestEditorFn {
	return []api.RequestEditorFn{api.WithToken(token), api.WithCorrelation(correlation)}
}

// problem is the shared api client's error type, embedded in Error.
type problem = api.APIError

// Error is an api answer outside 2xx: the shared client's problem (status, title, detail,
// field, the code, approval id and risk class some problems carry), worded for a tool
// result. errors.As finds the shared *apiclient.APIError in it too.
type Error struct{ *problem }

func (e *Error) Error() string {
	msg := e.Detail
	if msg == "" {
		msg = e.Title
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Field != "" && !strings.Contains(msg, e.Field) {
		msg += " (field " + e.Field + ")"
	}
	return fmt.Sprintf("api %d: %s", e.Status, msg)
}

// Unwrap is the shared client's error.
func (e *Error) Unwrap() error { return e.problem }

// StatusOf returns the api status of err (0 when err is not an api answer).
func StatusOf(err error) int { return api.StatusOf(err) }

// answer reads a generated call's answer with the agent's bound, in the agent's words: an
// unreachable api, or an *Error.
func answer(resp *http.Response, err error) ([]byte, error) {
	if err != nil {
		return nil, fmt.Errorf("api unreachable: %w", err)
	}
	raw, err := api.ReadLimit(resp, nil, maxBody)
	var pe *api.APIError
	if errors.As(err, &pe) {
		return raw, &Error{pe}
	}
	return raw, err
}

// Decode reads the answer of a generated call (c.API().Op(ctx, ..., As(token, session)...))
// and decodes its JSON into a T.
func Decode[T any](resp *http.Response, err error) (T, error) {
	raw, err := answer(resp, err)
	if err != nil {
		var zero T
		return zero, err
	}
	return api.DecodeBody[T](resp, raw)
}

// Raw reads the answer of a generated call as it is, for tools that pass it on.
func Raw(resp *http.Response, err error) (json.RawMessage, error) { return answer(resp, err) }

// Request is one call.
type Request struct {
	Method string
	Path   string // under the api root, e.g. /api/v1/entities
	Query  url.Values
	Body   any // marshalled as JSON when non-nil
	// Token is the caller's bearer token; Correlation is sent as X-Correlation-ID (the session).
	Token, Correlation string
}

// Do sends r and decodes a 2xx JSON answer into out (nil: discarded). It returns the raw
// body too, for tools that pass the api's answer on. It goes through the generated client's
// transport and editors; the operations have typed methods on API.
func (c *Client) Do(ctx context.Context, r Request, out any) (json.RawMessage, error) {
	var body io.Reader
	if r.Body != nil {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + r.Path
	if len(r.Query) > 0 {
		u += "?" + r.Query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u, body)
	if err != nil {
		return nil, err
	}
	if r.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, edit := range append(c.gen.RequestEditors, As(r.Token, r.Correlation)...) {
		if err := edit(ctx, req); err != nil {
			return nil, err
		}
	}
	raw, err := answer(c.gen.Client.Do(req))
	if err != nil {
		return raw, err
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return raw, fmt.Errorf("decode api answer to %s %s: %w", r.Method, r.Path, err)
		}
	}
	return raw, nil
}

// Get is Do for a GET.
func (c *Client) Get(ctx context.Context, token, correlation, path string, q url.Values, out any) (json.RawMessage, error) {
	return c.Do(ctx, Request{Method: http.MethodGet, Path: path, Query: q, Token: token, Correlation: correlation}, out)
}

// Send is Do with a JSON body.
func (c *Client) Send(ctx context.Context, method, token, correlation, path string, body, out any) (json.RawMessage, error) {
	return c.Do(ctx, Request{Method: method, Path: path, Body: body, Token: token, Correlation: correlation}, out)
}

// Identity is who a token is (GET /api/v1/whoami).
type Identity struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

// WhoAmI verifies token with the api.
func (c *Client) WhoAmI(ctx context.Context, token string) (Identity, error) {
	id, err := Decode[api.WhoAmI](c.gen.Whoami(ctx, As(token, "")...))
	return Identity{Name: id.Name, Role: string(id.Role)}, err
}

// PathEscape escapes one path segment (an entity ref such as lxc:jellyfin).
func PathEscape(s string) string { return url.PathEscape(s) }

// WaitEnd blocks until execution id is terminal: it follows the api's log stream
// (GET /api/v1/executions/{id}/logs/stream), skipping the output, until its `end` event. It
// returns ctx's error when ctx ends first. Following the stream instead of polling answers as
// soon as the scheduler records the end.
func (c *Client) WaitEnd(ctx context.Context, token, correlation, id string) error {
	u := c.base + "/api/v1/executions/" + url.PathEscape(id) + "/logs/stream?after=" + skipChunks
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if correlation != "" {
		req.Header.Set("X-Correlation-ID", correlation)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("api unreachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return &Error{api.ProblemOf(resp.StatusCode, raw)}
	}
	events := sse.NewReader(resp.Body, 4<<20)
	for {
		e, err := events.Next()
		switch {
		case err == nil && e.Name == "end":
			return nil
		case err == nil:
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, io.EOF):
			return fmt.Errorf("execution %s stream ended before the execution did", id)
		default:
			return fmt.Errorf("execution %s stream: %w", id, err)
		}
	}
}

// skipChunks is the largest chunk sequence the api accepts: a stream opened after it sends
// no output, only the end.
const skipChunks = "2147483647"

package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport adds the Authorization header to every request of an MCP client.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// mcpHTTP is the HTTP transport of the Go SDK clients: loopback, never a proxy.
var mcpHTTP = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}

// dial connects the official Go SDK client to the agent's /mcp with token ("" sends none).
func (s *stack) dial(ctx context.Context, token string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "oikos-e2e-go", Version: "0.0.0"}, nil)
	return client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   s.mcpURL,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token, base: mcpHTTP}},
		MaxRetries: -1,
	}, nil)
}

// connect is dial that fails the test on error and closes the session when the test ends.
func (s *stack) connect(tb testing.TB, token string) *mcp.ClientSession {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := s.dial(ctx, token)
	if err != nil {
		tb.Fatalf("connect to %s: %v", s.mcpURL, err)
	}
	if cs.ID() == "" {
		tb.Fatalf("the agent gave the MCP session no id")
	}
	tb.Cleanup(func() { _ = cs.Close() })
	return cs
}

// result is a tool result as the tests read it.
type result struct {
	IsError bool
	Text    string
	Meta    map[string]any
}

// JSON decodes the result's text into v, failing the test when it is not JSON.
func (r result) JSON(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal([]byte(r.Text), v); err != nil {
		tb.Fatalf("result is not JSON (%v): %s", err, r.Text)
	}
}

// callRaw calls a tool; a protocol error (not a tool error) is returned as err.
func callRaw(ctx context.Context, cs *mcp.ClientSession, name string, args any) (result, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return result{}, err
	}
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return result{IsError: res.IsError, Text: b.String(), Meta: res.Meta}, nil
}

// call calls a tool and fails the test on a protocol error; tool errors are the caller's.
func call(tb testing.TB, cs *mcp.ClientSession, name string, args any) result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := callRaw(ctx, cs, name, args)
	if err != nil {
		tb.Fatalf("tools/call %s: protocol error %v (a tool failure must be a result with isError)", name, err)
	}
	return r
}

// mustCall calls a tool that must succeed.
func mustCall(tb testing.TB, cs *mcp.ClientSession, name string, args any) result {
	tb.Helper()
	r := call(tb, cs, name, args)
	if r.IsError {
		tb.Fatalf("%s %v: tool error: %s", name, args, r.Text)
	}
	return r
}

// mustFail calls a tool that must answer a tool error whose text holds every one of want.
func mustFail(tb testing.TB, cs *mcp.ClientSession, name string, args any, want ...string) result {
	tb.Helper()
	r := call(tb, cs, name, args)
	if !r.IsError {
		tb.Fatalf("%s %v: want a tool error, got: %s", name, args, r.Text)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(r.Text), strings.ToLower(w)) {
			tb.Errorf("%s %v: the error does not say %q: %s", name, args, w, r.Text)
		}
	}
	return r
}

// listTools lists every tool the session is offered.
func listTools(tb testing.TB, cs *mcp.ClientSession) []*mcp.Tool {
	tb.Helper()
	var out []*mcp.Tool
	for t, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			tb.Fatalf("tools/list: %v", err)
		}
		out = append(out, t)
	}
	return out
}

// goodPlan is a plan the task model accepts: research first, write-back last.
var goodPlan = []string{
	"Inspect the current state read-only (knowledge, health, logs)",
	"Apply the change",
	"Write back: record the findings with upsert_knowledge",
}

// startTask sets a goal and proposes goodPlan in a session.
func startTask(tb testing.TB, cs *mcp.ClientSession, goal string) {
	tb.Helper()
	mustCall(tb, cs, "set_goal", map[string]any{"goal": goal})
	mustCall(tb, cs, "propose_plan", map[string]any{"steps": goodPlan})
}

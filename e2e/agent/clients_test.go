package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
)

// TestGoClient: the official Go SDK client connects over HTTP, lists every tool, reads an
// entity, runs a read-only command that answers with labsim's real output, and survives a
// tool error.
func TestGoClient(t *testing.T) {
	t.Parallel()
	s := lab(t)
	cs := s.connect(t, s.mcpAgent)
	if v := cs.InitializeResult().ProtocolVersion; v == "" {
		t.Fatal("no protocol version negotiated")
	}
	names := toolNames(listTools(t, cs))
	if !slices.Equal(names, sortedTools()) {
		t.Errorf("tools/list offered %v\nwant %v", names, sortedTools())
	}

	var e struct {
		Slug, Type string
		Attributes map[string]any
	}
	mustCall(t, cs, "get_entity", map[string]any{"ref": "lxc:jellyfin"}).JSON(t, &e)
	if e.Slug != "lxc:jellyfin" || e.Type != "lxc" || e.Attributes["hostname"] != "jellyfin" {
		t.Errorf("get_entity lxc:jellyfin answered %+v", e)
	}

	var ex execution
	mustCall(t, cs, "run", map[string]any{"target": "lxc:jellyfin", "command": "hostname", "purpose": "e2e: Go client"}).JSON(t, &ex)
	if ex.Status != "completed" || ex.ExitCode == nil || *ex.ExitCode != 0 || ex.Output != "jellyfin\n" || ex.RiskClass != "read_only" {
		t.Errorf("run hostname on lxc:jellyfin answered %+v; want completed, exit 0, output %q from labsim", ex, "jellyfin\n")
	}
	recorded := s.executions(t, cs.ID())
	if len(recorded) != 1 || recorded[0].ID != ex.ID || recorded[0].RequestedBy != mcpAgentName ||
		recorded[0].SessionID == nil || *recorded[0].SessionID != cs.ID() {
		t.Errorf("the api recorded %+v for session %s; want the one execution, requested by %s", recorded, cs.ID(), mcpAgentName)
	}

	// A tool error is a result with isError; the session goes on.
	mustFail(t, cs, "get_entity", map[string]any{"ref": "lxc:no-such-guest"}, "404")
	var ping struct{ Session, Caller, Role string }
	mustCall(t, cs, "ping", nil).JSON(t, &ping)
	if ping.Session != cs.ID() || ping.Caller != mcpAgentName || ping.Role != "agent" {
		t.Errorf("ping after a tool error answered %+v; want session %s, caller %s", ping, cs.ID(), mcpAgentName)
	}
}

// TestUnauthorized: no token and a bad token get 401 (problem JSON with WWW-Authenticate)
// before the MCP server sees the request; a session cannot be ridden with another token.
func TestUnauthorized(t *testing.T) {
	t.Parallel()
	s := lab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for name, token := range map[string]string{"no token": "", "bad token": "oik_not-a-token-the-api-ever-issued-000000"} {
		if cs, err := s.dial(ctx, token); err == nil {
			_ = cs.Close()
			t.Errorf("%s: the Go SDK client connected", name)
		} else if !strings.Contains(err.Error(), "Unauthorized") {
			t.Errorf("%s: connect failed with %v; want Unauthorized", name, err)
		}
		st, hdr, body := rawMCP(t, s.mcpURL, token, "", initializeBody)
		if st != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") ||
			hdr.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s: POST /mcp answered %d %v %s; want 401 problem JSON with WWW-Authenticate", name, st, hdr, body)
		}
	}

	// The SDK binds a session to the token's name: the readonly token cannot use the agent
	// token's session (and so cannot borrow its tools or its approval windows).
	cs := s.connect(t, s.mcpAgent)
	st, _, body := rawMCP(t, s.mcpURL, s.readonly, cs.ID(),
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_entity","arguments":{"type":"service","name":"e2e-hijack"}}}`)
	if st != http.StatusForbidden {
		t.Errorf("a readonly token on an agent token's session: %d %s; want 403", st, body)
	}
	if st, _ := e2estack.Answer(t, nil)(s.client.API(t, s.operator).GetEntity(t.Context(), "service:e2e-hijack")); st != http.StatusNotFound {
		t.Errorf("service:e2e-hijack exists (%d): the hijacked call ran", st)
	}
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// rawMCP posts one JSON-RPC message to /mcp.
func rawMCP(t *testing.T, endpoint, token, sessionID, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, b.String()
}

// TestReadonlyToken: a readonly token is offered only the read tools (readOnlyHint true), and
// every mutating tool answers it a permission error as a tool result; nothing is recorded.
func TestReadonlyToken(t *testing.T) {
	t.Parallel()
	s := lab(t)
	ro := s.connect(t, s.readonly)
	offered := listTools(t, ro)
	for _, tool := range offered {
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("a readonly token is offered %s, which is not read-only", tool.Name)
		}
	}
	if got, want := toolNames(offered), readTools(); !slices.Equal(got, want) {
		t.Errorf("a readonly token is offered %v\nwant the read tools %v", got, want)
	}
	for _, name := range mutatingTools {
		mustFail(t, ro, name, minimalArgs[name], "permission denied")
	}
	// The refusals wrote nothing: no execution, no audit row, no session, no call record.
	if n := len(s.executions(t, ro.ID())); n != 0 {
		t.Errorf("the readonly session queued %d executions", n)
	}
	for _, a := range s.audit(t, ro.ID()) {
		t.Errorf("a refused call of the readonly session left an audit row: %+v", a)
	}
	if n := s.toolCallCount(t, ro.ID()); n != 0 {
		t.Errorf("refused calls left %d tool_calls rows", n)
	}
	// A read tool works in the same session; it opens the agent's record of the session (in
	// the readonly token's name) and writes nothing through the api.
	mustCall(t, ro, "get_entity", map[string]any{"ref": "lxc:jellyfin"})
	for _, a := range s.audit(t, ro.ID()) {
		if a.Actor != readonlyName || a.Action != "task.open" {
			t.Errorf("the readonly session's read left audit row %+v; want only the agent's task.open in its name", a)
		}
	}
}

// TestTypeScriptClient: the official TypeScript SDK (e2e/mcpclient-ts, run with node) sees
// the same endpoint the same way.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	s := lab(t)
	node, dir := nodeClient(t)

	t.Run("agent token", func(t *testing.T) {
		t.Parallel()
		out := runTS(t, node, dir, s.mcpURL, s.mcpAgent, []tsCall{
			{Name: "get_entity", Arguments: map[string]any{"ref": "lxc:jellyfin"}},
			{Name: "run", Arguments: map[string]any{"target": "lxc:jellyfin", "command": "uptime", "purpose": "e2e: TypeScript client"}},
			{Name: "get_entity", Arguments: map[string]any{"ref": "lxc:no-such-guest"}},
			{Name: "ping", Arguments: map[string]any{}},
		})
		if out.SessionID == "" {
			t.Fatal("the TypeScript client got no session id")
		}
		t.Logf("TypeScript SDK: protocol %s, server %v, session %s", out.ProtocolVersion, out.Server, out.SessionID)
		var names []string
		for _, tool := range out.Tools {
			names = append(names, tool.Name)
			if tool.Description == "" || tool.InputSchemaType != "object" || tool.Annotations == nil {
				t.Errorf("TypeScript client sees %s as %+v", tool.Name, tool)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, sortedTools()) {
			t.Errorf("TypeScript client listed %v\nwant %v", names, sortedTools())
		}
		c := out.calls(t, 4)
		var e struct{ Slug string }
		c[0].ok(t).json(t, &e)
		if e.Slug != "lxc:jellyfin" {
			t.Errorf("get_entity answered %s", c[0].Text)
		}
		var ex execution
		c[1].ok(t).json(t, &ex)
		if ex.Status != "completed" || ex.ExitCode == nil || *ex.ExitCode != 0 || !uptimeRE.MatchString(ex.Output) {
			t.Errorf("run uptime answered %+v; want labsim's uptime line", ex)
		}
		if !c[2].IsError || !strings.Contains(c[2].Text, "404") {
			t.Errorf("get_entity of a missing guest: %+v; want a tool error naming the 404", c[2])
		}
		var ping struct{ Session, Caller string }
		c[3].ok(t).json(t, &ping)
		if ping.Session != out.SessionID || ping.Caller != mcpAgentName {
			t.Errorf("ping after the tool error answered %s", c[3].Text)
		}
		if ex := s.executions(t, out.SessionID); len(ex) != 1 || ex[0].RequestedBy != mcpAgentName {
			t.Errorf("the api recorded %+v for the TypeScript session", ex)
		}
	})

	t.Run("readonly token", func(t *testing.T) {
		t.Parallel()
		out := runTS(t, node, dir, s.mcpURL, s.readonly, []tsCall{
			{Name: "create_entity", Arguments: minimalArgs["create_entity"]},
			{Name: "run", Arguments: minimalArgs["run"]},
			{Name: "list_lxcs", Arguments: map[string]any{}},
		})
		var names []string
		for _, tool := range out.Tools {
			names = append(names, tool.Name)
			if tool.Annotations == nil || tool.Annotations["readOnlyHint"] != true {
				t.Errorf("a readonly token is offered %s with annotations %v", tool.Name, tool.Annotations)
			}
		}
		slices.Sort(names)
		if !slices.Equal(names, readTools()) {
			t.Errorf("a readonly token is offered %v\nwant %v", names, readTools())
		}
		c := out.calls(t, 3)
		for _, r := range c[:2] {
			if !r.IsError || !strings.Contains(r.Text, "permission denied") {
				t.Errorf("%s with a readonly token: %+v; want a permission error as a tool result", r.Name, r)
			}
		}
		c[2].ok(t)
	})

	for name, token := range map[string]string{"no token": "", "bad token": "oik_not-a-token-the-api-ever-issued-000000"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := runTS(t, node, dir, s.mcpURL, token, nil)
			if out.OK || out.ConnectError == nil || out.ConnectError.Code == nil || *out.ConnectError.Code != http.StatusUnauthorized {
				t.Errorf("%s: the TypeScript client saw %+v; want a 401 on connect", name, out)
			}
		})
	}
}

var uptimeRE = regexp.MustCompile(`^ \d\d:\d\d:\d\d up .+load average: `)

// nodeClient finds node and the installed TypeScript SDK; either missing fails the test (CI
// installs them with scripts/test-deps.sh).
func nodeClient(t *testing.T) (node, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not on PATH: the TypeScript MCP client test needs Node 20 or later (%v)", err)
	}
	dir, err = filepath.Abs(filepath.Join("..", "mcpclient-ts"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		t.Fatalf("the TypeScript MCP SDK is not installed in %s: run scripts/test-deps.sh "+
			"(npm ci --prefix e2e/mcpclient-ts --no-audit --no-fund): %v", dir, err)
	}
	return node, dir
}

type tsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

type tsResult struct {
	Name          string `json:"name"`
	IsError       bool   `json:"is_error"`
	Text          string `json:"text"`
	ProtocolError *struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	} `json:"protocol_error"`
}

func (r tsResult) ok(t *testing.T) tsResult {
	t.Helper()
	if r.ProtocolError != nil || r.IsError {
		t.Fatalf("TypeScript client: %s failed: %+v", r.Name, r)
	}
	return r
}

func (r tsResult) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Text), v); err != nil {
		t.Fatalf("%s answered non-JSON %q: %v", r.Name, r.Text, err)
	}
}

type tsOutput struct {
	OK              bool   `json:"ok"`
	SessionID       string `json:"session_id"`
	ProtocolVersion string `json:"protocol_version"`
	Server          any    `json:"server"`
	Tools           []struct {
		Name            string         `json:"name"`
		Description     string         `json:"description"`
		InputSchemaType string         `json:"input_schema_type"`
		Annotations     map[string]any `json:"annotations"`
	} `json:"tools"`
	Calls        []tsResult `json:"calls"`
	ConnectError *struct {
		Code    *int   `json:"code"`
		Message string `json:"message"`
	} `json:"connect_error"`
}

func (o tsOutput) calls(t *testing.T, n int) []tsResult {
	t.Helper()
	if !o.OK || len(o.Calls) != n {
		t.Fatalf("TypeScript client: %+v; want %d call results", o, n)
	}
	for _, c := range o.Calls {
		if c.ProtocolError != nil {
			t.Errorf("TypeScript client: %s was a protocol error %+v; a tool failure must be a result with isError", c.Name, *c.ProtocolError)
		}
	}
	return o.Calls
}

// runTS runs e2e/mcpclient-ts/client.mjs against endpoint and decodes what it printed.
func runTS(t *testing.T, node, dir, endpoint, token string, calls []tsCall) tsOutput {
	t.Helper()
	if calls == nil {
		calls = []tsCall{}
	}
	cj, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OIKOS_MCP_URL="+endpoint, "OIKOS_MCP_TOKEN="+token, "OIKOS_MCP_CALLS="+string(cj))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client.mjs: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	var out tsOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node client.mjs printed %q (stderr %q): %v", stdout.String(), stderr.String(), err)
	}
	return out
}

package agent_test

import (
	"context"
	"strings"
	"testing"
)

// TestBadInput: an unknown tool, wrong argument types, missing required fields, oversized
// arguments and a session named in the arguments are each a clear tool error (isError, not a
// protocol error), and nothing is written: no execution, no audit row, not even the session.
func TestBadInput(t *testing.T) {
	t.Parallel()
	s := lab(t)
	cs := s.connect(t, s.mcpAgent)
	const injected = "e2e-injected-session"
	big := strings.Repeat("x", 65<<10)
	cases := []struct {
		name, tool string
		args       map[string]any
		want       []string
	}{
		{"unknown tool", "no_such_tool", map[string]any{}, []string{"unknown tool", "no_such_tool"}},
		{"wrong type", "run", map[string]any{"target": 42, "command": "hostname", "purpose": "e2e"}, []string{"target", "integer", "string"}},
		{"wrong type (read tool)", "get_entity", map[string]any{"ref": 42}, []string{"ref", "string"}},
		{"missing required", "run", map[string]any{"target": "lxc:jellyfin"}, []string{"missing", "command", "purpose"}},
		{"missing required (read tool)", "get_entity", map[string]any{}, []string{"missing", "ref"}},
		{"missing required (task tool)", "set_goal", map[string]any{}, []string{"missing", "goal"}},
		{"oversized", "run", map[string]any{"target": "lxc:jellyfin", "command": big, "purpose": "e2e"}, []string{"bytes", "limit is 65536"}},
		{"oversized (write tool)", "upsert_knowledge", map[string]any{"title": "big", "content": big}, []string{"limit is 65536"}},
		{"session in the arguments", "run", map[string]any{"target": "lxc:jellyfin", "command": "hostname", "purpose": "e2e", "session_id": injected},
			[]string{"additional properties", "session_id"}},
		{"_session_id in the arguments", "run", map[string]any{"target": "lxc:jellyfin", "command": "hostname", "purpose": "e2e", "_session_id": injected},
			[]string{"additional properties", "_session_id"}},
		{"session in a task tool's arguments", "set_goal", map[string]any{"goal": "hijack", "session_id": injected},
			[]string{"additional properties", "session_id"}},
	}
	for _, c := range cases {
		r, err := callRaw(context.Background(), cs, c.tool, c.args)
		if err != nil {
			t.Errorf("%s: protocol error %v; want a tool error", c.name, err)
			continue
		}
		if !r.IsError {
			t.Errorf("%s: %s answered %s; want a tool error", c.name, c.tool, r.Text)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.Text, w) {
				t.Errorf("%s: the error does not say %q: %s", c.name, w, r.Text)
			}
		}
	}
	for _, sess := range []string{cs.ID(), injected} {
		if got := s.executions(t, sess); len(got) != 0 {
			t.Errorf("refused calls queued executions for session %s: %+v", sess, got)
		}
		if got := s.audit(t, sess); len(got) != 0 {
			t.Errorf("refused calls left audit rows for %s: %+v", sess, got)
		}
	}
	if n := s.toolCallCount(t, cs.ID()); n != 0 {
		t.Errorf("refused calls left %d tool_calls rows", n)
	}
	// The session survives all of it.
	var ping struct{ Session string }
	mustCall(t, cs, "ping", nil).JSON(t, &ping)
	if ping.Session != cs.ID() {
		t.Errorf("ping answered session %q; want %q", ping.Session, cs.ID())
	}
}

// TestHTTPGetGuard: http_get goes through the fetch guard, which refuses private, loopback
// and metadata addresses in every spelling (webfetch's own tests cover the guard in depth).
func TestHTTPGetGuard(t *testing.T) {
	t.Parallel()
	s := lab(t)
	cs := s.connect(t, s.mcpAgent)
	for _, u := range []string{
		"http://127.0.0.1/",
		"http://[::ffff:127.0.0.1]/",
		"http://2130706433/",
		"http://0177.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://localhost/",
	} {
		r := mustFail(t, cs, "http_get", map[string]any{"url": u}, "refused:", "OIKOS_HTTP_GET_ALLOW")
		if !strings.Contains(r.Text, "loopback") && !strings.Contains(r.Text, "metadata") {
			t.Errorf("http_get %s: %s; want the guard to name the address class", u, r.Text)
		}
	}
	mustCall(t, cs, "ping", nil)
}

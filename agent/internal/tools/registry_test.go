package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The full tool list of docs/behaviours.md A9, plus get_execution and wait_execution.
var wantTools = []string{
	"run", "classify_command", "request_execution", "get_execution", "wait_execution", "http_get", "search_knowledge",
	"get_entity_knowledge", "get_knowledge_content", "upsert_knowledge", "create_entity", "update_entity_attributes",
	"set_entity_state", "create_relationship", "end_relationship", "get_entity", "list_entities", "get_relations",
	"get_health_summary", "get_state_snapshot", "list_lxcs", "get_blast_radius", "query_metrics", "get_trend",
	"get_event_timeline", "list_checks", "ping", "ping_service", "inspect_path", "audit_knowledge_graph",
	"discover_infra_drift", "set_goal", "propose_plan", "update_plan_step", "complete_task", "ask_operator", "list_secrets", "get_output",
}

func newTestRegistry(t *testing.T) *Registry {
	t.Helper()
	r, err := New(Deps{Log: zerolog.Nop()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryShape(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	var names []string
	chars := 0
	for _, tool := range r.All() {
		names = append(names, tool.Name)
		words := len(strings.Fields(strings.SplitN(tool.Description, ".", 2)[0]))
		if words < 6 || words > 22 {
			t.Errorf("%s: the description's first sentence has %d words: %q", tool.Name, words, tool.Description)
		}
		var s map[string]any
		if err := json.Unmarshal(tool.Schema, &s); err != nil || s["type"] != "object" {
			t.Errorf("%s: schema %s", tool.Name, tool.Schema)
		}
		if props, _ := s["properties"].(map[string]any); props["session_id"] != nil || props["_session_id"] != nil {
			t.Errorf("%s: the session is an argument", tool.Name)
		}
		if tool.Render == "" {
			t.Errorf("%s: no renderer hint", tool.Name)
		}
		chars += len(tool.Name) + len(tool.Description) + len(tool.Schema)
	}
	slices.Sort(names)
	want := slices.Clone(wantTools)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Fatalf("tools:\n got %v\nwant %v", names, want)
	}
	// The whole registry goes into every model request: keep it small (issue budget 6k tokens,
	// estimated as characters / 4).
	if tokens := chars / 4; tokens > 6000 {
		t.Fatalf("tool schemas: ~%d tokens, budget 6000", tokens)
	} else {
		t.Logf("tool schemas: %d chars, ~%d tokens", chars, tokens)
	}
	// A readonly token sees only read tools, and every tool that changes anything is hidden.
	for _, tool := range r.For(RoleReadonly) {
		if !tool.Hints.ReadOnly {
			t.Errorf("readonly sees %s", tool.Name)
		}
	}
	if len(r.For(RoleReadonly)) == len(r.All()) || len(r.For(RoleAgent)) != len(r.All()) {
		t.Fatalf("role filter: readonly %d, agent %d, all %d", len(r.For(RoleReadonly)), len(r.For(RoleAgent)), len(r.All()))
	}
}

// Bad input is refused before anything is read or written (the registry here has no database
// at all: reaching it would panic, which Call turns into a different error).
func TestBadInput(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t)
	caller := Caller{Session: "s1", Token: "t", Actor: "a", Role: RoleAgent, Source: "mcp"}
	big := `{"target":"lxc:a","command":"` + strings.Repeat("x", MaxArgumentBytes) + `","purpose":"p"}`
	for _, tc := range []struct{ tool, args, want string }{
		{"no_such_tool", `{}`, "unknown tool"},
		{"run", `{"target":42,"command":"ls","purpose":"p"}`, "target"},
		{"run", `{"command":"ls","purpose":"p"}`, "target"},
		{"run", `{"target":"lxc:a","command":"ls","purpose":"p","_session_id":"other"}`, "_session_id"},
		{"run", `{"target":"lxc:a","command":"ls","purpose":"p","session_id":"other"}`, "session_id"},
		{"run", `{"target":"lxc:a","command":"ls","purpose":"p","declared_risk":"harmless"}`, "declared_risk"},
		{"run", big, "limit"},
		{"run", `[1,2]`, "object"},
		{"run", `{"target":`, "JSON"},
		{"propose_plan", `{"steps":"one"}`, "steps"},
		{"complete_task", `{"outcome":"great","summary":"s"}`, "outcome"},
		{"inspect_path", `{"path":"/a","targets":["1","2","3","4","5","6","7","8","9"]}`, "targets"},
	} {
		res := r.Call(context.Background(), caller, tc.tool, json.RawMessage(tc.args))
		if !res.IsError || !strings.Contains(res.Text, tc.want) || strings.Contains(res.Text, "unexpectedly") {
			t.Errorf("%s %.80s: %v %q, want an error naming %q", tc.tool, tc.args, res.IsError, res.Text, tc.want)
		}
	}
	// A readonly caller cannot reach a mutating tool, whatever the arguments.
	ro := caller
	ro.Role = RoleReadonly
	res := r.Call(context.Background(), ro, "set_goal", json.RawMessage(`{"goal":"x"}`))
	if !res.IsError || !strings.Contains(res.Text, "permission denied") {
		t.Fatalf("readonly set_goal: %+v", res)
	}
	// No session, no call.
	res = r.Call(context.Background(), Caller{Role: RoleAgent}, "ping", nil)
	if !res.IsError || !strings.Contains(res.Text, "session") {
		t.Fatalf("no session: %+v", res)
	}
}

func TestSnapshotSize(t *testing.T) {
	t.Parallel()
	var h HealthSummary
	h.Counts = map[string]int{"up": 70, "degraded": 10, "down": 12, "unknown": 8}
	for i := 0; i < 100; i++ {
		health := []string{"up", "degraded", "down", "unknown"}[i%4]
		h.Entities = append(h.Entities, struct {
			Slug   string `json:"slug"`
			Type   string `json:"type"`
			Health string `json:"health"`
			Reason string `json:"reason"`
		}{Slug: "lxc:service-number-" + strings.Repeat("x", 10), Type: "lxc", Health: health,
			Reason: "http check: connection refused after 3 attempts to the ingress on port 443 " + strings.Repeat("y", 40)})
	}
	s := Snapshot(h)
	if len(s) > 2048 {
		t.Fatalf("snapshot of 100 entities is %d bytes: %s", len(s), s)
	}
	var m map[string]any
	if err := json.Unmarshal(s, &m); err != nil || m["more"] == nil {
		t.Fatalf("snapshot: %s", s)
	}
	t.Logf("snapshot at 100 entities (75 needing attention): %d bytes", len(s))
}

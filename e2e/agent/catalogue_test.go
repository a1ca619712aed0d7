package agent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
)

// allTools is the agent's whole tool set, as the issue names it.
var allTools = []string{
	"run", "classify_command", "request_execution", "get_execution", "wait_execution", "http_get",
	"search_knowledge", "get_entity_knowledge", "get_knowledge_content", "upsert_knowledge",
	"create_entity", "update_entity_attributes", "set_entity_state", "create_relationship", "end_relationship",
	"get_entity", "list_entities", "get_relations", "get_health_summary", "get_state_snapshot", "list_lxcs",
	"get_blast_radius", "query_metrics", "get_trend", "get_event_timeline", "list_checks", "ping", "ping_service",
	"inspect_path", "audit_knowledge_graph", "discover_infra_drift", "set_goal", "propose_plan", "update_plan_step",
	"complete_task", "ask_operator", "list_secrets", "get_output",
}

// mutatingTools are the tools that can change anything (readOnlyHint false): the safety
// matrix calls each, and a readonly token is offered none.
var mutatingTools = []string{
	"run", "request_execution", "upsert_knowledge", "create_entity", "update_entity_attributes", "set_entity_state",
	"create_relationship", "end_relationship", "set_goal", "propose_plan", "update_plan_step", "complete_task",
	"ask_operator",
}

// minimalArgs are valid arguments for each mutating tool (a readonly token's calls must fail
// on the permission, not on the arguments).
var minimalArgs = map[string]map[string]any{
	"run":                      {"target": "lxc:jellyfin", "command": "systemctl restart jellyfin", "purpose": "e2e: readonly attempt"},
	"request_execution":        {"action": "systemctl", "target": "lxc:jellyfin", "params": map[string]any{"verb": "restart", "unit": "jellyfin.service"}, "purpose": "e2e"},
	"upsert_knowledge":         {"title": "readonly attempt", "content": "must not be written"},
	"create_entity":            {"type": "service", "name": "e2e-readonly-attempt"},
	"update_entity_attributes": {"ref": "lxc:jellyfin", "attributes": map[string]any{"cores": 8}},
	"set_entity_state":         {"ref": "lxc:jellyfin", "state": "maintenance"},
	"create_relationship":      {"source": "service:jellyfin", "target": "lxc:sonarr", "type": "runs-on"},
	"end_relationship":         {"id": "00000000-0000-7000-8000-000000000000"},
	"set_goal":                 {"goal": "readonly attempt"},
	"propose_plan":             {"steps": goodPlan},
	"update_plan_step":         {"step": 1, "status": "running"},
	"complete_task":            {"outcome": "success", "summary": "readonly attempt"},
	"ask_operator":             {"question": "readonly attempt?"},
}

func sortedTools() []string { return slices.Sorted(slices.Values(allTools)) }

// readTools are allTools without mutatingTools, sorted.
func readTools() []string {
	var out []string
	for _, n := range allTools {
		if !slices.Contains(mutatingTools, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

func toolNames(tools []*mcp.Tool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

// TestToolCatalogue: every tool has a description, an object input schema and annotations,
// and the set is exactly the issue's; the tools that are not read-only are exactly
// mutatingTools.
func TestToolCatalogue(t *testing.T) {
	t.Parallel()
	s := lab(t)
	tools := listTools(t, s.connect(t, s.mcpAgent))
	if got := toolNames(tools); !slices.Equal(got, sortedTools()) {
		t.Fatalf("tools/list: %v\nwant %v", got, sortedTools())
	}
	var mutating []string
	for _, tool := range tools {
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		var schema map[string]any
		b, err := json.Marshal(tool.InputSchema)
		if err != nil || json.Unmarshal(b, &schema) != nil {
			t.Errorf("%s: input schema %s is not a JSON object", tool.Name, b)
		} else if schema["type"] != "object" {
			t.Errorf("%s: input schema type %v, want object", tool.Name, schema["type"])
		}
		a := tool.Annotations
		if a == nil {
			t.Errorf("%s has no annotations", tool.Name)
			continue
		}
		if a.DestructiveHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s: annotations %+v leave destructiveHint or openWorldHint unset", tool.Name, *a)
		}
		if !a.ReadOnlyHint {
			mutating = append(mutating, tool.Name)
		}
	}
	if want := slices.Sorted(slices.Values(mutatingTools)); !slices.Equal(mutating, want) {
		t.Errorf("tools with readOnlyHint false: %v\nwant %v", mutating, want)
	}
}

// Budgets of what a client's context pays for the agent (the goals).
const (
	schemaTokenBudget   = 6000
	snapshotByteBudget  = 2048
	snapshotMinEntities = 100
)

// schemaTokens is the size of every tool's definition in tokens: the sum over tools of
// len(name)+len(description)+len(input schema JSON) characters, divided by 4.
func schemaTokens(tb testing.TB, tools []*mcp.Tool) (tokens, chars int) {
	tb.Helper()
	for _, tool := range tools {
		b, err := json.Marshal(tool.InputSchema)
		if err != nil {
			tb.Fatal(err)
		}
		chars += len(tool.Name) + len(tool.Description) + len(b)
	}
	return chars / 4, chars
}

func TestToolSchemaBudget(t *testing.T) {
	t.Parallel()
	s := lab(t)
	tools := listTools(t, s.connect(t, s.mcpAgent))
	tokens, chars := schemaTokens(t, tools)
	t.Logf("tool schemas: %d tools, %d characters, about %d tokens (budget %d)", len(tools), chars, tokens, schemaTokenBudget)
	if tokens > schemaTokenBudget {
		t.Errorf("the tool schemas cost about %d tokens; the budget is %d", tokens, schemaTokenBudget)
	}
}

// fleetAtLeast makes sure the health summary lists at least n entities, creating monitored
// services through the api when the seeded fleet has fewer, and returns how many it lists.
func (s *stack) fleetAtLeast(tb testing.TB, n int) (listed, created int) {
	tb.Helper()
	op := s.client.API(tb, s.operator)
	summary := func() int {
		var h struct {
			Entities []json.RawMessage `json:"entities"`
		}
		e2estack.OK(tb, &h)(op.HealthSummary(tb.Context(), nil))
		return len(h.Entities)
	}
	listed = summary()
	for i := 0; listed < n && i < 2*n; i++ {
		name := fmt.Sprintf("e2e-fill-%03d", i)
		if st, _ := e2estack.Answer(tb, nil)(op.GetEntity(tb.Context(), "service:"+name)); st == http.StatusOK {
			continue
		}
		e2estack.OK(tb, nil)(op.CreateEntity(tb.Context(), nil, apiclient.CreateEntity{Type: "service", Name: name,
			Attributes: &apiclient.Attributes{"unit": name + ".service"}}))
		created++
		listed = summary()
	}
	if listed < n {
		tb.Fatalf("the health summary lists %d entities; want at least %d", listed, n)
	}
	return listed, created
}

// snapshotBytes is the size of get_state_snapshot's answer over MCP.
func snapshotBytes(tb testing.TB, s *stack) int {
	tb.Helper()
	cs := s.connect(tb, s.readonly)
	r := mustCall(tb, cs, "get_state_snapshot", nil)
	var snap struct {
		Counts    map[string]int   `json:"counts"`
		Attention []map[string]any `json:"attention"`
	}
	r.JSON(tb, &snap)
	if len(snap.Counts) == 0 {
		tb.Fatalf("get_state_snapshot has no counts: %s", r.Text)
	}
	return len(r.Text)
}

func TestStateSnapshotSize(t *testing.T) {
	t.Parallel()
	s := lab(t)
	listed, created := s.fleetAtLeast(t, snapshotMinEntities)
	n := snapshotBytes(t, s)
	t.Logf("get_state_snapshot: %d bytes at %d entities (%d created for the test; budget %d bytes)", n, listed, created, snapshotByteBudget)
	if n > snapshotByteBudget {
		t.Errorf("get_state_snapshot is %d bytes at %d entities; the budget is %d", n, listed, snapshotByteBudget)
	}
}

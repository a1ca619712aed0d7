package agent_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	e2estack "github.com/oikos-hq/oikos/e2e/internal/stack"
	"github.com/oikos-hq/oikos/shared/apiclient"
)

func randomSuffix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// TestMutatingToolsReachTheAPI: every tool that can change anything, called over MCP, lands
// at the api's gate or at a validated api endpoint in the caller's own name, or (the task
// tools) in the agent's task record in the caller's name. The audit log of the session names
// only the MCP caller's token; executions are requested_by it; the agent's database role
// cannot write any api table at all.
func TestMutatingToolsReachTheAPI(t *testing.T) {
	t.Parallel()
	s := lab(t)
	cs := s.connect(t, s.mcpAgent)
	sid := cs.ID()
	svc := "service:e2e-matrix-" + randomSuffix()
	var relID string

	type step struct {
		tool string
		args func() map[string]any
		// want are audit actions the call must add. Actions the api writes must carry the
		// HTTP method and path that reached it; the agent's task actions (task.*) carry none.
		want  []string
		after func(result)
	}
	steps := []step{
		{"set_goal", func() map[string]any {
			return map[string]any{"goal": "e2e safety matrix: call every mutating tool about lxc:jellyfin"}
		}, []string{"task.open", "entity.create", "task.goal"}, nil},
		{"propose_plan", func() map[string]any { return map[string]any{"steps": goodPlan} }, []string{"task.plan"}, nil},
		{"update_plan_step", func() map[string]any { return map[string]any{"step": 1, "status": "running"} }, []string{"task.step"}, nil},
		{"create_entity", func() map[string]any {
			return map[string]any{"type": "service", "name": strings.TrimPrefix(svc, "service:"),
				"attributes": map[string]any{"unit": "e2e-matrix.service"}}
		}, []string{"entity.create"}, nil},
		{"update_entity_attributes", func() map[string]any {
			return map[string]any{"ref": svc, "attributes": map[string]any{"version": "1.2.3"}}
		}, []string{"entity.update"}, nil},
		{"set_entity_state", func() map[string]any { return map[string]any{"ref": svc, "state": "maintenance"} },
			[]string{"entity.state"}, nil},
		{"create_relationship", func() map[string]any {
			return map[string]any{"source": svc, "target": "lxc:jellyfin", "type": "runs-on"}
		}, []string{"relationship.create"}, func(r result) {
			var rel struct{ ID string }
			r.JSON(t, &rel)
			relID = rel.ID
		}},
		{"end_relationship", func() map[string]any { return map[string]any{"id": relID} }, []string{"relationship.end"}, nil},
		{"upsert_knowledge", func() map[string]any {
			return map[string]any{"title": "E2E matrix note " + randomSuffix(), "content": "What the matrix learned.", "about": svc}
		}, []string{"knowledge.upsert"}, nil},
		{"run", func() map[string]any {
			return map[string]any{"target": "lxc:jellyfin", "command": "hostname", "purpose": "e2e: safety matrix"}
		}, []string{"execution.request"}, nil},
		{"request_execution", func() map[string]any {
			return map[string]any{"action": "systemctl", "target": "lxc:jellyfin", "purpose": "e2e: safety matrix",
				"params": map[string]any{"verb": "status", "unit": "jellyfin.service"}}
		}, []string{"execution.request"}, nil},
		{"ask_operator", func() map[string]any { return map[string]any{"question": "Anything else on lxc:jellyfin?"} },
			[]string{"task.ask"}, nil},
		{"complete_task", func() map[string]any {
			return map[string]any{"outcome": "success", "summary": "Every mutating tool was called once."}
		}, []string{"task.complete", "entity.state"}, nil},
	}

	covered := map[string]bool{}
	seen := 0
	for _, st := range steps {
		covered[st.tool] = true
		r := mustCall(t, cs, st.tool, st.args())
		if st.after != nil {
			st.after(r)
		}
		rows := s.audit(t, sid)
		added := rows[seen:]
		seen = len(rows)
		var actions []string
		for _, a := range added {
			if a.byRegistrar() {
				continue // the api following an earlier execution, checked below
			}
			actions = append(actions, a.Action)
			if !strings.HasPrefix(a.Action, "task.") && (a.Method == "" || !strings.HasPrefix(a.Path, "/api/v1/")) {
				t.Errorf("%s: audit row %+v did not come through an api endpoint", st.tool, a)
			}
		}
		for _, w := range st.want {
			if !slices.Contains(actions, w) {
				t.Errorf("%s: the audit log of session %s gained %v; want %s among them", st.tool, sid, actions, w)
			}
		}
	}
	for _, tool := range listTools(t, cs) {
		if !tool.Annotations.ReadOnlyHint && !covered[tool.Name] {
			t.Errorf("the matrix does not call %s, which is not read-only", tool.Name)
		}
	}

	// Whoever wrote a row of this session, it was in the MCP caller's name; the one other
	// actor is the api's own Registrar, on the executions' entities.
	rows := s.audit(t, sid)
	if len(rows) < len(steps) {
		t.Fatalf("session %s has %d audit rows for %d mutating calls", sid, len(rows), len(steps))
	}
	for _, a := range rows {
		if a.Actor != mcpAgentName && !a.byRegistrar() {
			t.Errorf("audit row %d (%s) names %q; want the MCP caller %q (never %q or the agent daemon's %q)",
				a.ID, a.Action, a.Actor, mcpAgentName, "agent", agentDaemonName)
		}
	}
	var byActor struct {
		Items []auditRow `json:"items"`
	}
	e2estack.OK(t, &byActor)(s.client.API(t, s.operator).ListAudit(t.Context(),
		&apiclient.ListAuditParams{Actor: apiclient.Ptr(agentDaemonName), Limit: apiclient.Ptr(500)}))
	if len(byActor.Items) != 0 {
		t.Errorf("the agent daemon's own token wrote %d audit rows, e.g. %+v", len(byActor.Items), byActor.Items[0])
	}
	execs := s.executions(t, sid)
	if len(execs) != 2 {
		t.Errorf("session %s has %d executions; want run's and request_execution's", sid, len(execs))
	}
	for _, e := range execs {
		if e.RequestedBy != mcpAgentName {
			t.Errorf("execution %s was requested_by %q; want %q", e.ID, e.RequestedBy, mcpAgentName)
		}
	}
	// The agent's own record of the session, in its own tables: one tool_calls row per call,
	// the plan's steps, the question, what was done.
	if n := s.toolCallCount(t, sid); n != len(steps) {
		t.Errorf("tool_calls holds %d rows for session %s; want %d", n, sid, len(steps))
	}
	for table, want := range map[string]int{"plan_steps": len(goodPlan), "session_questions": 1} {
		var n int
		if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()+
			` WHERE session_id = $1`, sid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != want {
			t.Errorf("%s holds %d rows for session %s; want %d", table, n, sid, want)
		}
	}
	var activity int
	if err := s.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM agent_activity WHERE session_id = $1`, sid).Scan(&activity); err != nil {
		t.Fatal(err)
	}
	if activity < len(steps) {
		t.Errorf("agent_activity holds %d rows for session %s; want one per mutating call (%d)", activity, sid, len(steps))
	}
	if got := s.session(t, sid); got.Status != "completed" || got.Actor != mcpAgentName || got.Source != "mcp" {
		t.Errorf("agent_sessions %s: %+v", sid, got)
	}

	// The agent's database role may not write the api's tables at all.
	conn, err := pgx.Connect(context.Background(), s.agentDBURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, table := range []string{"entities", "relationships", "knowledge_entities", "executions", "approvals", "approval_windows", "api_tokens"} {
		_, err := conn.Exec(context.Background(), `DELETE FROM `+pgx.Identifier{table}.Sanitize()+` WHERE false`)
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("the agent's role may write %s (err %v); want permission denied", table, err)
		}
	}
}

// TestAgentHoldsNoSSH: no package of the agent links an SSH client or the scheduler's remote
// pool, and the agent's SQL names only its own tables.
func TestAgentHoldsNoSSH(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./agent/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./agent/...: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/oikos-hq/oikos/agent/internal/tools") {
		t.Fatalf("go list -deps ./agent/... listed %d packages without the agent's tools", len(deps))
	}
	for _, d := range deps {
		if d == "golang.org/x/crypto/ssh" || strings.HasPrefix(d, "golang.org/x/crypto/ssh/") ||
			d == "github.com/oikos-hq/oikos/shared/remote" || strings.HasPrefix(d, "github.com/oikos-hq/oikos/shared/remote/") {
			t.Errorf("the agent links %s", d)
		}
	}

	writes := regexp.MustCompile(`\b(?:INSERT INTO|UPDATE|DELETE FROM)\s+([a-z_]+)\b`)
	err = filepath.WalkDir(filepath.Join(root, "agent"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range writes.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(agentTables, m[1]) {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s writes %s, which is not one of the agent's tables", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestApprovalWindowsPerSession: two concurrent MCP sessions of the same token. A's
// config_mutation queues for approval and A waits (awaiting_input); the operator's approval
// opens A's assent window and A goes on (executing); the same command in A then runs without
// a new approval, while B, with its own plan, still gets pending_approval.
func TestApprovalWindowsPerSession(t *testing.T) {
	t.Parallel()
	s := lab(t)
	a, b := s.connect(t, s.mcpAgent), s.connect(t, s.mcpAgent)
	if a.ID() == b.ID() {
		t.Fatal("two connections share one MCP session id")
	}
	const target, command = "lxc:jellyfin", "systemctl restart jellyfin"
	var cl struct {
		RiskClass        string `json:"risk_class"`
		ApprovalRequired bool   `json:"approval_required"`
	}
	mustCall(t, a, "classify_command", map[string]any{"command": command, "target": target}).JSON(t, &cl)
	if cl.RiskClass != "config_mutation" || !cl.ApprovalRequired {
		t.Fatalf("classify_command %q: %+v; want config_mutation needing approval", command, cl)
	}
	startTask(t, a, "Restart jellyfin on lxc:jellyfin (session A)")
	startTask(t, b, "Restart jellyfin on lxc:jellyfin (session B)")
	runArgs := map[string]any{"target": target, "command": command, "purpose": "e2e: windows never leak"}

	queued := func(cs *mcp.ClientSession, r result) string {
		t.Helper()
		var q struct {
			Status, Next string
			ApprovalID   string `json:"approval_id"`
			RiskClass    string `json:"risk_class"`
		}
		r.JSON(t, &q)
		if q.Status != "pending_approval" || q.ApprovalID == "" || q.RiskClass != "config_mutation" {
			t.Fatalf("session %s: run %q answered %s; want pending_approval with an approval id", cs.ID(), command, r.Text)
		}
		if got := s.session(t, cs.ID()); got.Status != "awaiting_input" || got.Awaiting != "approval" {
			t.Errorf("session %s waits on approval %s but agent_sessions says %+v; want awaiting_input (approval)", cs.ID(), q.ApprovalID, got)
		}
		return q.ApprovalID
	}
	executing := func(id string) {
		t.Helper()
		s.eventually(t, 5*time.Second, "session "+id+" back to executing after the decision", func() (bool, string) {
			got := s.session(t, id)
			return got.Status == "executing" && got.Awaiting == "", got.Status + "/" + got.Awaiting
		})
	}

	approvalA := queued(a, mustCall(t, a, "run", runArgs))
	var decision struct {
		Execution execution `json:"execution"`
		Window    *struct {
			Kind      string `json:"kind"`
			SessionID string `json:"session_id"`
		} `json:"window"`
	}
	op := s.client.API(t, s.operator)
	e2estack.OK(t, &decision)(op.DecideApproval(t.Context(), approvalA,
		apiclient.DecisionRequest{Decision: "approve", Via: "button", Reason: apiclient.Ptr("e2e")}))
	if decision.Window == nil || decision.Window.Kind != "assent" || decision.Window.SessionID != a.ID() {
		t.Fatalf("approving A's config_mutation opened %+v; want A's assent window", decision.Window)
	}
	executing(a.ID())
	s.waitEnd(t, s.operator, decision.Execution.ID)

	// Within A's window the same command runs without a new approval.
	var again execution
	mustCall(t, a, "run", runArgs).JSON(t, &again)
	if again.Status != "completed" || again.ID == decision.Execution.ID {
		t.Errorf("the same command again in session A: %+v; want it to run within A's window", again)
	}
	var approvalsA struct {
		Items []struct{ ID string } `json:"items"`
	}
	e2estack.OK(t, &approvalsA)(op.ListApprovals(t.Context(), &apiclient.ListApprovalsParams{SessionId: apiclient.Ptr(a.ID())}))
	if len(approvalsA.Items) != 1 {
		t.Errorf("session A has %d approvals; want only the first", len(approvalsA.Items))
	}
	for _, e := range s.executions(t, a.ID()) {
		if e.ID == again.ID && e.AuthorisedBy != "assent_window" {
			t.Errorf("A's second run was authorised_by %q; want assent_window", e.AuthorisedBy)
		}
		if e.RequestedBy != mcpAgentName {
			t.Errorf("A's execution %s requested_by %q", e.ID, e.RequestedBy)
		}
	}

	// B has no window: the same command queues for its own approval.
	approvalB := queued(b, mustCall(t, b, "run", runArgs))
	if approvalB == approvalA {
		t.Fatal("session B was given A's approval")
	}
	e2estack.OK(t, nil)(op.DecideApproval(t.Context(), approvalB,
		apiclient.DecisionRequest{Decision: "deny", Via: "button", Reason: apiclient.Ptr("e2e: B has no window")}))
	executing(b.ID())
	if got := s.executions(t, b.ID()); len(got) != 1 || got[0].Status != "denied" {
		t.Errorf("session B's executions: %+v; want the one, denied", got)
	}
}

// TestPlanFirst: a run that is not read-only, before any plan, is refused with a result that
// names the missing plan, and nothing is queued.
func TestPlanFirst(t *testing.T) {
	t.Parallel()
	s := lab(t)
	cs := s.connect(t, s.mcpAgent)
	mustCall(t, cs, "set_goal", map[string]any{"goal": "Restart jellyfin on lxc:jellyfin without a plan"})
	mustFail(t, cs, "run", map[string]any{"target": "lxc:jellyfin", "command": "systemctl restart jellyfin", "purpose": "e2e: plan first"},
		"plan first", "no plan", "propose_plan", "nothing was queued")
	mustFail(t, cs, "request_execution", map[string]any{"action": "restart", "target": "lxc:jellyfin", "purpose": "e2e: plan first"},
		"plan first", "propose_plan")
	if got := s.executions(t, cs.ID()); len(got) != 0 {
		t.Errorf("refused runs queued %d executions: %+v", len(got), got)
	}
	// Read-only commands need no plan.
	mustCall(t, cs, "run", map[string]any{"target": "lxc:jellyfin", "command": "uptime", "purpose": "e2e: read-only needs no plan"})
}

// TestRetryCap: the same failing read-only command fails three times; the fourth identical
// call is refused with the instruction to investigate and never reaches the api; a different
// command still runs.
func TestRetryCap(t *testing.T) {
	t.Parallel()
	s := lab(t)
	cs := s.connect(t, s.mcpAgent)
	const failing = "cat /nonexistent-file"
	args := map[string]any{"target": "lxc:jellyfin", "command": failing, "purpose": "e2e: retry cap"}
	for i := 1; i <= 3; i++ {
		var e execution
		mustFail(t, cs, "run", args).JSON(t, &e)
		if e.Status != "failed" || e.ExitCode == nil || *e.ExitCode == 0 {
			t.Errorf("attempt %d: %+v; want the command's own failure", i, e)
		}
	}
	mustFail(t, cs, "run", args, "retry cap", "failed 3 times", "investigate", "nothing was queued")
	count := func() (n int) {
		for _, e := range s.executions(t, cs.ID()) {
			if e.Command == failing {
				n++
			}
		}
		return n
	}
	if n := count(); n != 3 {
		t.Errorf("the api holds %d executions of %q; want 3 (the fourth was refused before the api)", n, failing)
	}
	var e execution
	mustCall(t, cs, "run", map[string]any{"target": "lxc:jellyfin", "command": "hostname", "purpose": "e2e: another command"}).JSON(t, &e)
	if e.Output != "jellyfin\n" {
		t.Errorf("a different command after the cap answered %+v", e)
	}
}

// TestTaskFlow: set_goal, propose_plan (refused with a clear error without research first or
// write-back last), update_plan_step, complete_task; a second complete_task is refused and
// changes nothing.
func TestTaskFlow(t *testing.T) {
	t.Parallel()
	s := lab(t)
	cs := s.connect(t, s.mcpAgent)
	sid := cs.ID()
	mustCall(t, cs, "set_goal", map[string]any{"goal": "Find out why jellyfin on lxc:jellyfin is slow"})
	mustFail(t, cs, "propose_plan", map[string]any{"steps": []string{"Restart jellyfin", "Write back: record the findings with upsert_knowledge"}},
		"first step must be research")
	mustFail(t, cs, "propose_plan", map[string]any{"steps": []string{"Inspect the jellyfin logs", "Restart jellyfin"}},
		"last step must write back")
	if got := s.session(t, sid); got.PlanGeneration != 0 {
		t.Errorf("refused plans left plan_generation %d", got.PlanGeneration)
	}
	var plan struct {
		Generation int `json:"generation"`
		Steps      []struct{ Status string }
	}
	mustCall(t, cs, "propose_plan", map[string]any{"steps": goodPlan}).JSON(t, &plan)
	if plan.Generation != 1 || len(plan.Steps) != len(goodPlan) {
		t.Fatalf("propose_plan answered %+v", plan)
	}
	mustCall(t, cs, "update_plan_step", map[string]any{"step": 1, "status": "running"})
	mustCall(t, cs, "update_plan_step", map[string]any{"step": 1, "status": "done", "note": "logs read"})
	mustFail(t, cs, "update_plan_step", map[string]any{"step": 1, "status": "running"}, "step 1 is done")
	mustCall(t, cs, "complete_task", map[string]any{"outcome": "success", "summary": "Found it: the transcode cache disk was full."})
	done := s.session(t, sid)
	if done.Status != "completed" || done.Outcome != "success" {
		t.Fatalf("after complete_task: %+v", done)
	}
	mustFail(t, cs, "complete_task", map[string]any{"outcome": "failed", "summary": "Second try."}, "already complete")
	if again := s.session(t, sid); again != done {
		t.Errorf("a refused second complete_task changed the session: %+v, was %+v", again, done)
	}
}

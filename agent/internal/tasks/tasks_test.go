package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oikos-hq/oikos/agent/internal/storage"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func newService(t *testing.T) (*Service, *pgtest.DB) {
	t.Helper()
	db := pgtest.New(t)
	return New(db.Pool), db
}

func events(t *testing.T, db *pgtest.DB, session, typ string) []map[string]any {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), `SELECT payload FROM events WHERE correlation_id = $1 AND type = $2 ORDER BY id`, session, typ)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func count(t *testing.T, db *pgtest.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

var plan = []string{"Inspect the current jellyfin config and logs", "Restart jellyfin", "Write back the findings with upsert_knowledge"}

func TestTaskLifecycle(t *testing.T) {
	t.Parallel()
	s, db := newService(t)
	ctx := context.Background()
	w := Who{Session: "chat-1", Actor: "nomos", Source: "chat"}
	if _, err := s.Ensure(ctx, w); err != nil {
		t.Fatal(err)
	}
	g, err := s.SetGoal(ctx, w, "Fix jellyfin transcoding on lxc:jellyfin", "task:t1")
	if err != nil {
		t.Fatal(err)
	}
	if g.Session.Title == "" || g.Session.Task != "task:t1" || g.Superseded != "" {
		t.Fatalf("goal: %+v", g)
	}
	// A different goal supersedes the first and says so.
	g, err = s.SetGoal(ctx, w, "Upgrade the NAS", "task:t2")
	if err != nil || g.Superseded != "Fix jellyfin transcoding on lxc:jellyfin" {
		t.Fatalf("supersede: %+v %v", g, err)
	}
	if ev := events(t, db, w.Session, "task.superseded"); len(ev) != 1 || ev[0]["previous_task"] != "task:t1" {
		t.Fatalf("task.superseded events: %v", ev)
	}

	p, err := s.ProposePlan(ctx, w, plan)
	if err != nil || p.Generation != 1 || len(p.Steps) != 3 {
		t.Fatalf("plan: %+v %v", p, err)
	}
	p2, err := s.ProposePlan(ctx, w, plan[:2:2])
	if err == nil {
		t.Fatalf("a plan whose last step does not write back was accepted: %+v", p2)
	}
	p2, err = s.ProposePlan(ctx, w, append([]string{"Check disk usage"}, plan[1:]...))
	if err != nil || p2.Generation != 2 || p2.Replaced != 3 {
		t.Fatalf("second plan: %+v %v", p2, err)
	}
	if n := count(t, db, `SELECT count(*) FROM plan_steps WHERE session_id = $1 AND generation = 1 AND status = 'replaced'`, w.Session); n != 3 {
		t.Fatalf("replaced steps of generation 1: %d", n)
	}
	if _, err := s.UpdateStep(ctx, w, 1, storage.StepRunning, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateStep(ctx, w, 1, storage.StepDone, "disk fine"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateStep(ctx, w, 1, storage.StepRunning, ""); err == nil || !errors.Is(err, ErrInvalid) {
		t.Fatalf("done step moved back to running: %v", err)
	}
	if _, err := s.UpdateStep(ctx, w, 9, storage.StepDone, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("step 9: %v", err)
	}

	c, err := s.Complete(ctx, w, OutcomeSuccess, "Upgraded, verified, knowledge written")
	if err != nil {
		t.Fatal(err)
	}
	if c.Session.Status != storage.StatusCompleted || c.ClosedSteps != 2 || c.StepsClosedAs != storage.StepDone || c.Session.ClosedAt == nil {
		t.Fatalf("complete: %+v", c)
	}
	// A second completion is refused and changes nothing.
	before := count(t, db, `SELECT count(*) FROM audit_log WHERE correlation_id = $1`, w.Session)
	if _, err := s.Complete(ctx, w, OutcomeFailed, "again"); !errors.Is(err, ErrAlreadyComplete) {
		t.Fatalf("second completion: %v", err)
	}
	after, _ := s.Session(ctx, w.Session)
	if after.Outcome != OutcomeSuccess || after.Status != storage.StatusCompleted || count(t, db, `SELECT count(*) FROM audit_log WHERE correlation_id = $1`, w.Session) != before {
		t.Fatalf("second completion changed the session: %+v", after)
	}
	// A follow-up plan reopens the task with a fresh generation.
	p3, err := s.ProposePlan(ctx, w, plan)
	if err != nil || !p3.Reopened || p3.Generation != 3 {
		t.Fatalf("reopen by plan: %+v %v", p3, err)
	}
	reopened, _ := s.Session(ctx, w.Session)
	if reopened.Status != storage.StatusExecuting || reopened.Outcome != "" || reopened.ClosedAt != nil {
		t.Fatalf("reopened: %+v", reopened)
	}
	// Every status change emitted task.status, in order.
	var moves []string
	for _, e := range events(t, db, w.Session, "task.status") {
		moves = append(moves, e["from"].(string)+">"+e["status"].(string))
	}
	if got := strings.Join(moves, " "); got != ">executing executing>completed completed>executing" {
		t.Fatalf("task.status: %s", got)
	}
	// Every change is audited.
	if n := count(t, db, `SELECT count(*) FROM audit_log WHERE correlation_id = $1 AND action LIKE 'task.%'`, w.Session); n < 8 {
		t.Fatalf("audit rows: %d", n)
	}
}

func TestPlanRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		steps []string
		want  string
	}{
		{[]string{"Write back"}, "at least two steps"},
		{[]string{"Restart nginx", "Write back the findings"}, "first step must be research"},
		{[]string{"Inspect nginx", "Restart nginx"}, "last step must write back"},
		{[]string{"Inspect nginx", " ", "Record the findings in the knowledge base"}, "step 2 is empty"},
		{[]string{"Investigate why backups fail", "Fix the job", "Document the fix as a runbook"}, ""},
		{[]string{"Check what holds the NFS lock", "Update the graph with update_entity_attributes"}, ""},
	} {
		_, err := checkPlan(tc.steps)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%q: %v, want %q", tc.steps, err, tc.want)
		}
	}
}

func TestDeriveBlocker(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"The approval timed out before the operator answered":         BlockerApprovalTimeout,
		"Waiting on the operator's approval; it expired":              BlockerApprovalTimeout,
		"The operator cancelled the task":                             BlockerUserAbandoned,
		"The classifier marked a read-only grep as destructive":       BlockerClassifierOverreach,
		"I can't help with wiping the disks of another person's host": BlockerModelRefusal,
		"chown failed with permission denied on the NFS export":       BlockerToolError,
		"Partially migrated; the rest is left for tomorrow":           "",
	} {
		if got := DeriveBlocker(text, "", nil); got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
	if got := DeriveBlocker("left for later", "", []storage.ToolCall{{IsError: true}}); got != BlockerToolError {
		t.Errorf("last call failed: %q", got)
	}
}

// A task waiting on an approval is awaiting_input until the decision; the idle sweep never
// closes it, but does close an idle task that waits on nothing.
func TestAwaitingApprovalAndSweep(t *testing.T) {
	t.Parallel()
	s, db := newService(t)
	ctx := context.Background()
	waiting := Who{Session: "mcp-wait", Actor: "claude", Source: "mcp"}
	idle := Who{Session: "mcp-idle", Actor: "claude", Source: "mcp"}
	asked := Who{Session: "mcp-asked", Actor: "claude", Source: "mcp"}
	for _, w := range []Who{waiting, idle, asked} {
		if _, err := s.Ensure(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AwaitApproval(ctx, waiting, "appr-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ask(ctx, asked, "Which disk?", []string{"sda", "sdb"}); err != nil {
		t.Fatal(err)
	}
	sess, _ := s.Session(ctx, waiting.Session)
	if sess.Status != storage.StatusAwaitingInput || sess.Awaiting != "approval" {
		t.Fatalf("waiting: %+v", sess)
	}
	// Everything looks idle to a sweep in the future.
	future := time.Now().Add(time.Hour)
	// The api still holds a pending approval for mcp-asked's session? No: only mcp-wait's.
	pending := func(_ context.Context, id string) (bool, error) { return id == waiting.Session, nil }
	closed, err := s.SweepIdle(ctx, future, pending)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(closed, ",") != "mcp-idle,mcp-asked" && strings.Join(closed, ",") != "mcp-asked,mcp-idle" {
		t.Fatalf("swept %v", closed)
	}
	sess, _ = s.Session(ctx, waiting.Session)
	if sess.Status != storage.StatusAwaitingInput {
		t.Fatalf("the sweep closed a task waiting on an approval: %+v", sess)
	}
	gone, _ := s.Session(ctx, idle.Session)
	if gone.Status != storage.StatusAbandoned || gone.Blocker != BlockerUserAbandoned {
		t.Fatalf("idle: %+v", gone)
	}
	// The decision flips the waiting task back to executing.
	if err := s.Decided(ctx, waiting.Session, "dana", "approve"); err != nil {
		t.Fatal(err)
	}
	sess, _ = s.Session(ctx, waiting.Session)
	if sess.Status != storage.StatusExecuting || sess.Awaiting != "" {
		t.Fatalf("after decision: %+v", sess)
	}
	// A decision about a session the agent does not hold is ignored.
	if err := s.Decided(ctx, "cli-session", "dana", "approve"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, `SELECT count(*) FROM events WHERE correlation_id = $1 AND type = 'task.status'`, waiting.Session); n != 3 {
		t.Fatalf("task.status events of the waiting task: %d", n)
	}
}

// Prior partial or failed tasks about the same targets are listed by set_goal; others not.
func TestPriorTasks(t *testing.T) {
	t.Parallel()
	s, db := newService(t)
	ctx := context.Background()
	old := Who{Session: "old", Actor: "nomos"}
	other := Who{Session: "other", Actor: "nomos"}
	for _, w := range []Who{old, other} {
		if _, err := s.Ensure(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for w, ent := range map[Who]string{old: "lxc:jellyfin", other: "nas:vault"} {
		if err := storage.InsertActivity(ctx, db.Pool, storage.Activity{SessionID: w.Session, Kind: "run", Entity: ent}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Complete(ctx, w, OutcomePartial, "chown failed: permission denied"); err != nil {
			t.Fatal(err)
		}
	}
	w := Who{Session: "new", Actor: "nomos"}
	if _, err := s.Ensure(ctx, w); err != nil {
		t.Fatal(err)
	}
	g, err := s.SetGoal(ctx, w, "Fix the jellyfin library permissions", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Prior) != 1 || g.Prior[0].ID != "old" || g.Prior[0].Blocker != BlockerToolError {
		t.Fatalf("prior: %+v", g.Prior)
	}
}

// Concurrent changes to one session serialise on its row: every step update lands once.
func TestConcurrentChanges(t *testing.T) {
	t.Parallel()
	s, db := newService(t)
	ctx := context.Background()
	w := Who{Session: "busy", Actor: "nomos"}
	if _, err := s.Ensure(ctx, w); err != nil {
		t.Fatal(err)
	}
	steps := []string{"Inspect a"}
	for i := 0; i < 8; i++ {
		steps = append(steps, "do "+string(rune('a'+i)))
	}
	steps = append(steps, "Write back the results")
	if _, err := s.ProposePlan(ctx, w, steps); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 1; i <= len(steps); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.UpdateStep(ctx, w, i, storage.StepDone, ""); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := count(t, db, `SELECT count(*) FROM plan_steps WHERE session_id = 'busy' AND status = 'done'`); n != len(steps) {
		t.Fatalf("done steps: %d of %d", n, len(steps))
	}
	if n := count(t, db, `SELECT count(*) FROM events WHERE correlation_id = 'busy' AND type = 'task.step'`); n != len(steps) {
		t.Fatalf("task.step events: %d", n)
	}
}

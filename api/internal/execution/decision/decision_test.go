package decision_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oikos-hq/oikos/api/internal/apierr"
	"github.com/oikos-hq/oikos/api/internal/execution"
	"github.com/oikos-hq/oikos/api/internal/execution/exectest"
	"github.com/oikos-hq/oikos/testkit/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

func TestDedup(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	for _, session := range []string{"", "sess-dedup"} {
		const n = 8
		results := make([]execution.Execution, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = f.Svc.Request(ctx, exectest.Agent, exectest.Run("lxc:db", exectest.CmdMutation, session))
			}()
		}
		close(start)
		wg.Wait()
		created := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("session %q request %d: %v", session, i, errs[i])
			}
			if results[i].ID != results[0].ID {
				t.Fatalf("session %q: two executions %s and %s for one request", session, results[0].ID, results[i].ID)
			}
			if !results[i].AlreadyQueued {
				created++
			} else if !strings.Contains(results[i].Message, "already queued") {
				t.Errorf("already-queued message: %q", results[i].Message)
			}
		}
		if created != 1 {
			t.Fatalf("session %q: %d requests created an execution, want 1", session, created)
		}
		if c := f.Count(t, `SELECT count(*) FROM executions WHERE target_slug = 'lxc:db' AND coalesce(session_id, '') = $1`, session); c != 1 {
			t.Fatalf("session %q: %d execution rows", session, c)
		}
	}
	// Same command, other session: not a duplicate (but it queues its own approval).
	other := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", exectest.CmdMutation, "sess-other"))
	if other.AlreadyQueued {
		t.Fatal("a request of another session was treated as a duplicate")
	}
	// Once decided, the same request queues anew.
	first := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", exectest.CmdMutation, ""))
	if !first.AlreadyQueued {
		t.Fatal("expected the pending one")
	}
	exectest.MustDecide(t, f, exectest.Operator, *first.ApprovalID, execution.DecisionDeny, execution.ViaButton)
	again := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", exectest.CmdMutation, ""))
	if again.AlreadyQueued || again.ID == first.ID {
		t.Fatal("a denied execution still counted as pending")
	}
}

// TestConcurrentDecisionsOneWins: of two decisions made at once exactly one transitions the
// approval; the other is told how it was decided.
func TestConcurrentDecisionsOneWins(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	pairs := [][2]string{{execution.DecisionApprove, execution.DecisionDeny}, {execution.DecisionApprove, execution.DecisionApprove}, {execution.DecisionDeny, execution.DecisionRevoke}, {execution.DecisionApprove, execution.DecisionRevoke}}
	for round := range 20 {
		e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", fmt.Sprintf("touch /srv/round-%d", round), ""))
		pair := pairs[round%len(pairs)]
		var wg sync.WaitGroup
		results := make([]execution.DecisionResult, 2)
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = f.Dec.Decide(ctx, exectest.Operator, *e.ApprovalID, execution.Decision{Decision: pair[i], Via: execution.ViaButton})
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		var winner execution.DecisionResult
		var loser error
		for i := range 2 {
			if errs[i] == nil {
				wins++
				winner = results[i]
			} else {
				loser = errs[i]
			}
		}
		// approve then revoke may both succeed (revoke applies to an approved execution
		// that has not started); every other pair has exactly one winner.
		if pair == [2]string{execution.DecisionApprove, execution.DecisionRevoke} && wins == 2 {
			got, _ := f.Svc.Get(ctx, e.ID)
			if got.Status != execution.StatusRevoked {
				t.Fatalf("round %d: approve and revoke both won but the execution is %s", round, got.Status)
			}
			continue
		}
		if wins != 1 {
			t.Fatalf("round %d (%v): %d winners (%v)", round, pair, wins, errs)
		}
		var ce *execution.ConflictError
		if !errors.As(loser, &ce) || !strings.Contains(ce.Reason, "already") {
			t.Fatalf("round %d: loser error %v, want a conflict saying it was already decided", round, loser)
		}
		got, err := f.Svc.Get(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != winner.Execution.Status {
			t.Fatalf("round %d: execution is %s, the winner moved it to %s", round, got.Status, winner.Execution.Status)
		}
		if n := f.Count(t, `SELECT count(*) FROM events WHERE type = 'approval.decided' AND payload->>'approval_id' = $1`, *e.ApprovalID); n != 1 {
			t.Fatalf("round %d: %d approval.decided events", round, n)
		}
	}
}

func TestDecisionsMoveTheExecution(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	cases := []struct {
		decision, wantExec, wantApproval string
	}{
		{execution.DecisionApprove, execution.StatusApproved, execution.ApprovalApproved},
		{execution.DecisionDeny, execution.StatusDenied, execution.ApprovalDenied},
		{execution.DecisionRevoke, execution.StatusRevoked, execution.ApprovalRevoked},
	}
	for i, c := range cases {
		e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", fmt.Sprintf("touch /srv/move-%d", i), ""))
		res := exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, c.decision, execution.ViaButton)
		if res.Execution.Status != c.wantExec || res.Approval.Status != c.wantApproval {
			t.Errorf("%s: execution %s approval %s", c.decision, res.Execution.Status, res.Approval.Status)
		}
		if res.Approval.DecidedBy == nil || *res.Approval.DecidedBy != "alice" || res.Approval.Via == nil || *res.Approval.Via != execution.ViaButton {
			t.Errorf("%s: decision not recorded: %+v", c.decision, res.Approval)
		}
		if got, _ := f.Svc.Get(ctx, e.ID); got.Status != c.wantExec {
			t.Errorf("%s: stored execution status %s", c.decision, got.Status)
		}
	}
	// Revoke after approval, before the scheduler claims it.
	e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", "touch /srv/revoke-late", ""))
	exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, execution.DecisionApprove, execution.ViaAPI)
	res := exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, execution.DecisionRevoke, execution.ViaButton)
	if res.Execution.Status != execution.StatusRevoked {
		t.Fatalf("revoke of an approved execution: %s", res.Execution.Status)
	}
	// Once running it can no longer be revoked.
	e = exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", "touch /srv/revoke-running", ""))
	exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, execution.DecisionApprove, execution.ViaAPI)
	if _, err := f.Pool.Exec(ctx, `UPDATE executions SET status = 'running', started_at = now() WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	_, err := f.Dec.Decide(ctx, exectest.Operator, *e.ApprovalID, execution.Decision{Decision: execution.DecisionRevoke, Via: execution.ViaButton})
	var ce *execution.ConflictError
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "running") {
		t.Fatalf("revoke of a running execution: %v", err)
	}
	if _, err := f.Dec.Decide(ctx, exectest.Operator, "0190b7a4-0000-7000-8000-000000000000", execution.Decision{Decision: execution.DecisionApprove, Via: execution.ViaButton}); !errors.Is(err, execution.ErrNotFound) {
		t.Fatalf("unknown approval: %v", err)
	}
}

// TestDecisionRecordsRealRiskClass: the approval carries the execution's class, whatever was
// stored before (the original hard-coded config_mutation on every approval).
func TestDecisionRecordsRealRiskClass(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	for i, c := range []struct{ command, class, via string }{
		{exectest.CmdDestructive, "destructive", execution.ViaTypedConfirmation},
		{"rm -rf /var/lib/other", "destructive", execution.ViaButton},
		{exectest.CmdMutation, "config_mutation", execution.ViaAPI},
		{"touch /srv/chat", "config_mutation", execution.ViaChatAssent},
	} {
		e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("host:box", c.command, fmt.Sprintf("sess-class-%d", i)))
		// Corrupt the stored class: the decision must write the real one back.
		if _, err := f.Pool.Exec(ctx, `UPDATE approvals SET risk_class = 'read_only' WHERE id = $1`, *e.ApprovalID); err != nil {
			t.Fatal(err)
		}
		res := exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, execution.DecisionApprove, c.via)
		if res.Approval.RiskClass != c.class {
			t.Errorf("%s: approval records %s, want %s", c.command, res.Approval.RiskClass, c.class)
		}
		var payloadClass string
		if err := f.Pool.QueryRow(ctx, `SELECT payload->>'risk_class' FROM events WHERE type = 'approval.decided' AND payload->>'approval_id' = $1`,
			*e.ApprovalID).Scan(&payloadClass); err != nil || payloadClass != c.class {
			t.Errorf("%s: approval.decided carries %q (%v), want %s", c.command, payloadClass, err, c.class)
		}
	}
}

// TestDecisionRoles: only an operator decides on its own say-so. An agent (naming no message,
// or one the api never recorded) and a readonly token are refused every decision by every via,
// and nothing is written but the agent's refusals' audit rows (approval.relay_refused).
func TestDecisionRoles(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdMutation, "sess-roles"))
	d := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdDestructive, "sess-roles-2"))
	for _, id := range []string{*e.ApprovalID, *d.ApprovalID} {
		for _, m := range []execution.Meta{exectest.Agent, exectest.Readonly} {
			for _, via := range []string{execution.ViaButton, execution.ViaChatAssent, execution.ViaTypedConfirmation, execution.ViaAPI} {
				for _, dec := range []string{execution.DecisionApprove, execution.DecisionDeny, execution.DecisionRevoke} {
					for _, msg := range []string{"", "msg-42"} {
						_, err := f.Dec.Decide(ctx, m, id, execution.Decision{Decision: dec, Via: via, MessageID: msg})
						if !errors.Is(err, execution.ErrForbidden) || !strings.Contains(err.Error(), "only an operator's token may decide") {
							t.Errorf("%s %s via %s (message %q): err = %v, want forbidden", m.Role, dec, via, msg, err)
						}
					}
				}
			}
		}
		// Refused even for a malformed or unknown decision: the role is checked first.
		if _, err := f.Dec.Decide(ctx, exectest.Agent, id, execution.Decision{Decision: "maybe", Via: "telepathy"}); !errors.Is(err, execution.ErrForbidden) {
			t.Errorf("agent, malformed decision: %v", err)
		}
		got, err := f.Svc.GetApproval(ctx, id)
		if err != nil || got.Status != execution.ApprovalPending || got.DecidedBy != nil || got.ExecutionStatus != execution.StatusPendingApproval {
			t.Fatalf("refused decisions changed the approval: %+v %v", got, err)
		}
		var audits, events int
		if err := f.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM audit_log WHERE action LIKE 'approval.%' AND after->>'id' = $1),
			(SELECT count(*) FROM events WHERE type = 'approval.decided' AND payload->>'approval_id' = $1)`, id).Scan(&audits, &events); err != nil {
			t.Fatal(err)
		}
		if audits != 0 || events != 0 {
			t.Fatalf("refused decisions wrote %d audit rows and %d events", audits, events)
		}
	}
	for _, d := range []execution.Decision{{Decision: "maybe", Via: execution.ViaButton}, {Decision: execution.DecisionApprove, Via: "telepathy"}} {
		var fe *execution.FieldError
		if _, err := f.Dec.Decide(ctx, exectest.Operator, *e.ApprovalID, d); !errors.As(err, &fe) {
			t.Errorf("%+v: err = %v, want a field error", d, err)
		}
	}
	// The operator's own chat assent, with its message id, approves the config_mutation.
	res, err := f.Dec.Decide(ctx, exectest.Operator, *e.ApprovalID, execution.Decision{Decision: execution.DecisionApprove, Via: execution.ViaChatAssent, MessageID: "msg-42"})
	if err != nil {
		t.Fatalf("operator's chat assent: %v", err)
	}
	if res.Approval.MessageID == nil || *res.Approval.MessageID != "msg-42" || *res.Approval.DecidedBy != exectest.Operator.Actor {
		t.Fatalf("chat assent not recorded: %+v", res.Approval)
	}
	// Chat assent never approves a destructive execution, nor does via=api.
	_, err = f.Dec.Decide(ctx, exectest.Operator, *d.ApprovalID, execution.Decision{Decision: execution.DecisionApprove, Via: execution.ViaChatAssent, MessageID: "msg-43"})
	exectest.RefusedCode(t, err, "destructive_needs_confirmation")
	_, err = f.Dec.Decide(ctx, exectest.Operator, *d.ApprovalID, execution.Decision{Decision: execution.DecisionApprove, Via: execution.ViaAPI})
	exectest.RefusedCode(t, err, "destructive_needs_confirmation")
	if got, _ := f.Svc.GetApproval(ctx, *d.ApprovalID); got.Status != execution.ApprovalPending {
		t.Fatalf("refused decisions changed the approval: %s", got.Status)
	}
	// The approval carries the phrase to type; a wrong one (the dashboard sends what the
	// operator typed) approves nothing.
	pending, _ := f.Svc.GetApproval(ctx, *d.ApprovalID)
	if pending.ConfirmationPhrase != "confirm rm lxc:web" {
		t.Fatalf("confirmation phrase %q, want %q", pending.ConfirmationPhrase, "confirm rm lxc:web")
	}
	_, err = f.Dec.Decide(ctx, exectest.Operator, *d.ApprovalID, execution.Decision{Decision: execution.DecisionApprove, Via: execution.ViaTypedConfirmation, Confirmation: "confirm rm lxc:db"})
	if fe := (*apierr.FieldError)(nil); !errors.As(err, &fe) || fe.Field != "confirmation" {
		t.Fatalf("a wrong typed phrase: %v, want a field error on confirmation", err)
	}
	if got, _ := f.Svc.GetApproval(ctx, *d.ApprovalID); got.Status != execution.ApprovalPending {
		t.Fatalf("a wrong phrase changed the approval: %s", got.Status)
	}
	// The operator's typed confirmation approves it and opens the destructive window for that
	// target and session; the audit row and the event name the operator.
	res, err = f.Dec.Decide(ctx, exectest.Operator, *d.ApprovalID, execution.Decision{Decision: execution.DecisionApprove, Via: execution.ViaTypedConfirmation, MessageID: "msg-44",
		Confirmation: pending.ConfirmationPhrase})
	if err != nil || res.Approval.RiskClass != "destructive" || res.Window == nil || res.Window.Kind != "destructive" || res.Window.Target != "lxc:web" {
		t.Fatalf("typed confirmation: %+v %v", res, err)
	}
	var auditActor, auditBy, eventActor, eventBy string
	if err := f.Pool.QueryRow(ctx, `SELECT a.actor, a.after->>'decided_by', e.actor, e.payload->>'decided_by'
		FROM audit_log a, events e
		WHERE a.action = 'approval.approve' AND a.after->>'id' = $1
		  AND e.type = 'approval.decided' AND e.payload->>'approval_id' = $1`, *d.ApprovalID).
		Scan(&auditActor, &auditBy, &eventActor, &eventBy); err != nil {
		t.Fatal(err)
	}
	if auditActor != exectest.Operator.Actor || auditBy != exectest.Operator.Actor || eventActor != exectest.Operator.Actor || eventBy != exectest.Operator.Actor {
		t.Fatalf("decided by: audit %q/%q, event %q/%q; want %s", auditActor, auditBy, eventActor, eventBy, exectest.Operator.Actor)
	}
}

func TestWindowExpiryAndRevoke(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdMutation, "sess-w"))
	res := exectest.MustDecide(t, f, exectest.Operator, *e.ApprovalID, execution.DecisionApprove, execution.ViaButton)
	if res.Window == nil || res.Window.Kind != "assent" || time.Until(res.Window.ExpiresAt) < 29*time.Minute {
		t.Fatalf("assent window: %+v", res.Window)
	}
	in := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", "touch /srv/in-window", "sess-w"))
	if in.Status != execution.StatusApproved || in.AuthorisedBy != execution.AuthorisedAssent {
		t.Fatalf("inside the window: %+v", in)
	}
	if _, err := f.Pool.Exec(ctx, `UPDATE approval_windows SET expires_at = now() - interval '1 second' WHERE session_id = 'sess-w'`); err != nil {
		t.Fatal(err)
	}
	late := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", "touch /srv/after-window", "sess-w"))
	if late.Status != execution.StatusPendingApproval {
		t.Fatalf("after the window expired: %+v", late)
	}
	// Revoking the approval that opened a window closes it.
	e2 := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", exectest.CmdMutation, "sess-w2"))
	exectest.MustDecide(t, f, exectest.Operator, *e2.ApprovalID, execution.DecisionApprove, execution.ViaButton)
	exectest.MustDecide(t, f, exectest.Operator, *e2.ApprovalID, execution.DecisionRevoke, execution.ViaButton)
	if e := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", "touch /srv/after-revoke", "sess-w2")); e.Status != execution.StatusPendingApproval {
		t.Fatalf("window of a revoked approval still served: %+v", e)
	}
}

// TestAuditEventsAndEntity: every mutation leaves its audit row and events, the execution
// entity and its edges commit with it, and a runnable execution is NOTIFYed.
func TestAuditEventsAndEntity(t *testing.T) {
	t.Parallel()
	f := exectest.NewFixture(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `LISTEN oikos_exec`); err != nil {
		t.Fatal(err)
	}
	waitNotify := func(want string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		n, err := conn.WaitForNotification(wctx)
		if err != nil || n.Payload != want {
			t.Fatalf("oikos_exec notification: %v %v, want %s", n, err, want)
		}
	}
	events := func(exec string) []string {
		rows, err := f.Pool.Query(ctx, `SELECT type FROM events WHERE payload->>'execution_id' = $1 ORDER BY id`, exec)
		if err != nil {
			t.Fatal(err)
		}
		types, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return types
	}
	audits := func(action, target string) int {
		return f.Count(t, `SELECT count(*) FROM audit_log WHERE action = $1 AND entity_id = (SELECT id FROM entities WHERE slug = $2)`, action, target)
	}
	ro := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdRead, "sess-task"))
	waitNotify(ro.ID)
	if got := strings.Join(events(ro.ID), ","); got != "execution.requested,execution.approved" {
		t.Errorf("run-now events: %s", got)
	}
	q := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:web", exectest.CmdMutation, "sess-task"))
	if got := strings.Join(events(q.ID), ","); got != "execution.requested,execution.queued,approval.requested" {
		t.Errorf("queued events: %s", got)
	}
	if audits("execution.request", "lxc:web") != 2 {
		t.Errorf("execution.request audit rows: %d", audits("execution.request", "lxc:web"))
	}
	exectest.MustDecide(t, f, exectest.Operator, *q.ApprovalID, execution.DecisionApprove, execution.ViaButton)
	waitNotify(q.ID)
	if got := strings.Join(events(q.ID), ","); got != "execution.requested,execution.queued,approval.requested,approval.decided,execution.approved" {
		t.Errorf("decided events: %s", got)
	}
	if audits("approval.approve", "lxc:web") != 1 {
		t.Error("no approval.approve audit row")
	}
	d := exectest.MustRequest(t, f, exectest.Agent, exectest.Run("lxc:db", exectest.CmdMutation, ""))
	exectest.MustDecide(t, f, exectest.Operator, *d.ApprovalID, execution.DecisionDeny, execution.ViaButton)
	if got := strings.Join(events(d.ID), ","); !strings.HasSuffix(got, "approval.decided,execution.denied") {
		t.Errorf("deny events: %s", got)
	}
	var actor, corr string
	if err := f.Pool.QueryRow(ctx, `SELECT actor, correlation_id FROM events WHERE type = 'execution.queued' AND payload->>'execution_id' = $1`, q.ID).
		Scan(&actor, &corr); err != nil || actor != "nomos" || corr != "sess-task" {
		t.Errorf("event actor/correlation: %q %q %v", actor, corr, err)
	}
	// G12: the entity (slug from the full id), targets edge, and involves edge from the
	// session's task.
	for _, e := range []execution.Execution{ro, q} {
		var state string
		if err := f.Pool.QueryRow(ctx, `SELECT state FROM entities WHERE slug = $1`, "execution:"+e.ID).Scan(&state); err != nil {
			t.Fatalf("execution entity of %s: %v", e.ID, err)
		}
		for _, edge := range []struct{ typ, src string }{{"targets", "lxc:web"}, {"involves", "task:t1"}} {
			n := f.Count(t, `SELECT count(*) FROM relationships r JOIN entities s ON s.id = r.source_id JOIN entities d ON d.id = r.target_id
				WHERE r.type = $1 AND s.slug = $2 AND d.slug = $3 AND r.valid_to IS NULL`, edge.typ, edge.src, "execution:"+e.ID)
			if n != 1 {
				t.Errorf("%s edge %s -> execution:%s: %d", edge.typ, edge.src, e.ID, n)
			}
		}
	}
	if n := f.Count(t, `SELECT count(*) FROM relationships r JOIN entities d ON d.id = r.target_id WHERE r.type = 'involves' AND d.slug = $1`, "execution:"+d.ID); n != 0 {
		t.Errorf("an execution without a session got an involves edge")
	}
}
